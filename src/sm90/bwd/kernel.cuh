// The sm90 backward's main kernel: shared-memory setup, roles, register split, and the dK / dV
// epilogue; the roles are in mainloop.cuh. One CTA per (KV block of kBlockN keys, KV head, batch
// entry); the preprocess (D, lse2, zeroed dQ accumulator) ran before it and the postprocess (dQ
// scaled and converted) runs after it (launch.cu). Tiles with dq_pass() run the dQ pass
// (dq_pass.cuh) after it instead, which writes dq: no accumulator, no postprocess.
#pragma once

#include <cuda.h>

#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "common/dependent_launch.hpp"
#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "sm90/bwd/dq_pass.cuh"
#include "sm90/bwd/mainloop.cuh"
#include "sm90/bwd/tile_config.hpp"
#include "sm90/common/shared_storage.cuh"

namespace flashcore::sm90::bwd {

// Row 0 of this CTA's sequence in dk or dv (its rows: keys of the sequence).
template <typename Element, class Walk>
FC_DEVICE Element* sequence_rows(void* tensor, int64_t batch_stride, int64_t seq_stride, int64_t head_stride,
                                 const AttentionParams& p, const Walk& walk) {
  return static_cast<Element*>(tensor) + attn::token_offset(p.cu_seqlens_k != nullptr, batch_stride, seq_stride,
                                                            head_stride, walk.batch, walk.seq.k_start, walk.head_kv);
}

// kColSplit: dK (times the softmax scale) and dV, this warpgroup's column halves of the block's 64
// keys, straight from the accumulators (rows = keys), 0 for keys no query sees; columns past the
// call's head dims (a padded call) are not its own.
template <class Traits>
FC_DEVICE void store_dk_dv_col_halves(const BackwardParams& bp, const BwdKernelArgs& args, const BwdWalk<Traits>& walk,
                                      int warpgroup, int warp, int lane, const float* dk, const float* dv) {
  static_assert(Traits::kColSplit, "the other tiles stage dK and dV (store_dk_dv_staged)");
  using Element = typename Traits::Element;
  const AttentionParams& p = bp.forward;
  const int g = lane / 4, t = lane % 4;
  Element* const dk_base =
      sequence_rows<Element>(bp.dk, bp.dk_batch_stride, bp.dk_seq_stride, bp.dk_head_stride, p, walk);
  Element* const dv_base =
      sequence_rows<Element>(bp.dv, bp.dv_batch_stride, bp.dv_seq_stride, bp.dv_head_stride, p, walk);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = walk.n0 + 16 * warp + g + 8 * r;  // within the sequence
    const int dk_col0 = warpgroup * Traits::kDkCols, dv_col0 = warpgroup * Traits::kDvCols;
    if (key >= walk.keys_in_tensor) continue;
#pragma unroll
    for (int i = 0; i < Traits::kAccDk; i += 2) {
      if (acc_row(i) != r) continue;
      const int col = dk_col0 + acc_col(i, t);
      if (col < p.head_dim_qk) {
        *reinterpret_cast<uint32_t*>(dk_base + key * bp.dk_seq_stride + col) =
            ElementTraits<Element>::pack(dk[i] * args.scale, dk[i + 1] * args.scale);
      }
    }
#pragma unroll
    for (int i = 0; i < Traits::kAccDv; i += 2) {
      if (acc_row(i) != r) continue;
      const int col = dv_col0 + acc_col(i, t);
      if (col < p.head_dim_v) {
        *reinterpret_cast<uint32_t*>(dv_base + key * bp.dv_seq_stride + col) =
            ElementTraits<Element>::pack(dv[i], dv[i + 1]);
      }
    }
  }
}

