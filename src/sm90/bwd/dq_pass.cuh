// The sm90 backward's dQ pass (tile_config.hpp, BwdTile::dq_pass): dQ = dS K computed per query
// block, accumulated in registers over the KV blocks that block sees, and stored once, so the
// main kernel adds no dQ partials at all. One CTA per (query block of 128 rows, query head, batch
// entry), after the main kernel (which then computes dK and dV only); it writes dq itself, scaled
// and converted, so the call has no dQ accumulator, no zeroing and no postprocess.
//
// Why: at d256 the main kernel's 64-key blocks add a dQ partial per (KV block, query block), and
// the L2's reduction rate bounds it (docs/design/sm90-backward.md). This pass recomputes S and dP
// (two GEMMs more per key than the fused kernel) but adds nothing; every dQ element is written by
// one CTA, in a fixed order, so it is deterministic by construction.
//
// Roles: warp 0 of warpgroup 0 (one thread) loads Q and dO of the block once, then the KV blocks'
// V and K tiles, in that order, through a ring of kKvSlots tiles (V_j, K_j, V_j+1, K_j+1, ...).
// V_j's slot is free once dP_j retired, K_j's once dQ += dS_j K_j retired: with three slots K_j+1
// lands under step j's dS math and dQ GEMM, V_j+1 under step j - 1's tail.
// Consumer warpgroup w (1, 2) owns query rows [64 (w-1), + 64) of the block: S = Q K^T and
// dP = dO V^T (SS, queries as M), P and dS in registers, dQ += dS K (RS, K read MN-major as V in
// the forward's P V): dQ is 64 x Dqk fp32 per warpgroup, 128 registers per thread at d256.
//
// Barriers: q_full (producer -> consumers, Q and dO landed), kv_full[s] (producer -> consumers,
// the slot's tile landed), kv_empty[s] (consumers -> producer, every consumer warp is done with the
// slot: 8 arrivals). Named barrier kDqPassZeroed (the 256 consumer threads): a K / V tile's rows
// past the sequence's keys are zeroed (only the block that holds the sequence's last key).
#pragma once

#include <cuda.h>

#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "backward/workspace.hpp"
#include "common/cuda_check.hpp"
#include "ptx/barrier.hpp"
#include "ptx/math.hpp"
#include "ptx/mbarrier.hpp"
#include "ptx/tma.hpp"
#include "ptx/wgmma.hpp"
#include "sm90/bwd/params.hpp"
#include "sm90/bwd/tile_config.hpp"
#include "sm90/common/element.cuh"
#include "sm90/common/fragment.cuh"
#include "sm90/common/gemm.cuh"
#include "sm90/common/shared_storage.cuh"
#include "sm90/common/tma.cuh"

namespace flashcore::sm90::bwd {

inline constexpr int kDqPassZeroedBarrier = ptx::kFirstNamedBarrier;

// The main kernel's traits give the head dims, padding, thread count and row size; the tile is the
// pass's own.
template <int kDqk_, int kDv_, typename Element_>
struct DqPassTraits {
  using Main = BwdTraits<kDqk_, kDv_, Element_>;
  using Element = Element_;
  static constexpr int kDqk = kDqk_;
  static constexpr int kDv = kDv_;
  static constexpr int kBlockM = kDqPassTile.block_m;
  static constexpr int kBlockN = kDqPassTile.block_n;
  static constexpr int kKvSlots = kDqPassTile.kv_slots;
  static constexpr int kThreads = Main::kThreads;
  static constexpr int kConsumerWarps = Main::kConsumerWarps;
  static constexpr int kRowBytes = Main::kRowBytes;
  static constexpr int kDqkPad = Main::kDqkPad;
  static constexpr int kDvPad = Main::kDvPad;
  static constexpr int kSlotCols = kDqkPad > kDvPad ? kDqkPad : kDvPad;
  static constexpr uint32_t kQBytes = kBlockM * kDqkPad * 2;  // TMA credits the whole box, zeros too
  static constexpr uint32_t kDoBytes = kBlockM * kDvPad * 2;
  static constexpr uint32_t kKBytes = kBlockN * kDqkPad * 2;
  static constexpr uint32_t kVBytes = kBlockN * kDvPad * 2;
  // Per consumer thread: S, dP (64 queries x kBlockN keys), dS packed, dQ (64 x Dqk).
  static constexpr int kAccS = kBlockN / 2;
  static constexpr int kRegsDs = kBlockN / 4;
  static constexpr int kAccDq = kDqkPad / 2;

