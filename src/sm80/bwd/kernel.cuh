// sm80 backward main kernel (mma.sync m16n8k16, fp16 / bf16). One CTA per (KV block, KV head,
// batch entry): it keeps dK, dV of its kBlockN keys in registers and walks every (query head of
// the group, query block) that sees those keys (tile_config.hpp has the warp split). Per step:
//   barrier: Q, dO, lse2, D of this step have landed; every warp is done with the previous step
//            (its stage buffers, P^T and dS^T)                  -> prefetch the next step's tiles
//   S^T = K Q^T -> P^T = exp2(S^T scale log2(e) - lse2)          (warp: its 16 keys x its queries)
//   dV += P^T dO                                                 (A operand from registers)
//   dP^T = V dO^T -> dS^T = P^T (dP^T - D) [softcap'(score)]     (in registers, 16-bit)
//   dS^T -> shared memory, dK += dS^T Q
//   barrier: dS^T complete
//   dQ_partial = dS K -> fp32 adds into the workspace (deterministic mode: in descending KV-block
//                        order, see wait_for_turn)
// With dK, dV split in column parts (kColSplit 2), a warp's S^T and dP^T cover its half of the
// step's queries, P^T goes to shared memory beside dS^T, and dV, dK (the warp's columns, over all
// the step's queries, A fragments read back from shared memory) follow the dS^T barrier.
// The softmax scale of dS is applied once, to dK at the end and to dQ in the postprocess. Calls
// with softcap or ALiBi (kScoreMod) compute dP^T before S^T: the softcap derivative needs the
// capped score next to dP^T.
// Keys beyond the sequence (or its seqused_k) are zero-filled and masked; query rows beyond it have
// lse2 = +inf and are masked too, so a NaN in padding never reaches a gradient. dK and dV are
// written for every key of the block, 0 where no query sees it.
#pragma once

#include <cstdint>

#include "api/paths.hpp"
#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/cuda_check.hpp"
#include "common/dependent_launch.hpp"
#include "ptx/barrier.hpp"
#include "ptx/math.hpp"
#include "sm80/bwd/launch_bwd.hpp"
#include "sm80/bwd/tile_config.hpp"
#include "backward/dq_add.cuh"
#include "backward/workspace.hpp"
#include "sm80/common/gemm.cuh"

namespace flashcore::sm80 {

// Deterministic mode: waits until `turn` KV blocks have added to this query block: the CTAs of the
// higher KV blocks of the same head that see it, which the grid launches first (blockIdx.x counts
// KV blocks down in this mode), so the wait always ends. Descending order is what keeps causal
// calls from serializing: the first adder to a query block is the KV block on its diagonal, for
// which that block is the first step of its walk.
FC_DEVICE void wait_for_turn(const int* counter, int turn) {
  if (threadIdx.x == 0) {
    int seen;
    do {
      asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < turn);
  }
  __syncthreads();
}

// Publishes this CTA's dQ adds (all threads' adds precede the barrier) and passes the turn on.
FC_DEVICE void pass_turn(int* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1);
  }
}

// Where a thread's S^T / dP^T fragment elements sit: element (nt, i) is key key_g + 8 (i >> 1) and
// query query_t + 8 nt + (i & 1); and the visibility rule of the step's sequence.
struct StepFrame {
  int key_g;    // key of fragment rows g (sequence position)
  int query_t;  // query of fragment column 2t of n-tile 0
  int min_diag, max_diag, seqlen_k, seqlen_q;

  FC_DEVICE int key(int i) const { return key_g + 8 * (i >> 1); }
  FC_DEVICE int query(int nt, int i) const { return query_t + 8 * nt + (i & 1); }
  // Query rows past the sequence are masked too: their P is 0 already (lse2 = +inf), but a NaN in
  // V must not reach dK through them.
  FC_DEVICE bool visible(int nt, int i) const {
    const int q = query(nt, i);
    return attn::VisibilityMask::in_band(q, key(i), min_diag, max_diag, seqlen_k) && q < seqlen_q;
  }
};