// Not kColSplit: dK (times the softmax scale) and dV of this warpgroup's 64 keys through shared
// memory, so that each warp writes whole rows with 16-byte stores (from the accumulators a warp
// store covers 8 rows x 16 bytes); keys and columns written as in store_dk_dv_col_halves. The
// staging tile is this warpgroup's 64 rows of the V tile, [Dv/64][64 rows][64] with the 128-byte
// swizzle (dkdv_staging_offset; the stores are conflict-free, the 16-byte loads too except d96's,
// 2-way at most): only this warpgroup's dP^T GEMMs read those rows, and they retired with its
// walk. dV goes first, then dK through the same rows (Dqk = Dv in these tiles).
template <class Traits>
FC_DEVICE void store_dk_dv_staged(typename Traits::SharedStorage& smem, const BackwardParams& bp,
                                  const BwdKernelArgs& args, const BwdWalk<Traits>& walk, int warpgroup, int warp,
                                  int lane, const float* dk, const float* dv) {
  static_assert(!Traits::kColSplit && Traits::kDqk == Traits::kDv, "one 64-row staging tile per warpgroup");
  using Element = typename Traits::Element;
  constexpr int kCols = Traits::kDv, kUnitsPerRow = kCols / 8;
  const AttentionParams& p = bp.forward;
  const int barrier = kEpilogueBarrier + warpgroup;
  const uint32_t tile = ptx::smem_addr(smem.v) + uint32_t(64 * warpgroup * 128);
  const int key0 = walk.n0 + 64 * warpgroup;  // the tile's first row, within the sequence
  const int thread = 32 * warp + lane;
  auto unit_addr = [&](int row, int unit) {  // unit: 16-byte unit of the row, 0 .. kUnitsPerRow - 1
    return tile + uint32_t(dkdv_staging_offset(row, unit, Traits::kBlockN));
  };
  auto stage_and_store = [&](const float* acc, float scale, Element* base, int64_t seq_stride, int head_dim) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kCols / 2; i += 2) {
      const int row = 16 * warp + g + 8 * acc_row(i), col = acc_col(i, t);
      ptx::st_shared_b32(unit_addr(row, col / 8) + 4 * t,
                         ElementTraits<Element>::pack(acc[i] * scale, acc[i + 1] * scale));
    }
    ptx::named_barrier_sync(barrier, kWarpgroupThreads);
#pragma unroll
    for (int k = 0; k < 64 * kUnitsPerRow / kWarpgroupThreads; ++k) {
      const int linear = k * kWarpgroupThreads + thread, row = linear / kUnitsPerRow, unit = linear % kUnitsPerRow;
      const uint4 v = ptx::ld_shared_b128(unit_addr(row, unit));
      if (key0 + row < walk.keys_in_tensor && 8 * unit < head_dim) {
        *reinterpret_cast<uint4*>(base + (key0 + row) * seq_stride + 8 * unit) = v;
      }
    }
  };
  Element* const dk_base =
      sequence_rows<Element>(bp.dk, bp.dk_batch_stride, bp.dk_seq_stride, bp.dk_head_stride, p, walk);
  Element* const dv_base =
      sequence_rows<Element>(bp.dv, bp.dv_batch_stride, bp.dv_seq_stride, bp.dv_head_stride, p, walk);
  ptx::named_barrier_sync(barrier, kWarpgroupThreads);  // every warp's last GEMM read of its V rows retired
  stage_and_store(dv, 1.0f, dv_base, bp.dv_seq_stride, p.head_dim_v);
  ptx::named_barrier_sync(barrier, kWarpgroupThreads);  // dV's rows read back before dK overwrites them
  stage_and_store(dk, args.scale, dk_base, bp.dk_seq_stride, p.head_dim_qk);
}