  struct alignas(1024) SharedStorage {
    alignas(1024) uint16_t q[kBlockM * kDqkPad];     // [Dqk/64][kBlockM][64], swizzled
    alignas(1024) uint16_t dout[kBlockM * kDvPad];
    alignas(1024) uint16_t kv[kKvSlots][kBlockN * kSlotCols];  // a V or a K tile, [D/64][kBlockN][64]
    uint64_t q_full;
    uint64_t kv_full[kKvSlots], kv_empty[kKvSlots];
  };
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;  // 1 KiB of slack to align

  static_assert(kBlockM == 64 * kBwdConsumerWarpgroups, "each consumer warpgroup owns 64 query rows");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "whole k16 steps of dQ += dS K");
  static_assert(kDqkPad <= 256, "dQ's N is one wgmma (at most 256 columns)");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory exceeds the 227 KiB opt-in limit");
};

// One CTA's walk: its query block and the KV blocks [n_begin, n_end) whose keys some row of it sees.
template <class Traits>
struct DqWalk {
  int m0 = 0, head = 0, head_kv = 0, batch = 0;
  int n_begin = 0, n_end = 0;
  int q_batch = 0, k_batch = 0;  // the batch coordinate of the q/dout and k/v maps (0 when packed)
  attn::SequenceExtent seq;
  attn::VisibilityMask mask;

  FC_DEVICE static DqWalk make(const AttentionParams& p) {
    DqWalk w;
    // Highest query blocks first: under a causal mask they see the most keys.
    w.m0 = (int(gridDim.x) - 1 - int(blockIdx.x)) * Traits::kBlockM;
    w.head = blockIdx.y, w.batch = blockIdx.z;
    w.head_kv = w.head / (p.heads_q / p.heads_kv);
    w.seq = attn::sequence_extent(p, w.batch);
    w.q_batch = p.is_varlen() ? 0 : w.batch;
    w.k_batch = p.cu_seqlens_k != nullptr ? 0 : w.batch;
    w.mask = attn::make_mask(p, w.seq.seqlen_q, w.seq.seqlen_k);
    if (w.m0 < w.seq.seqlen_q && w.seq.seqlen_k > 0) {
      const int row_last = min(w.m0 + Traits::kBlockM, w.seq.seqlen_q) - 1;
      const int key_lo = w.mask.first_key(w.m0), key_hi = w.mask.last_key(row_last);
      if (key_lo <= key_hi) {
        w.n_begin = key_lo / Traits::kBlockN;
        w.n_end = key_hi / Traits::kBlockN + 1;
      }
    }
    return w;
  }
  FC_DEVICE int blocks() const { return n_end - n_begin; }
  // Ring items: V_j is item 2j, K_j item 2j + 1 (j counted from n_begin).
  FC_DEVICE static int slot(int item) { return item % Traits::kKvSlots; }
  FC_DEVICE static uint32_t phase(int item) { return uint32_t(item / Traits::kKvSlots) & 1u; }
};

// Row m0 of the CTA's query block in dq.
template <class Traits, typename Element>
FC_DEVICE Element* dq_rows(const AttentionParams& p, const DqWalk<Traits>& walk, const BackwardParams& bp) {
  return static_cast<Element*>(bp.dq) + attn::token_offset(p.is_varlen(), bp.dq_batch_stride, bp.dq_seq_stride,
                                                           bp.dq_head_stride, walk.batch, walk.seq.q_start + walk.m0,
                                                           walk.head);
}

