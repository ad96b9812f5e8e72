// The sm90 forward kernel shell: shared-memory setup, warpgroup roles, register split, and the
// host-side launcher every instantiation unit compiles.
//
//   warpgroup 0      producer: one thread issues TMA loads (mainloop.cuh, Producer); kVarlen: the
//                    first warp walks the tiles (its lanes zero V tails), lane 0 issues TMA
//   warpgroups 1..   consumers: 64 query rows each, wgmma + online softmax (Consumer), epilogue
#pragma once

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <string>

#include "common/cuda_check.hpp"
#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "sm90/head_groups.hpp"
#include "sm90/kernel_traits.cuh"
#include "sm90/launch_args.hpp"
#include "sm90/mainloop.cuh"
#include "sm90/stream_k.hpp"
#include "sm90/tile_order.hpp"

namespace flashcore::sm90 {

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    forward_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                   const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_o,
                   const __grid_constant__ KernelParams params) {
  using Storage = typename Traits::SharedStorage;
  extern __shared__ uint8_t smem_raw[];
  // Swizzled tiles must sit on 1024-byte boundaries of the shared window (tensor-core notes §3).
  const uint32_t misalign = ptx::smem_addr(smem_raw) & 1023u;
  Storage& smem = *reinterpret_cast<Storage*>(smem_raw + ((1024u - misalign) & 1023u));

  // kBroadcastWarpIndex (tile_config.hpp): warpgroup and warp broadcast from lane 0, so the compiler
  // knows they are warp-uniform and keeps what derives from them in uniform registers.
  constexpr bool kBroadcast = Traits::Config::kBroadcastWarpIndex;
  const int warpgroup = kBroadcast ? __shfl_sync(0xffffffffu, int(threadIdx.x / 128), 0) : int(threadIdx.x / 128);
  const int warp = kBroadcast ? __shfl_sync(0xffffffffu, int(threadIdx.x / 32) % 4, 0) : int(threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < Traits::kQStages; ++s) {
      ptx::mbarrier_init(&smem.q_full[s], 1);
      ptx::mbarrier_init(&smem.q_empty[s], Traits::kConsumerWarps);
    }
#pragma unroll
    for (int s = 0; s < Traits::kStages; ++s) {
      ptx::mbarrier_init(&smem.k_full[s], 1);
      ptx::mbarrier_init(&smem.k_empty[s], Traits::kStageReleases);
      ptx::mbarrier_init(&smem.v_full[s], 1);
      ptx::mbarrier_init(&smem.v_empty[s], Traits::kStageReleases);
    }
    if constexpr (Traits::kVarlen) {
      ptx::mbarrier_init(&smem.v_tail, 1);
#pragma unroll
      for (int s = 0; s < Traits::kTileSlots; ++s) {
        ptx::mbarrier_init(&smem.tile_full[s], 1);
        ptx::mbarrier_init(&smem.tile_empty[s], Traits::kConsumerWarps);
      }
    }
    ptx::mbarrier_init_fence();
    // This CTA's share of the stream-K tail, worked out once here (the producer has no registers
    // for the divisions).
    if constexpr (Traits::kStreamK) {
      smem.sk_list.fill(TileScheduler<Traits>::tail_of(params), TileScheduler<Traits>::unit());
    }
  }
  // Barrier initialisation (and the tail's list) by thread 0 before any use by the producer or consumers. The last
  // CTA-wide barrier before the role split. Cluster kernel: before any use by the other CTA too
  // (its multicast copies and stage releases land on this CTA's barriers).
  if constexpr (Traits::kClusterM > 1) {
    ptx::cluster_sync();
  } else {
    __syncthreads();
  }

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<Traits::Config::kProducerRegs>();
    if (warp == 0 && (Producer<Traits>::kWholeWarp || lane == 0)) {
      Producer<Traits>::run(smem, &tm_q, &tm_k, &tm_v, params, lane);
    }
    // Cluster kernel: the producer warp's other lanes wait for its leader here, so the whole warp
    // reaches the final cluster barrier together.
    if constexpr (Traits::kClusterM > 1) __syncwarp();
  } else {
    ptx::setmaxnreg_inc<Traits::Config::kConsumerRegs>();
    uint8_t* o_staging = reinterpret_cast<uint8_t*>(&smem) + sizeof(Storage);
    Consumer<Traits> consumer{smem, params, &tm_o, o_staging, warpgroup - 1, lane, warp};
    consumer.run();
  }
  // Cluster kernel: no CTA leaves while the other may still release stages on its barriers. (Its
  // multicast copies into this CTA all completed: this CTA's consumers waited for every one.)
  if constexpr (Traits::kClusterM > 1) ptx::cluster_sync();
}

