// The host-side launcher of the sm90 forward kernels, compiled by every instantiation unit.
#pragma once

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string>

#include "attention/head_groups.hpp"
#include "attention/stream_k.hpp"
#include "common/cuda_check.hpp"
#include "sm90/common/cluster_launch.hpp"
#include "sm90/fwd/kernel.cuh"
#include "sm90/fwd/launch_args.hpp"

namespace flashcore::sm90 {

// The kernel of one set of traits: the forward mainloop, the configured epilogue, the persistent scheduler.
template <class Traits>
struct ForwardKernelOf {
  using Scheduler = TileScheduler<Traits>;
  static constexpr auto kernel = &forward_kernel<Mainloop<Traits, Scheduler>, EpilogueFor<Traits, Scheduler>, Scheduler>;
};

// Per instantiation and device: CTAs, or clusters, of the kernel resident at once (computed on
// first use; the shared-memory opt-in is a per-device function attribute too). Atomic: calls may
// come from several host threads; two first calls compute the same value.
template <class Traits>
Status resident_units(int sm_count, cudaStream_t stream, int* units) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> units_of_device[kMaxDevices];
  int device = 0;
  FC_CUDA_RETURN(cudaGetDevice(&device));
  std::atomic<int>& cached = units_of_device[std::min(std::max(device, 0), kMaxDevices - 1)];
  int n = cached.load(std::memory_order_relaxed);
  if (n == 0) {
    auto kernel = ForwardKernelOf<Traits>::kernel;
    FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)Traits::kSmemBytes));
    n = sm_count;
    if constexpr (Traits::kClusterM > 1) {
      // Clusters need their CTAs on SMs of one GPC: ask how many fit at once instead of assuming
      // sm_count / 2 (a persistent grid larger than that would run some clusters after others).
      const ClusterLaunchConfig<Traits> probe(Traits::kClusterM * sm_count, stream);
      FC_CUDA_RETURN(cudaOccupancyMaxActiveClusters(&n, kernel, &probe.config));
      if (n < 1) return Status::Unsupported("sm90: no cluster of " + std::to_string(Traits::kClusterM) + " CTAs fits this device");
    }
    cached.store(n, std::memory_order_relaxed);
  }
  *units = n;
  return Status::Ok();
}