template <class Traits>
struct DqPassProducer {
  using Storage = typename Traits::SharedStorage;
  static __device__ void run(Storage& smem, const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                             const CUtensorMap* tm_do, const BwdKernelArgs& args, const DqWalk<Traits>& walk) {
    const int query_row = int(walk.seq.q_start) + walk.m0;  // a token row of the q/dout maps
    ptx::mbarrier_arrive_expect_tx(&smem.q_full, Traits::kQBytes + Traits::kDoBytes);
    tma_load_operand<Traits::kDqk, Traits::kBlockM>(smem.q, tm_q, &smem.q_full, query_row, walk.head, walk.q_batch,
                                                    args.qk_per_chunk);
    tma_load_operand<Traits::kDv, Traits::kBlockM>(smem.dout, tm_do, &smem.q_full, query_row, walk.head, walk.q_batch,
                                                   args.v_per_chunk);
    for (int item = 0; item < 2 * walk.blocks(); ++item) {
      const int s = DqWalk<Traits>::slot(item);
      // A waiter on an "empty" barrier starts at parity 1, which a fresh barrier reports complete.
      ptx::mbarrier_wait(&smem.kv_empty[s], DqWalk<Traits>::phase(item) ^ 1u);
      const int key_row = int(walk.seq.k_start) + (walk.n_begin + item / 2) * Traits::kBlockN;
      if (item % 2 == 0) {
        ptx::mbarrier_arrive_expect_tx(&smem.kv_full[s], Traits::kVBytes);
        tma_load_operand<Traits::kDv, Traits::kBlockN>(smem.kv[s], tm_v, &smem.kv_full[s], key_row, walk.head_kv,
                                                       walk.k_batch, args.v_per_chunk);
      } else {
        ptx::mbarrier_arrive_expect_tx(&smem.kv_full[s], Traits::kKBytes);
        tma_load_operand<Traits::kDqk, Traits::kBlockN>(smem.kv[s], tm_k, &smem.kv_full[s], key_row, walk.head_kv,
                                                        walk.k_batch, args.qk_per_chunk);
      }
    }
  }
};

// kScoreMod: calls with softcap or ALiBi (scores alibi(softcap(scale dot)), dS times the softcap's
// derivative), as the main kernel's consumer.
template <class Traits, bool kScoreMod>
struct DqPassConsumer {
  using Storage = typename Traits::SharedStorage;
  using Element = typename Traits::Element;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kAccS = Traits::kAccS;
  static constexpr int kRowBytes = Traits::kRowBytes;
  static constexpr ptx::WgmmaType kType = ElementTraits<Element>::kWgmma;

  Storage& smem;
  const BackwardParams& bp;
  const AttentionParams& params;
  const BwdKernelArgs& args;
  const DqWalk<Traits>& walk;
  const backward::BwdWorkspace& ws;
  int warpgroup;  // 0 or 1: query rows [64 warpgroup, + 64) of the block
  int warp, lane;

  // The query of this thread's local row r (accumulator rows of S, dP, dQ).
  FC_DEVICE int query_of_row(int r) const { return walk.m0 + 64 * warpgroup + 16 * warp + lane / 4 + 8 * r; }

  // Rows [first_row, kBlockN) of a [kChunks][kBlockN][64] tile become 0, by the 256 consumer
  // threads, then published to both warpgroups' wgmma reads.
  template <int kChunks>
  __device__ void zero_rows(uint16_t* tile, int first_row) const {
    zero_tile_rows<kChunks, kBlockN>(tile, first_row, 128 * warpgroup + 32 * warp + lane, 256);
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(kDqPassZeroedBarrier, 256);
  }

  // dS = P (dP - D) [softcap'] with P = exp2(score log2 e - lse2), packed as the A operand of
  // dQ += dS K; invisible elements are replaced by 0 (never multiplied: a key row past the sequence
  // may hold anything in dP).
  template <bool kMasked>
  __device__ void score_grads(const float* s, const float* dp, uint32_t* ds16, const float* lse2, const float* row_d,
                              int n0, const attn::ScoreTransform& transform) const {
    const float scale_over_softcap = kScoreMod ? transform.dot_softcap().scale_over_softcap : 0.0f;
    const int min_diag = walk.mask.min_diagonal(), max_diag = walk.mask.max_diagonal();
    float ds[kAccS];
#pragma unroll
    for (int i = 0; i < kAccS; ++i) {
      const int r = acc_row(i);
      const int key = n0 + acc_col(i, lane % 4);
      float prob, dcap = 1.0f;
      if constexpr (kScoreMod) {
        const float capped = transform.capped_score_fast(s[i], scale_over_softcap, &dcap);
        const float score = capped - transform.alibi_bias<float>(query_of_row(r), key);
        prob = ptx::exp2_approx(fmaf(score, attn::kLog2e, -lse2[r]));
      } else {
        prob = ptx::exp2_approx(fmaf(s[i], args.scale_log2, -lse2[r]));
      }
      ds[i] = prob * (dp[i] - row_d[r]) * dcap;
      if (kMasked && !attn::VisibilityMask::in_band(query_of_row(r), key, min_diag, max_diag, walk.mask.seqlen_k)) {
        ds[i] = 0.0f;
      }
    }
#pragma unroll
    for (int i = 0; i < kAccS; i += 2) ds16[i / 2] = ElementTraits<Element>::pack(ds[i], ds[i + 1]);
  }