// The launch configuration of a cluster kernel: `ctas` CTAs in clusters of Traits::kClusterM along x.
// (Not copyable: the configuration points at its own attribute.)
template <class Traits>
struct ClusterLaunchConfig {
  cudaLaunchAttribute cluster_dim{};
  cudaLaunchConfig_t config{};
  ClusterLaunchConfig(int ctas, cudaStream_t stream) {
    cluster_dim.id = cudaLaunchAttributeClusterDimension;
    cluster_dim.val.clusterDim.x = Traits::kClusterM, cluster_dim.val.clusterDim.y = 1, cluster_dim.val.clusterDim.z = 1;
    config.gridDim = dim3(ctas), config.blockDim = dim3(Traits::kThreads);
    config.dynamicSmemBytes = Traits::kSmemBytes, config.stream = stream;
    config.attrs = &cluster_dim, config.numAttrs = 1;
  }
  ClusterLaunchConfig(const ClusterLaunchConfig&) = delete;
  ClusterLaunchConfig& operator=(const ClusterLaunchConfig&) = delete;
};

template <class Traits>
Status launch_with_traits(const LaunchArgs& args, cudaStream_t stream) {
  CUtensorMap tm_q, tm_k, tm_v;
  FC_RETURN_IF_ERROR(encode_operand_map(&tm_q, args.q, args.dtype, Traits::kBlockM));
  if (args.k.base != nullptr && args.v.base != nullptr) {
    // Cluster kernel: a box is this CTA's share of the 64-column chunks (mainloop.cuh).
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_k, args.k, args.dtype, Traits::kBlockN, Traits::kKChunksPerCta));
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_v, args.v, args.dtype, Traits::kBlockN, Traits::kVChunksPerCta));
  } else {
    tm_k = tm_v = tm_q;  // a call without keys (k/v may be null): never loaded, every tile's range is empty
  }
  CUtensorMap tm_o = tm_q;  // unused by the direct epilogue
  if constexpr (Traits::kEpilogueTma) FC_RETURN_IF_ERROR(encode_operand_map(&tm_o, args.o, args.dtype, 64));

  KernelParams params = args.params;
  params.always_rescale_o = args.always_rescale < 0 ? Traits::Config::kAlwaysRescaleO : args.always_rescale != 0;
  params.num_m_blocks = (params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  params.m_row_shift = Traits::kPartialBlockFirst ? params.num_m_blocks * Traits::kBlockM - params.seqlen_q : 0;
  constexpr int kClusterM = Traits::kClusterM;  // the scheduler's units: tiles, or pairs of them
  if (params.num_m_blocks % kClusterM != 0) return Status::Internal("sm90: cluster kernel with an odd query-block count");
  const int64_t num_tiles = (int64_t)(params.num_m_blocks / kClusterM) * params.heads_q * params.batch;
  if (num_tiles > INT32_MAX) return Status::Unsupported("sm90: more than 2^31 query tiles");
  if (num_tiles == 0) return Status::Ok();

  auto kernel = forward_kernel<Traits>;
  // Per instantiation and device: CTAs, or clusters, resident at once (computed on first use; the
  // shared-memory opt-in is a per-device function attribute too). Atomic: calls may come from
  // several host threads; two first calls compute the same value.
  constexpr int kMaxDevices = 64;
  static std::atomic<int> max_units_of_device[kMaxDevices];
  int device = 0;
  FC_CUDA_RETURN(cudaGetDevice(&device));
  std::atomic<int>& cached_units = max_units_of_device[std::min(std::max(device, 0), kMaxDevices - 1)];
  int max_units = cached_units.load(std::memory_order_relaxed);
  if (max_units == 0) {
    FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Traits::kSmemBytes));
    int units = args.sm_count;
    if constexpr (kClusterM > 1) {
      // Clusters need their CTAs on SMs of one GPC: ask how many fit at once instead of assuming
      // sm_count / 2 (a persistent grid larger than that would run some clusters after others).
      const ClusterLaunchConfig<Traits> probe(kClusterM * args.sm_count, stream);
      FC_CUDA_RETURN(cudaOccupancyMaxActiveClusters(&units, kernel, &probe.config));
      if (units < 1) return Status::Unsupported("sm90: no cluster of " + std::to_string(kClusterM) + " CTAs fits this device");
    }
    max_units = units;
    cached_units.store(units, std::memory_order_relaxed);
  }
  if (args.max_grid_units > 0) max_units = std::min(max_units, args.max_grid_units);  // tests
  // Heads whose tiles interleave in the scheduler (head_groups.hpp); query heads sharing a KV head
  // under GQA share its bytes.
  const double kv_bytes_per_query_head =
      (double)params.seqlen_k * (Traits::kDqk + Traits::kDv) * 2 / params.heads_per_kv;
  const bool uneven_tiles = params.mask.window_left < params.seqlen_k || params.mask.window_right < params.seqlen_k;
  const int tile_grid = (int)std::min<int64_t>(num_tiles, max_units);  // the grid if every unit were one tile
  params.heads_per_group = args.heads_per_group > 0
                               ? std::min(args.heads_per_group, params.batch * params.heads_q)
                               : heads_per_group(kv_bytes_per_query_head, kL2GroupBytes, params.num_m_blocks / kClusterM,
                                                 tile_grid, params.batch * params.heads_q, uneven_tiles);
  // Tiles of unequal length go in balanced pairs (tile_order.hpp) when they grow with the query
  // block (a causal triangle: no left window bound) and the head groups cut waves; varlen sequences
  // have their own lengths, and the cluster kernel runs only calls whose tiles are all equally long
  // (TileScheduler::kMayPair).
  // args.pair_tiles: -1 that rule, 0 never, 1 whenever tiles are uneven (tests).
  const bool triangle = params.mask.window_left >= params.seqlen_k;
  const bool pairs_pay = args.pair_tiles > 0 ||
                         (args.pair_tiles < 0 && triangle &&
                          !groups_fill_waves(params.num_m_blocks / kClusterM, params.heads_per_group, tile_grid));
  params.pair_tiles = TileScheduler<Traits>::kMayPair && uneven_tiles && pairs_pay;
  params.num_units = TileScheduler<Traits>::order_of(params).num_units();
  const int grid_units = std::min(params.num_units, max_units);

  // Equal tiles: the stream-K tail (stream_k.hpp) when the last wave is partial and the split pays
  // (by default only for head dims whose tile config has kStreamKTail).
  // Every tile of such a call visits KV blocks 0 .. ceil(Sk / kBlockN) - 1.
  StreamKTail tail = plan_stream_k_tail(params.num_units, grid_units, 0, 0);
  if constexpr (Traits::kStreamK) {
    const int blocks_per_tile = args.k.base != nullptr ? (params.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN : 0;
    const int force = args.stream_k >= 0 ? args.stream_k : (Traits::Config::kStreamKTail ? -1 : 0);
    tail = plan_stream_k_tail(params.num_units, grid_units, blocks_per_tile, force);
  }
  params.wave_units = tail.first_unit;
  params.sk_blocks_per_unit = tail.blocks_per_unit;
  params.sk_first_wave = tail.first_unit / grid_units;

  // Per-call workspace, allocated, zeroed and freed in stream order around this launch, so calls on
  // other streams and captured graphs each get their own (the stream-ordered pool serves it without
  // a device synchronization): the varlen handout's counter (scheduler.cuh, TileQueue), or the
  // stream-K tail's flags and partials (stream_k.cuh). The zeroed part comes first.
  size_t zeroed_bytes = 0, workspace_bytes = 0;
  if constexpr (Traits::kVarlen) zeroed_bytes = workspace_bytes = sizeof(int);
  if constexpr (Traits::kStreamK) {
    if (tail.active()) {
      const size_t ctas = (size_t)grid_units * kClusterM;
      zeroed_bytes = (ctas * StreamKPartials<Traits>::kFlagsPerCta * sizeof(int) + 255) / 256 * 256;
      workspace_bytes = zeroed_bytes + ctas * StreamKPartials<Traits>::kPartialBytesPerCta;
    }
  }
  Status status = Status::Ok();
  void* workspace = nullptr;
  if (workspace_bytes > 0) {
    FC_CUDA_RETURN(cudaMallocAsync(&workspace, workspace_bytes, stream));
    status = cuda_status(cudaMemsetAsync(workspace, 0, zeroed_bytes, stream), "sm90: zeroing the launch workspace");
    if constexpr (Traits::kVarlen) params.tile_counter = static_cast<int*>(workspace);
    if constexpr (Traits::kStreamK) {
      params.sk_flags = static_cast<int*>(workspace);
      params.sk_partials = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + zeroed_bytes);
    }
  }
  if (status.ok()) {
    if constexpr (kClusterM == 1) {
      kernel<<<grid_units, Traits::kThreads, Traits::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, tm_o, params);
    } else {
      const ClusterLaunchConfig<Traits> launch(grid_units * kClusterM, stream);
      status = cuda_status(cudaLaunchKernelEx(&launch.config, kernel, tm_q, tm_k, tm_v, tm_o, params),
                           "cudaLaunchKernelEx(sm90 forward_kernel)");
    }
    if (status.ok()) status = cuda_status(cudaGetLastError(), "sm90 forward_kernel");
  }
  if (workspace != nullptr) {
    const cudaError_t freed = cudaFreeAsync(workspace, stream);
    if (status.ok()) status = cuda_status(freed, "sm90: freeing the launch workspace");
  }
  return status;
}