// P^T = exp2(S^T scale log2(e) - lse2) in place (plain scores); 0 where masked.
template <bool kMasked, int kQNTiles>
FC_DEVICE void probabilities(float (&s)[kQNTiles][4], const float* s_lse2, float scale_log2, const StepFrame& at,
                             int t) {
#pragma unroll
  for (int nt = 0; nt < kQNTiles; ++nt) {
    const float2 lse2 = *reinterpret_cast<const float2*>(s_lse2 + nt * 8 + 2 * t);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float prob = ptx::exp2_approx(fmaf(s[nt][i], scale_log2, -((i & 1) ? lse2.y : lse2.x)));
      s[nt][i] = (kMasked && !at.visible(nt, i)) ? 0.0f : prob;
    }
  }
}

// dS^T = P^T (dP^T - D), from the rounded P^T (the operand dV used), packed; 0 where masked.
template <bool kMasked, int kQNTiles, typename Element>
FC_DEVICE void score_grads(uint32_t (&ds16)[kQNTiles / 2][4], const uint32_t (&p16)[kQNTiles / 2][4],
                           const float (&dp)[kQNTiles][4], const float* s_d, const StepFrame& at, int t, Element) {
#pragma unroll
  for (int kk = 0; kk < kQNTiles / 2; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int nt = 2 * kk + (r >> 1), i0 = 2 * (r & 1);
      const float2 d = *reinterpret_cast<const float2*>(s_d + nt * 8 + 2 * t);
      const float2 prob = ptx::unpack2(p16[kk][r], Element{});
      float ds0 = prob.x * (dp[nt][i0] - d.x);
      float ds1 = prob.y * (dp[nt][i0 + 1] - d.y);
      if (kMasked) {
        if (!at.visible(nt, i0)) ds0 = 0.0f;
        if (!at.visible(nt, i0 + 1)) ds1 = 0.0f;
      }
      ds16[kk][r] = ptx::pack2(ds0, ds1, Element{});
    }
}

// Softcap / ALiBi: P^T into s and dS^T = P^T (dP^T - D) softcap'(capped score) into dp, in place.
template <int kQNTiles>
FC_DEVICE void modified_score_grads(float (&s)[kQNTiles][4], float (&dp)[kQNTiles][4], const float* s_lse2,
                                    const float* s_d, const attn::ScoreTransform& transform, const StepFrame& at,
                                    int t, bool full_tile) {
  const float scale_over_softcap = transform.dot_softcap().scale_over_softcap;
#pragma unroll
  for (int nt = 0; nt < kQNTiles; ++nt) {
    const float2 lse2 = *reinterpret_cast<const float2*>(s_lse2 + nt * 8 + 2 * t);
    const float2 d = *reinterpret_cast<const float2*>(s_d + nt * 8 + 2 * t);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float dcap;
      const float capped = transform.capped_score_fast(s[nt][i], scale_over_softcap, &dcap);
      const float score_log2 = (capped - transform.alibi_bias<float>(at.query(nt, i), at.key(i))) * attn::kLog2e;
      const float prob = ptx::exp2_approx(score_log2 - ((i & 1) ? lse2.y : lse2.x));
      const float ds = prob * (dp[nt][i] - ((i & 1) ? d.y : d.x)) * dcap;
      const bool visible = full_tile || at.visible(nt, i);
      s[nt][i] = visible ? prob : 0.0f;
      dp[nt][i] = visible ? ds : 0.0f;
    }
  }
}