  __device__ void run(float* dq) const {
#pragma unroll
    for (int i = 0; i < Traits::kAccDq; ++i) dq[i] = 0.0f;
    if (walk.blocks() == 0) return;
    // lse2 and D of this thread's two rows (the workspace's rows are padded to whole query blocks).
    float lse2[2], row_d[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int64_t row = ws.row(walk.head, walk.batch, walk.seq.q_start, query_of_row(r));
      lse2[r] = ws.lse2[row];
      row_d[r] = ws.row_d[row];
    }
    attn::ScoreTransform transform;
    if constexpr (kScoreMod) {
      transform = attn::make_score_transform(params, walk.batch, walk.head, walk.seq.seqlen_q, walk.seq.seqlen_k);
    }
    const uint32_t q_tile = ptx::smem_addr(smem.q) + 64 * warpgroup * kRowBytes;
    const uint32_t do_tile = ptx::smem_addr(smem.dout) + 64 * warpgroup * kRowBytes;
    const int row_first = walk.m0 + 64 * warpgroup;
    ptx::mbarrier_wait(&smem.q_full, 0);
    for (int j = 0; j < walk.blocks(); ++j) {
      const int n0 = (walk.n_begin + j) * kBlockN;
      const int v_item = 2 * j, k_item = 2 * j + 1;
      const int v_slot = DqWalk<Traits>::slot(v_item), k_slot = DqWalk<Traits>::slot(k_item);
      // Key rows past the sequence (a packed neighbour's, or past seqused_k) may hold anything: 0 * NaN
      // is NaN in dQ += dS K and in dP. Dense calls past Sk get TMA's zeros.
      const int keys_valid = walk.seq.seqlen_k - n0;
      float s[kAccS], dp[kAccS];
      ptx::mbarrier_wait(&smem.kv_full[k_slot], DqWalk<Traits>::phase(k_item));
      if (keys_valid < kBlockN) zero_rows<Traits::kDqkPad / 64>(smem.kv[k_slot], keys_valid);
      ptx::wgmma_fence();
      gemm_ss_overwrite<kBlockN, Traits::kDqk, Traits::kBlockM, kBlockN, kType>(s, q_tile,
                                                                                  ptx::smem_addr(smem.kv[k_slot]));
      ptx::wgmma_commit();
      ptx::mbarrier_wait(&smem.kv_full[v_slot], DqWalk<Traits>::phase(v_item));
      if (keys_valid < kBlockN) zero_rows<Traits::kDvPad / 64>(smem.kv[v_slot], keys_valid);
      ptx::wgmma_fence();
      gemm_ss_overwrite<kBlockN, Traits::kDv, Traits::kBlockM, kBlockN, kType>(dp, do_tile,
                                                                                 ptx::smem_addr(smem.kv[v_slot]));
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers<kAccS>(s);
      ptx::fence_registers<kAccS>(dp);
      __syncwarp();
      if (lane == 0) ptx::mbarrier_arrive(&smem.kv_empty[v_slot]);  // V_j read for the last time
      uint32_t ds16[Traits::kRegsDs];
      const int row_last = min(row_first + 63, walk.seq.seqlen_q - 1);
      const bool full_tile = n0 + kBlockN <= walk.seq.seqlen_k &&
                             walk.mask.tile_fully_visible(row_first, max(row_first, row_last), n0, n0 + kBlockN - 1);
      if (full_tile) {
        score_grads<false>(s, dp, ds16, lse2, row_d, n0, transform);
      } else {
        score_grads<true>(s, dp, ds16, lse2, row_d, n0, transform);
      }
      ptx::wgmma_fence();
      gemm_rs_accumulate<Traits::kDqkPad, kBlockN, kType>(dq, ds16, ptx::smem_addr(smem.kv[k_slot]));
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers<Traits::kAccDq>(dq);
      ptx::fence_registers<Traits::kRegsDs>(ds16);
      __syncwarp();
      if (lane == 0) ptx::mbarrier_arrive(&smem.kv_empty[k_slot]);  // K_j read for the last time
    }
  }