// A call in which every query row sees every key, on the kAllKeysVisible kernel of the tile shape:
// pairs of CTAs sharing K/V (cluster kernel) where the query blocks pair up and the sequence is long
// enough for the saved L2 traffic to pay, one CTA per tile otherwise.
template <int kDqk, int kDv, typename Element, TileShape kShape>
Status launch_all_keys_visible(const LaunchArgs& args, cudaStream_t stream) {
  using Config = TileConfig<kDqk, kDv, kShape>;
  const KernelParams& p = args.params;
  if constexpr (Config::kClusterM > 1) {
    using ClusterTraits = KernelTraits<kDqk, kDv, Element, Schedule::kOverlapPingPong, block_n_for<Config>(true, false),
                                       /*kVarlen=*/false, Config::kClusterM, /*kAllKeysVisible=*/true, kShape>;
    const int num_m_blocks = (p.seqlen_q + ClusterTraits::kBlockM - 1) / ClusterTraits::kBlockM;
    const bool cluster_pays = args.cluster > 0 || (args.cluster < 0 && p.seqlen_k >= Config::kClusterMinSeqlenK);
    if (cluster_pays && num_m_blocks % Config::kClusterM == 0) return launch_with_traits<ClusterTraits>(args, stream);
  }
  return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kOverlapPingPong, block_n_for<Config>(true, false),
                                         /*kVarlen=*/false, /*kClusterM=*/1, /*kAllKeysVisible=*/true, kShape>>(args,
                                                                                                               stream);
}

