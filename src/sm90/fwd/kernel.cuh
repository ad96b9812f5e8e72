// The sm90 forward kernel shell: shared-memory setup, warpgroup roles, register split; the mainloop
// runs each tile, the shell ends it (stream-K partials, epilogue). Templated on the mainloop, the
// epilogue and the scheduler (launch_kernel.cuh picks them for a kernel's traits).
//
//   warpgroup 0      producer: one thread issues TMA loads (mainloop.cuh, Producer); kVarlen: the
//                    first warp walks the tiles (its lanes zero V tails and issue the pieces
//                    of paged blocks), lane 0 issues the other TMA loads
//   warpgroups 1..   consumers: 64 query rows each, wgmma + online softmax (Consumer), epilogue
#pragma once

#include <cuda.h>

#include "attention/stream_k.hpp"
#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "sm90/common/shared_storage.cuh"
#include "sm90/fwd/kernel_traits.cuh"
#include "sm90/fwd/epilogue.cuh"
#include "sm90/fwd/params.hpp"
#include "sm90/fwd/scheduler.cuh"
#include "sm90/fwd/softmax.cuh"
#include "sm90/fwd/stream_k.cuh"
#include "sm90/fwd/mainloop.cuh"

namespace flashcore::sm90 {

// Ends a tile after its mainloop (o: this thread's unnormalized O fragment; softmax: its rows' state).
// A stream-K tail item's role says how (attention/stream_k.hpp): its partial stored for the next CTA,
// or the previous CTA's partial merged in and then the epilogue; every other tile goes to the epilogue.
template <class Traits, class Epilogue, class Scheduler>
FC_DEVICE void end_tile(const KernelParams& params, const CUtensorMap* tm_o, uint8_t* o_staging,
                        const typename Scheduler::TileT& tile, const Scheduler* sched, int warpgroup, int warp,
                        int lane, float* o, OnlineSoftmax& softmax) {
  if constexpr (Traits::kStreamK) {
    const int thread_in_wg = warp * 32 + lane;
    const attn::TileRole role = sched->role();
    if (role == attn::TileRole::kWritePartial) {
      StreamKPartials<Traits>::store(params, warpgroup, thread_in_wg, o, softmax);
      return;
    }
    if (role == attn::TileRole::kMergePartial) StreamKPartials<Traits>::merge(params, warpgroup, thread_in_wg, o, softmax);
  }
  float inv_sum[2], lse[2];
  softmax.finalize(inv_sum, lse);
  Epilogue::store(params, tm_o, o_staging, tile, warpgroup, warp, lane, o, inv_sum, lse);
}

template <class Mainloop, class Epilogue, class Scheduler>
__global__ void __launch_bounds__(Mainloop::Traits::kThreads, 1)
    forward_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                   const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_o,
                   const __grid_constant__ KernelParams params) {
  using Traits = typename Mainloop::Traits;
  using Producer = typename Mainloop::ProducerRole;
  using Consumer = typename Mainloop::ConsumerRole;
  using Storage = typename Traits::SharedStorage;
  extern __shared__ uint8_t smem_raw[];
  Storage& smem = aligned_shared_storage<Storage>(smem_raw);

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
#pragma unroll
      for (int s = 0; s < Traits::kBoxJobSlots; ++s) {
        ptx::mbarrier_init(&smem.job_full[s], 32);
        ptx::mbarrier_init(&smem.job_empty[s], 32 * Traits::kHelperWarps);
      }
      smem.jobs_handed_out = 0;
    }
    ptx::mbarrier_init_fence();
    // This CTA's share of the stream-K tail, worked out once here (the producer has no registers
    // for the divisions).
    if constexpr (Traits::kStreamK) {
      smem.sk_list.fill(Scheduler::tail_of(params), Scheduler::unit());
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
    if (warp == 0 && (Producer::kWholeWarp || lane == 0)) {
      Producer::run(smem, &tm_q, &tm_k, &tm_v, params, lane);
    } else if constexpr (Traits::kPagedHelpers) {
      if (params.paged_helpers) PagedIssuers<Traits>::run(smem, &tm_k, &tm_v, params, warp - 1, lane);
    }
    // Cluster kernel: the producer warp's other lanes wait for its leader here, so the whole warp
    // reaches the final cluster barrier together.
    if constexpr (Traits::kClusterM > 1) __syncwarp();
  } else {
    ptx::setmaxnreg_inc<Traits::Config::kConsumerRegs>();
    uint8_t* o_staging = reinterpret_cast<uint8_t*>(&smem) + sizeof(Storage);
    const int consumer_wg = warpgroup - 1;
    Consumer consumer{smem, params, consumer_wg, lane, warp};
    consumer.begin();
    if constexpr (Traits::kVarlen) {
      // The units the producer hands out (scheduler.cuh, TileQueue), all with rows.
      TileQueue<Storage, Traits::kTileSlots> queue{smem};
      for (int unit = queue.pop(lane); unit >= 0; unit = queue.pop(lane)) {
        const typename Scheduler::TileT tile = Scheduler::tile_of(params, unit, 0);
        float o[Traits::kAccO];
        OnlineSoftmax softmax;
        consumer.run_tile(tile, Scheduler::kv_range_of(params, tile), o, softmax);
        end_tile<Traits, Epilogue>(params, &tm_o, o_staging, tile, (const Scheduler*)nullptr, consumer_wg, warp, lane,
                                   o, softmax);
      }
    } else {
      // Dense: every tile has rows. The waves, then (kStreamK) this CTA's items of the tail.
      for (Scheduler sched(params, &smem.sk_list); sched.valid(); sched.next()) {
        if (!sched.has_tile()) continue;
        const typename Scheduler::TileT tile = sched.tile();
        float o[Traits::kAccO];
        OnlineSoftmax softmax;
        // The item's role is read only after the mainloop (end_tile): held across it, it costs a register.
        consumer.run_tile(tile, sched.kv_range(tile), o, softmax);
        end_tile<Traits, Epilogue>(params, &tm_o, o_staging, tile, &sched, consumer_wg, warp, lane, o, softmax);
      }
    }
    consumer.end();
    Epilogue::drain(warp * 32 + lane);
  }
  // Cluster kernel: no CTA leaves while the other may still release stages on its barriers. (Its
  // multicast copies into this CTA all completed: this CTA's consumers waited for every one.)
  if constexpr (Traits::kClusterM > 1) ptx::cluster_sync();
}

}  // namespace flashcore::sm90
