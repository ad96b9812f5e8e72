// The stream-K tail's partial tiles (attention/stream_k.hpp says which CTA runs which part of a split tile):
// the CTA holding a split tile's first KV blocks stores its unnormalized O, row maxima and row sums
// to a global fp32 slot and raises a flag; the next CTA, after the tile's remaining blocks, waits
// for the flag and folds the partial into its own accumulator, then stores the tile as usual.
//
// Workspace (per launch, KernelParams::sk_flags / sk_partials; the launcher allocates and zeroes
// it): per CTA and consumer warpgroup one flag and one slot of 128 threads x (kAccO + 4) floats.
// Element e of thread t sits at [e][t], so each store or load instruction of a warp touches 128
// contiguous bytes. Each consumer warpgroup exchanges its own 64 rows: no warpgroup waits for
// another.
#pragma once

#include <cmath>
#include <cstddef>

#include "ptx/barrier.hpp"
#include "ptx/math.hpp"
#include "sm90/common/fragment.cuh"
#include "sm90/fwd/kernel_traits.cuh"
#include "sm90/fwd/params.hpp"
#include "sm90/fwd/softmax.cuh"

namespace flashcore::sm90 {

template <class Traits>
struct StreamKPartials {
  static constexpr int kThreads = 128;                       // one consumer warpgroup
  static constexpr int kFloatsPerThread = Traits::kAccO + 4;  // O, then row max and row sum of both rows
  static constexpr int kFlagsPerCta = Traits::kConsumerWarpgroups;
  static constexpr size_t kPartialBytesPerCta = sizeof(float) * kFloatsPerThread * kThreads * Traits::kConsumerWarpgroups;

  FC_DEVICE static float* slot(const KernelParams& p, int cta, int warpgroup) {
    return p.sk_partials + ((size_t)cta * Traits::kConsumerWarpgroups + warpgroup) * (kThreads * kFloatsPerThread);
  }
  FC_DEVICE static int* flag(const KernelParams& p, int cta, int warpgroup) {
    return p.sk_flags + cta * kFlagsPerCta + warpgroup;
  }

  // The first part of a split tile: this warpgroup's O (unnormalized, relative to its row max) and
  // softmax state to this CTA's slot, then the flag. `thread`: 0..127 in the warpgroup.
  FC_DEVICE static void store(const KernelParams& p, int warpgroup, int thread, const float* o, const OnlineSoftmax& sm) {
    const int cta = (int)blockIdx.x;
    float* base = slot(p, cta, warpgroup) + thread;
#pragma unroll
    for (int i = 0; i < Traits::kAccO; ++i) __stcg(base + i * kThreads, o[i]);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      __stcg(base + (Traits::kAccO + r) * kThreads, sm.max_log2[r]);
      __stcg(base + (Traits::kAccO + 2 + r) * kThreads, sm.row_sum[r]);
    }
    // Every thread's stores, then one release at GPU scope that carries them.
    ptx::named_barrier_sync(kWarpgroupBarrier + warpgroup, kThreads);
    if (thread == 0) ptx::st_release_gpu(flag(p, cta, warpgroup), 1);
  }

  // The rest of the split tile is in o / sm: wait for the previous CTA's (the same rank of the
  // previous cluster) partial and fold it in, both moved to the larger of the two row maxima.
  FC_DEVICE static void merge(const KernelParams& p, int warpgroup, int thread, float* o, OnlineSoftmax& sm) {
    const int writer = (int)blockIdx.x - Traits::kClusterM;
    if (thread == 0) {
      // The writer stored this partial as the first item of its share: normally long done.
      const int* ready = flag(p, writer, warpgroup);
      while (ptx::ld_acquire_gpu(ready) == 0) __nanosleep(64);
    }
    ptx::named_barrier_sync(kWarpgroupBarrier + warpgroup, kThreads);
    // L2 loads (ld.global.cg): nothing of the slot can sit in this SM's L1.
    const float* base = slot(p, writer, warpgroup) + thread;
    float own_factor[2], other_factor[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      attn::SoftmaxState row = sm.state(r), other;
      other.max_log2 = __ldcg(base + (Traits::kAccO + r) * kThreads);
      other.sum = __ldcg(base + (Traits::kAccO + 2 + r) * kThreads);
      // A row that has seen no visible key holds kNoKeyYet (finite): its factor is exp2(-huge) = 0,
      // or 1 with a sum of 0 when neither side has one.
      row.merge(other, own_factor[r], other_factor[r]);
      sm.set_state(r, row);
    }
    // In chunks of 32 loads with a warp barrier between them: ptxas otherwise schedules the loads of
    // a d256 slot (128 floats per thread, next to O's 128) so early that the cluster kernel spilled
    // 28 bytes (chunks of 4 or 16: still 16-20 bytes; ptxas -v, CUDA 13.0).
    constexpr int kChunk = 32;
#pragma unroll
    for (int i0 = 0; i0 < Traits::kAccO; i0 += kChunk) {
#pragma unroll
      for (int i = i0; i < i0 + kChunk && i < Traits::kAccO; ++i) {
        o[i] = o[i] * own_factor[acc_row(i)] + __ldcg(base + i * kThreads) * other_factor[acc_row(i)];
      }
      __syncwarp();  // ptxas does not move loads across it: the next chunk's loads stay after this one's
    }
  }
};

}  // namespace flashcore::sm90