template <class Traits, bool kScoreMod>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    attention_bwd_kernel(const BackwardParams bp, const BwdWorkspace ws) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr bool kSwz = Traits::kSwizzledSmem;  // Q, dO, K, V tiles (tile_config.hpp)
  // No static shared memory: the dynamic window starts the CTA's shared memory, on a 128-byte line
  // as the swizzled tiles need (every tile offset is a multiple of 128 bytes).
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Element* smem = reinterpret_cast<Element*>(smem_raw);
  Element* sK = smem + Traits::kKOffset;
  Element* sV = smem + Traits::kVOffset;
  Element* sQ = smem + Traits::kQOffset;
  Element* sDO = smem + Traits::kDOOffset;
  Element* sDS = smem + Traits::kDSOffset;
  Element* sP = smem + Traits::kPOffset;  // P^T, kColSplit > 1 only
  float* sStats = reinterpret_cast<float*>(smem_raw + Traits::kRowStatsOffsetBytes);  // [stage][lse2 | D]

  const AttentionParams& p = bp.forward;
  // Deterministic mode launches the last KV block first (see wait_for_turn).
  const int n_block = bp.deterministic ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
  const int head_kv = blockIdx.y, batch = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, batch);
  const bool packed_k = p.cu_seqlens_k != nullptr;
  const int keys_in_tensor = packed_k ? p.cu_seqlens_k[batch + 1] - p.cu_seqlens_k[batch] : p.seqlen_k;
  const int n0 = n_block * kBlockN;
  // A programmatic dependent of the preprocess (backward/run.cuh): every thread waits for it after
  // issuing its K / V copies (below); the postprocess may be scheduled once every block got here.
  ptx::allow_next_grid_to_start();
  if (n0 >= keys_in_tensor) {
    ptx::wait_for_previous_grid();
    return;
  }
  const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);

  // The query blocks that see keys [n0, min(n0 + kBlockN, Sk) - 1]: rows i with
  // n0 - max_diagonal <= i <= last key - min_diagonal (monotone in the KV block, so the KV blocks
  // that see one query block are consecutive, starting at first_key(m0) / kBlockN).
  int m_begin = 0, m_count = 0;
  if (n0 < seq.seqlen_k && seq.seqlen_q > 0) {
    const long long key_last = min(n0 + kBlockN, seq.seqlen_k) - 1;
    const long long lo = max(0LL, (long long)n0 - mask.max_diagonal());
    const long long hi = min((long long)seq.seqlen_q - 1, key_last - mask.min_diagonal());
    if (lo <= hi) {
      m_begin = int(lo / kBlockM);
      m_count = int(hi / kBlockM) + 1 - m_begin;
    }
  }
  const int group = p.heads_q / p.heads_kv;
  const int steps = group * m_count;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const bool packed_q = p.is_varlen();
  const int64_t k_row0 = seq.k_start;  // 0 in the dense layout

  float acc_dk[Traits::kDKNTiles][4];
  float acc_dv[Traits::kDVNTiles][4];
  zero_accumulators(acc_dk);
  zero_accumulators(acc_dv);

  // Q, dO, lse2, D of the step at (query head head_kv * group + head_offset, query block
  // m_begin + block_offset) into stage `stage`. Steps walk the query blocks of one head, then the
  // next head; the loop advances (head, block) by a counter, not by a division per step.
  auto load_step = [&](int head_offset, int block_offset, int stage) {
    const int h = head_kv * group + head_offset;
    const int m0 = (m_begin + block_offset) * kBlockM;
    const int rows = min(kBlockM, seq.seqlen_q - m0);
    const int64_t q_row = seq.q_start + m0;  // q_start is 0 in the dense layout
    const Element* q = static_cast<const Element*>(p.q) +
                       attn::token_offset(packed_q, p.q_batch_stride, p.q_seq_stride, p.q_head_stride, batch, q_row, h);
    const Element* dout = static_cast<const Element*>(bp.dout) +
                          attn::token_offset(packed_q, bp.dout_batch_stride, bp.dout_seq_stride, bp.dout_head_stride,
                                             batch, q_row, h);
    load_tile_async<kBlockM, Traits::kHeadDimQK, Traits::kQStride, Traits::kThreads, kSwz>(
        sQ + stage * Traits::kQStageElems, q, p.q_seq_stride, rows, p.head_dim_qk);
    load_tile_async<kBlockM, Traits::kHeadDimV, Traits::kDOStride, Traits::kThreads, kSwz>(
        sDO + stage * Traits::kDOStageElems, dout, bp.dout_seq_stride, rows, p.head_dim_v);
    // 2 x kBlockM floats = kBlockM / 2 chunks of 16 bytes (padding rows make every read valid).
    constexpr int kStatChunks = kBlockM / 4;
    const int ptid = ptx::thread_index_x_here();
    if (ptid < 2 * kStatChunks) {
      const int which = ptid / kStatChunks, chunk = ptid % kStatChunks;
      const float* src = (which == 0 ? ws.lse2 : ws.row_d) + ws.row(h, batch, seq.q_start, m0) + 4 * chunk;
      ptx::cp_async_16(ptx::smem_address(sStats + (2 * stage + which) * kBlockM + 4 * chunk), src, true);
    }
  };

  if (steps > 0) {
    const Element* k = static_cast<const Element*>(p.k) +
                       attn::token_offset(packed_k, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, batch,
                                          k_row0 + n0, head_kv);
    const Element* v = static_cast<const Element*>(p.v) +
                       attn::token_offset(packed_k, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, batch,
                                          k_row0 + n0, head_kv);
    // A call padded to this kernel (api/built_kernels.hpp): zeros past its head dims.
    load_tile_async<kBlockN, Traits::kHeadDimQK, Traits::kKStride, Traits::kThreads, kSwz>(
        sK, k, p.k_seq_stride, seq.seqlen_k - n0, p.head_dim_qk);
    load_tile_async<kBlockN, Traits::kHeadDimV, Traits::kVStride, Traits::kThreads, kSwz>(
        sV, v, p.v_seq_stride, seq.seqlen_k - n0, p.head_dim_v);
  }
  ptx::wait_for_previous_grid();  // lse2, D and the zeroed dQ accumulator
  if (steps > 0) {
    load_step(0, 0, 0);
    ptx::cp_async_commit();
  }

  // This warp's keys inside the block, its column part of dK / dV and the first query of its S^T.
  const int warp_key0 = (warp % Traits::kKeyWarps) * 16;
  constexpr bool kSplit = Traits::kColSplit > 1;
  const int dkv_part = kSplit ? warp / Traits::kKeyWarps : 0;  // a constant 0 when not split
  const int warp_query0 = dkv_part * Traits::kStepQueries;
  // Formed once: inside the loop the cp.async asm (a memory clobber) keeps the compiler from
  // hoisting what reads the parameters, and each step would start with a division and a square root.
  const float scale_log2 = attn::softmax_scale(p) * attn::kLog2e;
  // This step's query head in the group and query block; the walk ends after the group's last head.
  int head_offset = steps > 0 ? 0 : group, block_offset = 0;