  // dQ times the softmax scale into dq (the element type, the caller's strides), rows inside the
  // sequence and the call's columns (a padded call's other columns are not its own).
  __device__ void store(const float* dq) const {
    Element* dq_base = dq_rows<Traits, Element>(params, walk, bp);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int query = query_of_row(r);
      if (query >= walk.seq.seqlen_q) continue;
      Element* dst = dq_base + int64_t(query - walk.m0) * bp.dq_seq_stride;
#pragma unroll
      for (int i = 0; i < Traits::kAccDq; i += 2) {
        if (acc_row(i) != r) continue;
        const int col = acc_col(i, lane % 4);
        if (col < params.head_dim_qk) {
          *reinterpret_cast<uint32_t*>(dst + col) = ElementTraits<Element>::pack(dq[i] * args.scale, dq[i + 1] * args.scale);
        }
      }
    }
  }
};

// A query block whose rows see no key: dq is 0 there (no accumulator was zeroed for it).
template <class Traits>
FC_DEVICE void store_zero_dq(const BackwardParams& bp, const DqWalk<Traits>& walk) {
  using Element = typename Traits::Element;
  const AttentionParams& p = bp.forward;
  const int rows = min(Traits::kBlockM, walk.seq.seqlen_q - walk.m0);
  const int pairs = p.head_dim_qk / 2;
  Element* base = dq_rows<Traits, Element>(p, walk, bp);
  for (int u = threadIdx.x; u < rows * pairs; u += blockDim.x) {
    *reinterpret_cast<uint32_t*>(base + int64_t(u / pairs) * bp.dq_seq_stride + 2 * (u % pairs)) = 0u;
  }
}

template <class Traits, bool kScoreMod>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    dq_pass_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                   const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ CUtensorMap tm_do,
                   const __grid_constant__ BackwardParams bp, const __grid_constant__ backward::BwdWorkspace ws,
                   const __grid_constant__ BwdKernelArgs args) {
  using Storage = typename Traits::SharedStorage;
  extern __shared__ uint8_t smem_raw[];
  Storage& smem = aligned_shared_storage<Storage>(smem_raw);

  const DqWalk<Traits> walk = DqWalk<Traits>::make(bp.forward);
  if (walk.m0 >= walk.seq.seqlen_q) return;  // a shorter sequence of a varlen batch
  if (walk.blocks() == 0) {  // the whole CTA: its rows see no key
    store_zero_dq<Traits>(bp, walk);
    return;
  }
  const auto [warpgroup, warp, lane] = uniform_warp_roles();

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&smem.q_full, 1);
#pragma unroll
    for (int s = 0; s < Traits::kKvSlots; ++s) {
      ptx::mbarrier_init(&smem.kv_full[s], 1);
      ptx::mbarrier_init(&smem.kv_empty[s], Traits::kConsumerWarps);
    }
    ptx::mbarrier_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<kBwdProducerRegs>();
    if (warp == 0 && lane == 0) {
      ptx::tma_prefetch_descriptor(&tm_k);
      ptx::tma_prefetch_descriptor(&tm_v);
      DqPassProducer<Traits>::run(smem, &tm_q, &tm_k, &tm_v, &tm_do, args, walk);
    }
  } else {
    ptx::setmaxnreg_inc<kBwdConsumerRegs>();
    const DqPassConsumer<Traits, kScoreMod> consumer{smem, bp, bp.forward, args, walk, ws, warpgroup - 1, warp, lane};
    float dq[Traits::kAccDq];
    consumer.run(dq);
    consumer.store(dq);
  }
}

// Runs the dQ pass for one (Dqk, Dv, Element): tm_q / tm_do with kBlockM-row boxes, tm_k / tm_v
// with kBlockN-row boxes (launch.cu).
template <int kDqk, int kDv, typename Element>
Status launch_dq_pass(const CUtensorMap& tm_q, const CUtensorMap& tm_k, const CUtensorMap& tm_v,
                      const CUtensorMap& tm_do, const BackwardParams& bp, const backward::BwdWorkspace& ws,
                      const BwdKernelArgs& args, cudaStream_t stream) {
  using Traits = DqPassTraits<kDqk, kDv, Element>;
  static_assert(Traits::kSmemBytes == dq_pass_smem_bytes(kDqk, kDv), "supports()' shared-memory figure is this kernel's");
  const AttentionParams& p = bp.forward;
  const bool score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
  auto* kernel = score_mod ? &dq_pass_kernel<Traits, true> : &dq_pass_kernel<Traits, false>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Traits::kSmemBytes)));
  if (p.seqlen_q == 0) return Status::Ok();
  const dim3 grid(unsigned((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM), p.heads_q, p.batch);
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, tm_do, bp, ws, args);
  FC_CHECK_LAUNCH("sm90 dq_pass_kernel");
  return Status::Ok();
}

}  // namespace flashcore::sm90::bwd