// A call whose rows do not all see every key (causal, windowed) on the tile shape's masked kernel.
template <int kDqk, int kDv, typename Element, TileShape kShape>
Status launch_masked(const LaunchArgs& args, cudaStream_t stream) {
  using Config = TileConfig<kDqk, kDv, kShape>;
  return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kOverlapPingPong, block_n_for<Config>(false, false),
                                         /*kVarlen=*/false, /*kClusterM=*/1, /*kAllKeysVisible=*/false, kShape>>(args,
                                                                                                                stream);
}

template <int kDqk, int kDv, typename Element>
Status launch_forward(const LaunchArgs& args, cudaStream_t stream) {
  using Config = TileConfig<kDqk, kDv>;
  const KernelParams& p = args.params;
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr) {
    // Per-sequence lengths: the kVarlen kernel, built for the configured schedule and kVarlenBlockN only
    // (the FLASHCORE_SM90_SCHEDULE / _BLOCK_N tuning knobs apply to dense calls).
    using VarlenTraits = KernelTraits<kDqk, kDv, Element, Config::kSchedule, block_n_for<Config>(false, true), /*kVarlen=*/true>;
    return launch_with_traits<VarlenTraits>(args, stream);
  }
  const Schedule schedule = args.schedule < 0 ? Config::kSchedule : Schedule(args.schedule);
  // Every query row sees every key (no causal mask, no window that cuts any row): the kernels with
  // the mask-free main loop (kAllKeysVisible, at kDenseBlockN) take the call.
  const bool all_keys_visible = p.seqlen_q > 0 && p.mask.tile_fully_visible(0, p.seqlen_q - 1, 0, p.seqlen_k - 1);
  const int configured_block_n = block_n_for<Config>(all_keys_visible, false);
  if (args.block_n == 0 || args.block_n == configured_block_n) {
    if (schedule == Schedule::kSerial) {
      return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kSerial, Config::kBlockN>>(args, stream);
    }
    // The overlap schedule is built only where it is the configured one: for the others its
    // fragments do not fit the consumer registers at the configured kBlockN (ptxas spills).
    if constexpr (Config::kSchedule == Schedule::kOverlapPingPong) {
      // Short masked calls take the head dim's short tile shape, long calls without a left window
      // edge its long one, where it has them (tile_config.hpp, TileShape).
      if constexpr (Config::kShortMaskedBelowSeqlenK > 0) {
        const bool short_pays = args.short_tiles > 0 || (args.short_tiles < 0 && args.block_n == 0 &&
                                                          p.seqlen_k < Config::kShortMaskedBelowSeqlenK);
        if (short_pays && !all_keys_visible) return launch_masked<kDqk, kDv, Element, TileShape::kShort>(args, stream);
      }
      if constexpr (Config::kLongMinSeqlenK > 0) {
        const bool no_left_edge = p.mask.window_left >= p.seqlen_k;
        const bool long_pays = args.long_tiles > 0 || (args.long_tiles < 0 && args.block_n == 0 && no_left_edge &&
                                                        p.seqlen_k >= Config::kLongMinSeqlenK);
        if (long_pays) {
          return all_keys_visible ? launch_all_keys_visible<kDqk, kDv, Element, TileShape::kLong>(args, stream)
                                  : launch_masked<kDqk, kDv, Element, TileShape::kLong>(args, stream);
        }
      }
      return all_keys_visible ? launch_all_keys_visible<kDqk, kDv, Element, TileShape::kDefault>(args, stream)
                              : launch_masked<kDqk, kDv, Element, TileShape::kDefault>(args, stream);
    }
    return Status::Unsupported("sm90: the overlap schedule is not built for head dim " + std::to_string(kDqk));
  }
  if constexpr (Config::kAltBlockN > 0) {
    // Tuning candidate, serial schedule only: with the overlap schedule the larger S and P
    // fragments no longer fit the consumer registers (ptxas spills).
    if (args.block_n == Config::kAltBlockN) {
      return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kSerial, Config::kAltBlockN>>(args, stream);
    }
  }
  return Status::Unsupported("sm90: kBlockN " + std::to_string(args.block_n) + " is not built for head dim " +
                             std::to_string(kDqk) + " (tile_config.hpp: kBlockN / kAltBlockN)");
}

}  // namespace flashcore::sm90

// One line per instantiation unit.
#define FLASHCORE_SM90_INSTANTIATE(DQK, DV, ELEMENT)                                                  \
  template flashcore::Status flashcore::sm90::launch_forward<DQK, DV, ELEMENT>(                       \
      const flashcore::sm90::LaunchArgs&, cudaStream_t);