#pragma unroll 1
  for (int stage = 0; head_offset < group; stage ^= 1) {
    ptx::cp_async_wait<0>();
    __syncthreads();
    const bool head_done = block_offset + 1 == m_count;
    const int next_head_offset = head_done ? head_offset + 1 : head_offset;
    const int next_block_offset = head_done ? 0 : block_offset + 1;
    // The next step's copies into the other stage (every warp is done with it: the barrier above).
    // Plain calls issue them after this step's first GEMM, so that their address math and bounds
    // checks run while its MMAs execute instead of between the barrier and every warp's first ldmatrix.
    auto prefetch_next_step = [&] {
      if (next_head_offset < group) {
        load_step(next_head_offset, next_block_offset, stage ^ 1);
        ptx::cp_async_commit();
      }
    };
    const int h = head_kv * group + head_offset;
    const int m0 = (m_begin + block_offset) * kBlockM;
    head_offset = next_head_offset;
    block_offset = next_block_offset;
    const Element* sQ_step = sQ + stage * Traits::kQStageElems;
    const Element* sDO_step = sDO + stage * Traits::kDOStageElems;
    const float* s_lse2 = sStats + 2 * stage * kBlockM + warp_query0;  // this warp's queries' lse2, then D
    const float* s_d = s_lse2 + kBlockM;

    // P^T and dS^T (softcap derivative included; the softmax scale is applied to dK and dQ at the
    // end) as packed 16-bit A fragments.
    const bool full_tile = m0 + kBlockM <= seq.seqlen_q &&
                           mask.tile_fully_visible(m0, m0 + kBlockM - 1, n0, n0 + kBlockN - 1);
    const StepFrame frame{n0 + warp_key0 + g, m0 + warp_query0 + 2 * t, mask.min_diagonal(), mask.max_diagonal(),
                          seq.seqlen_k, seq.seqlen_q};
    const Element* sQ_warp = sQ_step + warp_query0 * Traits::kQStride;  // this warp's S^T queries
    const Element* sDO_warp = sDO_step + warp_query0 * Traits::kDOStride;
    uint32_t p16[Traits::kSNTiles / 2][4];
    uint32_t ds16[Traits::kSNTiles / 2][4];
    if constexpr (!kScoreMod) {
      // S^T -> P^T first, so only its 16-bit form is live while dP^T accumulates.
      float acc_s[Traits::kSNTiles][4];
      zero_accumulators(acc_s);
      warp_gemm_nt<Traits::kHeadDimQK, Traits::kSNTiles, Traits::kKStride, kSwz, Traits::kQStride, kSwz>(
          acc_s, sK + warp_key0 * Traits::kKStride, sQ_warp, lane);
      prefetch_next_step();
      if (full_tile) {
        probabilities<false>(acc_s, s_lse2, scale_log2, frame, t);
      } else {
        probabilities<true>(acc_s, s_lse2, scale_log2, frame, t);
      }
      pack_a_fragments(p16, acc_s, Element{});
      if constexpr (kSplit) {
        store_a_fragments<Traits::kDSStride>(p16, sP + warp_key0 * Traits::kDSStride + warp_query0, g, t);
      } else {
        warp_gemm_rs<Traits::kSNTiles / 2, Traits::kDVNTiles, Traits::kDOStride, kSwz>(acc_dv, p16, sDO_step, lane);
      }
      float acc_dp[Traits::kSNTiles][4];
      zero_accumulators(acc_dp);
      warp_gemm_nt<Traits::kHeadDimV, Traits::kSNTiles, Traits::kVStride, kSwz, Traits::kDOStride, kSwz>(
          acc_dp, sV + warp_key0 * Traits::kVStride, sDO_warp, lane);
      if (full_tile) {
        score_grads<false>(ds16, p16, acc_dp, s_d, frame, t, Element{});
      } else {
        score_grads<true>(ds16, p16, acc_dp, s_d, frame, t, Element{});
      }
    } else {
      // Softcap / ALiBi: the derivative needs the capped score, so S^T and dP^T are both live.
      prefetch_next_step();  // here: after a GEMM it costs these kernels spills (S^T and dP^T both live)
      const attn::ScoreTransform transform = attn::make_score_transform(p, batch, h, seq.seqlen_q, seq.seqlen_k);
      float acc_dp[Traits::kSNTiles][4];
      zero_accumulators(acc_dp);
      warp_gemm_nt<Traits::kHeadDimV, Traits::kSNTiles, Traits::kVStride, kSwz, Traits::kDOStride, kSwz>(
          acc_dp, sV + warp_key0 * Traits::kVStride, sDO_warp, lane);
      float acc_s[Traits::kSNTiles][4];
      zero_accumulators(acc_s);
      warp_gemm_nt<Traits::kHeadDimQK, Traits::kSNTiles, Traits::kKStride, kSwz, Traits::kQStride, kSwz>(
          acc_s, sK + warp_key0 * Traits::kKStride, sQ_warp, lane);
      modified_score_grads(acc_s, acc_dp, s_lse2, s_d, transform, frame, t, full_tile);
      pack_a_fragments(p16, acc_s, Element{});
      pack_a_fragments(ds16, acc_dp, Element{});
      if constexpr (kSplit) {
        store_a_fragments<Traits::kDSStride>(p16, sP + warp_key0 * Traits::kDSStride + warp_query0, g, t);
      } else {
        warp_gemm_rs<Traits::kSNTiles / 2, Traits::kDVNTiles, Traits::kDOStride, kSwz>(acc_dv, p16, sDO_step, lane);
      }
    }

    // dS^T to shared memory (for dQ; and for dK when the columns are split), dK += dS^T Q.
    store_a_fragments<Traits::kDSStride>(ds16, sDS + warp_key0 * Traits::kDSStride + warp_query0, g, t);
    if constexpr (kSplit) {
      __syncthreads();  // P^T, dS^T complete
      // This warp's columns of dV and dK, over all the step's queries (A fragments of its 16 keys).
      uint32_t a16[Traits::kQNTiles / 2][4];
      load_a_fragments<Traits::kDSStride>(a16, sP + warp_key0 * Traits::kDSStride, lane);
      warp_gemm_rs<Traits::kQNTiles / 2, Traits::kDVNTiles, Traits::kDOStride, kSwz>(
          acc_dv, a16, sDO_step + dkv_part * Traits::kDVCols, lane);
      load_a_fragments<Traits::kDSStride>(a16, sDS + warp_key0 * Traits::kDSStride, lane);
      warp_gemm_rs<Traits::kQNTiles / 2, Traits::kDKNTiles, Traits::kQStride, kSwz>(
          acc_dk, a16, sQ_step + dkv_part * Traits::kDKCols, lane);
    } else {
      warp_gemm_rs<Traits::kSNTiles / 2, Traits::kDKNTiles, Traits::kQStride, kSwz>(acc_dk, ds16, sQ_step, lane);
      __syncthreads();  // dS^T complete
    }

    // dQ[m0 + rows of this warp, its columns] += dS K over the block's keys.
    const int dq_row = (warp % Traits::kDqWarpsM) * 16;
    const int dq_col = (warp / Traits::kDqWarpsM) * Traits::kDqCols;
    float acc_dq[Traits::kDqNTiles][4];
    zero_accumulators(acc_dq);
    warp_gemm_tn<kBlockN, Traits::kDqNTiles, Traits::kDSStride, Traits::kKStride, kSwz>(acc_dq, sDS + dq_row,
                                                                                      sK + dq_col, lane);
    const int64_t ws_row0 = ws.row(h, batch, seq.q_start, m0);
    int* turn_counter = nullptr;
    if (bp.deterministic) {
      turn_counter = ws.turn(ws_row0);
      // The KV blocks that see this query block are consecutive, up to the one holding the last
      // key its last row sees (the same diagonal bounds as the walk's m_begin / m_count).
      // (Rows past the sequence do not count: with a window to the right their last key can lie in
      // a KV block that never visits this query block, whose turn would never come.)
      wait_for_turn(turn_counter, mask.last_key(min(m0 + kBlockM, seq.seqlen_q) - 1) / kBlockN - n_block);
    }
    float* dq_acc = ws.dq_accum + (ws_row0 + dq_row + g) * Traits::kHeadDimQK + dq_col + 2 * t;  // == ws.dq_row_stride
#pragma unroll
    for (int nt = 0; nt < Traits::kDqNTiles; nt += 2)
      backward::add_dq_fragments(dq_acc + nt * 8, Traits::kHeadDimQK, acc_dq[nt], acc_dq[nt + 1], t);
    if (bp.deterministic) pass_turn(turn_counter);
  }

  // dK (times the softmax scale), dV of this block's keys (0 for keys no query sees), straight from
  // the fragments.
  const float scale = attn::softmax_scale(p);
  Element* dk = static_cast<Element*>(bp.dk) + attn::token_offset(packed_k, bp.dk_batch_stride, bp.dk_seq_stride,
                                                                   bp.dk_head_stride, batch, k_row0 + n0, head_kv);
  Element* dv = static_cast<Element*>(bp.dv) + attn::token_offset(packed_k, bp.dv_batch_stride, bp.dv_seq_stride,
                                                                   bp.dv_head_stride, batch, k_row0 + n0, head_kv);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = warp_key0 + g + 8 * r;
    if (n0 + key >= keys_in_tensor) continue;
    // Columns past a padded call's head dims are not its own (whole n8 tiles: head dims are
    // multiples of 8 there).