// kScoreMod: calls with softcap or ALiBi (mainloop.cuh, BwdConsumer).
template <class Traits, bool kScoreMod>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    backward_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                    const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                    const __grid_constant__ CUtensorMap tm_dq, const __grid_constant__ CUtensorMap tm_lse2,
                    const __grid_constant__ CUtensorMap tm_row_d,
                    const __grid_constant__ BackwardParams bp, const __grid_constant__ backward::BwdWorkspace ws,
                    const __grid_constant__ BwdKernelArgs args) {
  using Storage = typename Traits::SharedStorage;
  extern __shared__ uint8_t smem_raw[];
  Storage& smem = aligned_shared_storage<Storage>(smem_raw);

  // A programmatic dependent of the preprocess (backward/run.cuh): its lse2, D and zeroed dQ
  // accumulator are read by the producer (after it issued K and V) and the dQ writer, which wait
  // for it (BwdProducer, BwdDqWriter); a block with no step waits here, so that this grid never
  // completes before the preprocess. The postprocess may be scheduled once every block got here.
  ptx::allow_next_grid_to_start();
  const BwdWalk<Traits> walk = BwdWalk<Traits>::make(bp.forward, args);
  if (walk.steps == 0 && threadIdx.x == 0) ptx::wait_for_previous_grid();
  if (walk.n0 >= walk.keys_in_tensor) return;  // the whole CTA: no key of the tensor here
  const auto [warpgroup, warp, lane] = uniform_warp_roles();

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&smem.kv_full, 1);
#pragma unroll
    for (int s = 0; s < Traits::kStages; ++s) {
      ptx::mbarrier_init(&smem.q_full[s], 1);
      ptx::mbarrier_init(&smem.do_full[s], 1);
      ptx::mbarrier_init(&smem.q_empty[s], Traits::kConsumerWarps);
    }
    ptx::mbarrier_init(&smem.dq_full, Traits::kDqWriterWarps);
    ptx::mbarrier_init(&smem.dq_empty, 1);
    ptx::mbarrier_init(&smem.ds_half[0], kWarpgroupThreads);
    ptx::mbarrier_init(&smem.ds_half[1], kWarpgroupThreads);
    ptx::mbarrier_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<kBwdProducerRegs>();
    if (walk.steps > 0 && lane == 0) {
      if (warp == 0) {
        ptx::tma_prefetch_descriptor(&tm_q);
        ptx::tma_prefetch_descriptor(&tm_do);
        BwdProducer<Traits>::run(smem, &tm_q, &tm_k, &tm_v, &tm_do, &tm_lse2, &tm_row_d, args, ws, walk);
      } else if (warp == 1 && !Traits::kDqPass) {  // kDqPass: no dQ here
        BwdDqWriter<Traits>::run(smem, &tm_dq, args, ws, walk);
      }
    }
  } else {
    ptx::setmaxnreg_inc<kBwdConsumerRegs>();
    const BwdConsumer<Traits, kScoreMod> consumer{smem,          bp.forward, args, walk, ws,
                                                  warpgroup - 1, warp,       lane, bp.forward.is_varlen()};
    float dk[Traits::kAccDk], dv[Traits::kAccDv];
    consumer.run(dk, dv);
    if constexpr (Traits::kColSplit) {
      store_dk_dv_col_halves<Traits>(bp, args, walk, warpgroup - 1, warp, lane, dk, dv);
    } else {
      store_dk_dv_staged<Traits>(smem, bp, args, walk, warpgroup - 1, warp, lane, dk, dv);
    }
  }
}

// Launches the main kernel for one (Dqk, Dv, Element) with the call's tensor maps (launch.cu).
template <int kDqk, int kDv, typename Element>
Status launch_backward(const CUtensorMap* maps, const BackwardParams& bp, const backward::BwdWorkspace& ws,
                       const BwdKernelArgs& args, cudaStream_t stream) {
  using Traits = BwdTraits<kDqk, kDv, Element>;
  static_assert(Traits::kSmemBytes == bwd_smem_bytes(kDqk, kDv), "supports()' shared-memory figure is this kernel's");
  const AttentionParams& p = bp.forward;
  const bool score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
  auto* kernel = score_mod ? &backward_kernel<Traits, true> : &backward_kernel<Traits, false>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Traits::kSmemBytes)));
  if (p.seqlen_k == 0) return Status::Ok();
  const dim3 grid(unsigned((p.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN), p.heads_kv, p.batch);
  FC_RETURN_IF_ERROR(cuda_status(launch_kernel(kernel, grid, dim3(Traits::kThreads), Traits::kSmemBytes, stream,
                                                dependent_launch_supported(), maps[kMapQ], maps[kMapK], maps[kMapV],
                                                maps[kMapDout], maps[kMapDqAccum], maps[kMapLse2], maps[kMapRowD], bp,
                                                ws, args),
                                  "sm90 backward_kernel"));
  if constexpr (Traits::kDqPass) {
    return launch_dq_pass<kDqk, kDv, Element>(maps[kMapQDqPass], maps[kMapK], maps[kMapV], maps[kMapDoutDqPass], bp, ws,
                                              args, stream);
  }
  return Status::Ok();
}

}  // namespace flashcore::sm90::bwd

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM90_BWD_INSTANTIATE(DQK, DV, ELEMENT)                                                     \
  template flashcore::Status flashcore::sm90::bwd::launch_backward<DQK, DV, ELEMENT>(                         \
      const CUtensorMap*, const flashcore::BackwardParams&, const flashcore::backward::BwdWorkspace&,            \
      const flashcore::sm90::bwd::BwdKernelArgs&, cudaStream_t);