// Plans the launch of the kernel of `Traits` (the one args.kernel names), encodes its tensor maps,
// allocates its workspace in stream order and launches it.
template <class Traits>
Status launch_with_traits(const LaunchArgs& args, cudaStream_t stream) {
  const ForwardKernel& chosen = args.kernel;
  if (chosen.block_n != Traits::kBlockN || chosen.cluster_m != Traits::kClusterM || chosen.varlen != Traits::kVarlen ||
      chosen.alibi != Traits::kAlibi || chosen.kv_row_groups != Traits::kKvRowGroups ||
      chosen.all_keys_visible != Traits::kAllKeysVisible || chosen.schedule != Traits::kSchedule ||
      chosen.head_dim_qk != Traits::kDqk || chosen.head_dim_v != Traits::kDv) {
    return Status::Internal("sm90: the launcher's kernel does not match the plan's (" + describe(chosen) + ")");
  }
  DeviceFacts device;
  device.sm_count = args.sm_count;
  FC_RETURN_IF_ERROR(resident_units<Traits>(args.sm_count, stream, &device.resident_units));
  ForwardPlan plan;
  FC_RETURN_IF_ERROR(plan_forward(*args.call, chosen, device, args.overrides, &plan));
  if (plan.block_m != Traits::kBlockM) return Status::Internal("sm90: the plan's kBlockM is not the kernel's");
  if (plan.num_units == 0) return Status::Ok();

  KernelParams params = args.params;
  CUtensorMap tm_q, tm_k, tm_v;
  FC_RETURN_IF_ERROR(encode_operand_map(&tm_q, args.q, args.dtype, Traits::kDqk, Traits::kBlockM));
  if (params.pages.table != nullptr) {
    // Paged: the k/v maps view the page pool, boxes of page_rows rows (params.hpp), any head dim
    // per 64-column chunk.
    if constexpr (Traits::kVarlen) {
      params.page_rows = std::gcd(params.pages.page_size, Traits::kBlockN);
      if (params.page_rows % 8 != 0 || Traits::kBlockN / params.page_rows > 32) {
        return Status::Internal("sm90: paged K/V needs a page size that is a multiple of 8");
      }
      params.paged_whole_blocks = params.page_rows == Traits::kBlockN && !per_chunk_map(args.k.head_dim, Traits::kDqk) &&
                                  !per_chunk_map(args.v.head_dim, Traits::kDv);
      constexpr int kBoxChunks = Traits::kKvRowGroups ? 1 : std::max(Traits::kDqkPad, Traits::kDvPad) / 64;
      const int boxes = params.paged_whole_blocks ? 1 : Traits::kBlockN / params.page_rows * kBoxChunks;
      params.paged_helpers = Traits::kPagedHelpers && boxes > kPagedHelperBoxesAbove;
      if constexpr (Traits::kKvRowGroups) {
        FC_RETURN_IF_ERROR(encode_row_group_map(&tm_k, args.k, args.dtype, params.page_rows));
        FC_RETURN_IF_ERROR(encode_row_group_map(&tm_v, args.v, args.dtype, params.page_rows));
      } else if (params.paged_whole_blocks) {
        FC_RETURN_IF_ERROR(encode_operand_map(&tm_k, args.k, args.dtype, Traits::kDqk, Traits::kBlockN));
        FC_RETURN_IF_ERROR(encode_operand_map(&tm_v, args.v, args.dtype, Traits::kDv, Traits::kBlockN));
      } else {
        FC_RETURN_IF_ERROR(encode_operand_map_per_chunk(&tm_k, args.k, args.dtype, params.page_rows));
        FC_RETURN_IF_ERROR(encode_operand_map_per_chunk(&tm_v, args.v, args.dtype, params.page_rows));
      }
    } else {
      return Status::Internal("sm90: paged K/V runs on the varlen kernel only (plan.cpp)");
    }
  } else if (args.k.base != nullptr && args.v.base != nullptr) {
    // Cluster kernel: a box is this CTA's share of the 64-column chunks (mainloop.cuh).
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_k, args.k, args.dtype, Traits::kDqk, Traits::kBlockN, Traits::kKChunksPerCta));
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_v, args.v, args.dtype, Traits::kDv, Traits::kBlockN, Traits::kVChunksPerCta));
  } else {
    tm_k = tm_v = tm_q;  // a call without keys (k/v may be null): never loaded, every tile's range is empty
  }
  CUtensorMap tm_o = tm_q;  // unused by the direct epilogue
  if constexpr (Traits::kEpilogueTma) FC_RETURN_IF_ERROR(encode_operand_map(&tm_o, args.o, args.dtype, Traits::kDv, 64));

  // A call padded to this kernel (the q and k maps share head_dim_qk, the v and o maps head_dim_v).
  params.qk_per_chunk = per_chunk_map(args.q.head_dim, Traits::kDqk);
  params.v_per_chunk = per_chunk_map(args.v.head_dim, Traits::kDv);
  params.head_dim_v = args.v.head_dim;
  if ((params.qk_per_chunk || params.v_per_chunk) && (Traits::kClusterM > 1)) {
    return Status::Internal("sm90: the cluster kernel multicasts whole boxes; a padded call cannot run on it");
  }
  params.always_rescale_o = plan.always_rescale_o;
  params.num_m_blocks = plan.num_m_blocks;
  params.m_row_shift = plan.m_row_shift;
  params.heads_per_group = plan.heads_per_group;
  params.pair_tiles = plan.pair_tiles;
  params.num_units = plan.num_units;
  params.wave_units = plan.wave_units();
  params.sk_blocks_per_unit = plan.tail.blocks_per_unit;
  params.sk_first_wave = plan.sk_first_wave();

  // The per-call workspace, allocated, zeroed and freed in stream order around this launch, so
  // calls on other streams and captured graphs each get their own (the stream-ordered pool serves
  // it without a device synchronization).
  Status status = Status::Ok();
  void* workspace = nullptr;
  if (plan.workspace_bytes > 0) {
    FC_CUDA_RETURN(cudaMallocAsync(&workspace, plan.workspace_bytes, stream));
    status = cuda_status(cudaMemsetAsync(workspace, 0, plan.workspace_zeroed_bytes, stream),
                         "sm90: zeroing the launch workspace");
    if constexpr (Traits::kVarlen) params.tile_counter = static_cast<int*>(workspace);
    if constexpr (Traits::kStreamK) {
      params.sk_flags = static_cast<int*>(workspace);
      params.sk_partials = reinterpret_cast<float*>(static_cast<uint8_t*>(workspace) + plan.workspace_zeroed_bytes);
    }
  }
  if (status.ok()) {
    auto kernel = ForwardKernelOf<Traits>::kernel;
    if constexpr (Traits::kClusterM == 1) {
      kernel<<<plan.grid_ctas(), Traits::kThreads, Traits::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, tm_o, params);
    } else {
      const ClusterLaunchConfig<Traits> launch(plan.grid_ctas(), stream);
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

// The kernels of one tile shape: with the mask-free main loop (on clusters where the config has
// them), and the masked one. The short shape runs masked calls only.
template <int kDqk, int kDv, typename Element, TileShape kShape>
Status launch_shape(const LaunchArgs& args, cudaStream_t stream) {
  using C = TileConfig<kDqk, kDv, kShape>;
  if constexpr (kShape != TileShape::kShort) {
    if (args.kernel.all_keys_visible) {
      constexpr int kBlockN = block_n_for<C>(true, false);
      if constexpr (C::kClusterM > 1) {
        if (args.kernel.cluster_m == C::kClusterM) {
          return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kOverlapPingPong, kBlockN, false,
                                                 C::kClusterM, true, kShape>>(args, stream);
        }
      }
      return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kOverlapPingPong, kBlockN, false, 1, true,
                                             kShape>>(args, stream);
    }
  }
  return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kOverlapPingPong, block_n_for<C>(false, false),
                                         false, 1, false, kShape>>(args, stream);
}

template <int kDqk, int kDv, typename Element>
Status launch_forward(const LaunchArgs& args, cudaStream_t stream) {
  using C = TileConfig<kDqk, kDv>;
  const ForwardKernel& k = args.kernel;
  if (k.alibi) {  // the ALiBi builds: varlen, or the default shape's masked kernel (plan.cpp)
    if (k.varlen) {
      return launch_with_traits<KernelTraits<kDqk, kDv, Element, C::kSchedule, block_n_for<C>(false, true), true, 1,
                                             false, TileShape::kDefault, true>>(args, stream);
    }
    return launch_with_traits<KernelTraits<kDqk, kDv, Element, C::kSchedule, block_n_for<C>(false, false), false, 1,
                                           false, TileShape::kDefault, true>>(args, stream);
  }
  if (k.varlen) {
    if constexpr (kv_row_group_tiles(kDqk, kDv)) {
      if (k.kv_row_groups) {
        return launch_with_traits<KernelTraits<kDqk, kDv, Element, C::kSchedule, block_n_for<C>(false, true), true, 1,
                                               false, TileShape::kDefault, false, true>>(args, stream);
      }
    }
    return launch_with_traits<KernelTraits<kDqk, kDv, Element, C::kSchedule, block_n_for<C>(false, true), true>>(args,
                                                                                                              stream);
  }
  if (k.schedule == Schedule::kSerial) {
#if defined(FLASHCORE_TUNING_KERNELS)
    if (k.block_n == C::kBlockN) {
      return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kSerial, C::kBlockN>>(args, stream);
    }
    if constexpr (C::kAltBlockN > 0) {
      if (k.block_n == C::kAltBlockN) {
        return launch_with_traits<KernelTraits<kDqk, kDv, Element, Schedule::kSerial, C::kAltBlockN>>(args, stream);
      }
    }
#endif
  } else if constexpr (C::kSchedule == Schedule::kOverlapPingPong) {
    if constexpr (C::kShortMaskedBelowSeqlenK > 0) {
      if (k.shape == TileShape::kShort) return launch_shape<kDqk, kDv, Element, TileShape::kShort>(args, stream);
    }
    if constexpr (C::kLongMinSeqlenK > 0) {
      if (k.shape == TileShape::kLong) return launch_shape<kDqk, kDv, Element, TileShape::kLong>(args, stream);
    }
    if (k.shape == TileShape::kDefault) return launch_shape<kDqk, kDv, Element, TileShape::kDefault>(args, stream);
  }
  return Status::Unsupported("sm90: no kernel of this build is " + describe(k));
}

}  // namespace flashcore::sm90

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM90_FWD_INSTANTIATE(DQK, DV, ELEMENT)                                              \
  template flashcore::Status flashcore::sm90::launch_forward<DQK, DV, ELEMENT>(                       \
      const flashcore::sm90::LaunchArgs&, cudaStream_t);