#pragma unroll
    for (int nt = 0; nt < Traits::kDKNTiles; ++nt) {
      const int col = dkv_part * Traits::kDKCols + nt * 8;
      if (col < p.head_dim_qk)
        *reinterpret_cast<uint32_t*>(dk + key * bp.dk_seq_stride + col + 2 * t) =
            ptx::pack2(acc_dk[nt][2 * r] * scale, acc_dk[nt][2 * r + 1] * scale, Element{});
    }
#pragma unroll
    for (int nt = 0; nt < Traits::kDVNTiles; ++nt) {
      const int col = dkv_part * Traits::kDVCols + nt * 8;
      if (col < p.head_dim_v)
        *reinterpret_cast<uint32_t*>(dv + key * bp.dv_seq_stride + col + 2 * t) =
            ptx::pack2(acc_dv[nt][2 * r], acc_dv[nt][2 * r + 1], Element{});
    }
  }
}

// Launches the main kernel of one set of traits; the preprocess has filled ws.
template <class Traits>
Status launch_bwd_traits(const BackwardParams& bp, const BwdWorkspace& ws, cudaStream_t stream) {
  const AttentionParams& p = bp.forward;
  const bool score_mod = p.softcap > 0.0f || p.alibi_slopes != nullptr;
  auto* kernel = score_mod ? &attention_bwd_kernel<Traits, true> : &attention_bwd_kernel<Traits, false>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));
  // Keys: the dense Sk, or (varlen) the longest cu_seqlens_k range, which validate() bounds by total_k.
  const int64_t max_keys = p.cu_seqlens_k != nullptr ? p.total_k : p.seqlen_k;
  if (max_keys == 0) return Status::Ok();
  const dim3 grid(unsigned((max_keys + Traits::kBlockN - 1) / Traits::kBlockN), p.heads_kv, p.batch);
  FC_RETURN_IF_ERROR(cuda_status(launch_kernel(kernel, grid, dim3(Traits::kThreads), Traits::kSmemBytes, stream,
                                                dependent_launch_supported(), bp, ws),
                                  "sm80 attention_bwd_kernel"));
  return Status::Ok();
}

// The tuning table's kernel for (Dqk, Dv, Element), or its compact variant (the 99 KB parts; only
// entries that need more compile one).
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_bwd(const BackwardParams& bp, const BwdWorkspace& ws, bool compact, cudaStream_t stream) {
  constexpr BwdTileShape kCompact = compact_bwd_tile_shape(kHeadDimQK, kHeadDimV);
  if constexpr (!(kCompact == bwd_tile_shape(kHeadDimQK, kHeadDimV))) {
    static_assert(bwd_smem_bytes(kHeadDimQK, kHeadDimV, kCompact, int(sizeof(Element))) <= kCompactSmemBytes,
                  "the compact tile fits the 99 KB parts");
    if (compact) return launch_bwd_traits<BwdTraits<kHeadDimQK, kHeadDimV, Element, kCompact>>(bp, ws, stream);
  }
  return launch_bwd_traits<BwdTraits<kHeadDimQK, kHeadDimV, Element>>(bp, ws, stream);
}

}  // namespace flashcore::sm80

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM80_BWD_INSTANTIATE(DQK, DV, ELEMENT)                                             \
  template flashcore::Status flashcore::sm80::launch_bwd<DQK, DV, ELEMENT>(const flashcore::BackwardParams&, \
                                                                           const flashcore::backward::BwdWorkspace&, \
                                                                           bool, cudaStream_t);
