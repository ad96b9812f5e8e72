// sm80 backward main kernel (mma.sync m16n8k16, fp16 / bf16). One CTA per (KV block, KV head,
// batch entry): it keeps dK, dV of its kBlockN keys in registers and walks every (query head of
// the group, query block) that sees those keys (tile_config.hpp has the warp split). Per step:
//   barrier: Q, dO, lse2, D of this step have landed; every warp is done with the previous step
//            (its stage buffers and dS^T)                       -> prefetch the next step's tiles
//   dP^T = V dO^T, S^T = K Q^T                                  (warp: its 16 keys x kBlockM queries)
//   P^T = exp2(S^T scale log2(e) - lse2), dS^T = P^T (dP^T - D) softcap' scale   (in registers)
//   dV += P^T dO, dS^T -> shared memory, dK += dS^T Q           (A operands from registers)
//   barrier: dS^T complete
//   dQ_partial = dS K -> fp32 adds into the workspace (deterministic mode: in KV-block order)
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
#include "ptx/math.hpp"
#include "sm80/bwd/launch_bwd.hpp"
#include "sm80/bwd/tile_config.hpp"
#include "sm80/bwd/workspace.hpp"
#include "sm80/common/gemm.cuh"

namespace flashcore::sm80 {

// Deterministic mode: waits until `turns` KV blocks have added to this query block (the CTAs of
// lower KV blocks of the same head, which the grid launches first, so the wait always ends).
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

// acc (this thread's C fragment pair) += into the fp32 accumulator at `dst` (two adjacent floats).
FC_DEVICE void add_pair(float* dst, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(dst), make_float2(x, y));
#else
  atomicAdd(dst, x);
  atomicAdd(dst + 1, y);
#endif
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    attention_bwd_kernel(const BackwardParams bp, const BwdWorkspace ws) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Element* smem = reinterpret_cast<Element*>(smem_raw);
  Element* sK = smem + Traits::kKOffset;
  Element* sV = smem + Traits::kVOffset;
  Element* sQ = smem + Traits::kQOffset;
  Element* sDO = smem + Traits::kDOOffset;
  Element* sDS = smem + Traits::kDSOffset;
  float* sStats = reinterpret_cast<float*>(smem_raw + Traits::kRowStatsOffsetBytes);  // [stage][lse2 | D]

  const AttentionParams& p = bp.forward;
  const int n_block = blockIdx.x, head_kv = blockIdx.y, batch = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(p, batch);
  const bool packed_k = p.cu_seqlens_k != nullptr;
  const int keys_in_tensor = packed_k ? p.cu_seqlens_k[batch + 1] - p.cu_seqlens_k[batch] : p.seqlen_k;
  const int n0 = n_block * kBlockN;
  if (n0 >= keys_in_tensor) return;
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
  const int64_t k_row0 = packed_k ? seq.k_start : 0;

  float acc_dk[Traits::kDKNTiles][4];
  float acc_dv[Traits::kDVNTiles][4];
  zero_accumulators(acc_dk);
  zero_accumulators(acc_dv);

  // Q, dO, lse2, D of step `step` into stage `stage`.
  auto load_step = [&](int step, int stage) {
    const int h = head_kv * group + step / m_count;
    const int m0 = (m_begin + step % m_count) * kBlockM;
    const int rows = min(kBlockM, seq.seqlen_q - m0);
    const int64_t q_row = (packed_q ? seq.q_start : 0) + m0;
    const Element* q = static_cast<const Element*>(p.q) + (packed_q ? 0 : int64_t(batch) * p.q_batch_stride) +
                       q_row * p.q_seq_stride + int64_t(h) * p.q_head_stride;
    const Element* dout = static_cast<const Element*>(bp.dout) +
                          (packed_q ? 0 : int64_t(batch) * bp.dout_batch_stride) + q_row * bp.dout_seq_stride +
                          int64_t(h) * bp.dout_head_stride;
    load_tile_async<kBlockM, Traits::kHeadDimQK, Traits::kQStride, Traits::kThreads>(
        sQ + stage * Traits::kQStageElems, q, p.q_seq_stride, rows);
    load_tile_async<kBlockM, Traits::kHeadDimV, Traits::kDOStride, Traits::kThreads>(
        sDO + stage * Traits::kDOStageElems, dout, bp.dout_seq_stride, rows);
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
    const Element* k = static_cast<const Element*>(p.k) + (packed_k ? 0 : int64_t(batch) * p.k_batch_stride) +
                       (k_row0 + n0) * p.k_seq_stride + int64_t(head_kv) * p.k_head_stride;
    const Element* v = static_cast<const Element*>(p.v) + (packed_k ? 0 : int64_t(batch) * p.v_batch_stride) +
                       (k_row0 + n0) * p.v_seq_stride + int64_t(head_kv) * p.v_head_stride;
    load_tile_async<kBlockN, Traits::kHeadDimQK, Traits::kKStride, Traits::kThreads>(sK, k, p.k_seq_stride,
                                                                                     seq.seqlen_k - n0);
    load_tile_async<kBlockN, Traits::kHeadDimV, Traits::kVStride, Traits::kThreads>(sV, v, p.v_seq_stride,
                                                                                    seq.seqlen_k - n0);
    load_step(0, 0);
    ptx::cp_async_commit();
  }

  const int warp_key0 = warp * 16;  // this warp's keys inside the block
#pragma unroll 1
  for (int step = 0, stage = 0; step < steps; ++step, stage ^= 1) {
    ptx::cp_async_wait<0>();
    __syncthreads();
    if (step + 1 < steps) {
      load_step(step + 1, stage ^ 1);
      ptx::cp_async_commit();
    }
    const int h = head_kv * group + step / m_count;
    const int m0 = (m_begin + step % m_count) * kBlockM;
    const Element* sQ_step = sQ + stage * Traits::kQStageElems;
    const Element* sDO_step = sDO + stage * Traits::kDOStageElems;
    const float* s_lse2 = sStats + 2 * stage * kBlockM;
    const float* s_d = s_lse2 + kBlockM;

    float acc_dp[Traits::kQNTiles][4];
    zero_accumulators(acc_dp);
    warp_gemm_nt<Traits::kHeadDimV, Traits::kQNTiles>(acc_dp, sV + warp_key0 * Traits::kVStride, Traits::kVStride,
                                                      sDO_step, Traits::kDOStride, lane);
    float acc_s[Traits::kQNTiles][4];
    zero_accumulators(acc_s);
    warp_gemm_nt<Traits::kHeadDimQK, Traits::kQNTiles>(acc_s, sK + warp_key0 * Traits::kKStride, Traits::kKStride,
                                                       sQ_step, Traits::kQStride, lane);

    // P^T into acc_s, dS^T (with the softcap derivative and the softmax scale folded in) into acc_dp.
    const attn::ScoreTransform transform = attn::make_score_transform(p, batch, h, seq.seqlen_q, seq.seqlen_k);
    const bool score_mod = transform.softcap > 0.0f || transform.alibi_slope != 0.0f;
    const float scale_log2 = transform.scale * attn::kLog2e;
    const bool full_tile = m0 + kBlockM <= seq.seqlen_q &&
                           mask.tile_fully_visible(m0, m0 + kBlockM - 1, n0, n0 + kBlockN - 1);
    const int key_g = n0 + warp_key0 + g;  // key of this thread's fragment rows (+ 8 for i >= 2)
#pragma unroll
    for (int nt = 0; nt < Traits::kQNTiles; ++nt) {
      const float2 lse2 = *reinterpret_cast<const float2*>(s_lse2 + nt * 8 + 2 * t);
      const float2 d = *reinterpret_cast<const float2*>(s_d + nt * 8 + 2 * t);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = key_g + 8 * (i >> 1);
        const int query = m0 + nt * 8 + 2 * t + (i & 1);
        const float row_lse2 = (i & 1) ? lse2.y : lse2.x;
        const float row_d = (i & 1) ? d.y : d.x;
        float prob, dscale = transform.scale;
        if (!score_mod) {
          prob = ptx::exp2_approx(fmaf(acc_s[nt][i], scale_log2, -row_lse2));
        } else {
          const float capped = transform.softcapped(acc_s[nt][i]);
          prob = ptx::exp2_approx(
              fmaf(capped - transform.alibi_bias<float>(query, key), attn::kLog2e, -row_lse2));
          dscale *= transform.softcap_derivative(capped);
        }
        float ds = prob * (acc_dp[nt][i] - row_d) * dscale;
        if (!full_tile) {
          const int diag = key - query;
          if (diag < mask.min_diagonal() || diag > mask.max_diagonal() || key >= seq.seqlen_k ||
              query >= seq.seqlen_q) {
            prob = 0.0f;
            ds = 0.0f;
          }
        }
        acc_s[nt][i] = prob;
        acc_dp[nt][i] = ds;
      }
    }

    warp_gemm_rs<Traits::kQNTiles, Traits::kDVNTiles>(acc_dv, acc_s, sDO_step, Traits::kDOStride, lane);
#pragma unroll
    for (int nt = 0; nt < Traits::kQNTiles; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        *reinterpret_cast<uint32_t*>(sDS + (warp_key0 + g + 8 * r) * Traits::kDSStride + nt * 8 + 2 * t) =
            ptx::pack2(acc_dp[nt][2 * r], acc_dp[nt][2 * r + 1], Element{});
    warp_gemm_rs<Traits::kQNTiles, Traits::kDKNTiles>(acc_dk, acc_dp, sQ_step, Traits::kQStride, lane);
    __syncthreads();  // dS^T complete

    // dQ[m0 + rows of this warp, its columns] += dS K over the block's keys.
    const int dq_row = (warp % Traits::kDqWarpsM) * 16;
    const int dq_col = (warp / Traits::kDqWarpsM) * Traits::kDqCols;
    float acc_dq[Traits::kDqNTiles][4];
    zero_accumulators(acc_dq);
    warp_gemm_tn<kBlockN, Traits::kDqNTiles>(acc_dq, sDS + dq_row, Traits::kDSStride, sK + dq_col, Traits::kKStride,
                                              lane);
    const int64_t ws_row0 = ws.row(h, batch, seq.q_start, m0);
    int* turn_counter = nullptr;
    if (bp.deterministic) {
      turn_counter = ws.turn<kBlockM>(ws_row0);
      wait_for_turn(turn_counter, n_block - mask.first_key(m0) / kBlockN);
    }
    float* dq_acc = ws.dq_accum + (ws_row0 + dq_row + g) * Traits::kHeadDimQK + dq_col + 2 * t;
#pragma unroll
    for (int nt = 0; nt < Traits::kDqNTiles; ++nt)
#pragma unroll
      for (int r = 0; r < 2; ++r)
        add_pair(dq_acc + 8 * r * Traits::kHeadDimQK + nt * 8, acc_dq[nt][2 * r], acc_dq[nt][2 * r + 1]);
    if (bp.deterministic) pass_turn(turn_counter);
  }

  // dK, dV of this block's keys (0 for keys no query sees), straight from the fragments.
  Element* dk = static_cast<Element*>(bp.dk) + (packed_k ? 0 : int64_t(batch) * bp.dk_batch_stride) +
                (k_row0 + n0) * bp.dk_seq_stride + int64_t(head_kv) * bp.dk_head_stride;
  Element* dv = static_cast<Element*>(bp.dv) + (packed_k ? 0 : int64_t(batch) * bp.dv_batch_stride) +
                (k_row0 + n0) * bp.dv_seq_stride + int64_t(head_kv) * bp.dv_head_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int key = warp_key0 + g + 8 * r;
    if (n0 + key >= keys_in_tensor) continue;
#pragma unroll
    for (int nt = 0; nt < Traits::kDKNTiles; ++nt)
      *reinterpret_cast<uint32_t*>(dk + key * bp.dk_seq_stride + nt * 8 + 2 * t) =
          ptx::pack2(acc_dk[nt][2 * r], acc_dk[nt][2 * r + 1], Element{});
#pragma unroll
    for (int nt = 0; nt < Traits::kDVNTiles; ++nt)
      *reinterpret_cast<uint32_t*>(dv + key * bp.dv_seq_stride + nt * 8 + 2 * t) =
          ptx::pack2(acc_dv[nt][2 * r], acc_dv[nt][2 * r + 1], Element{});
  }
}

// Launches the main kernel for one (Dqk, Dv, Element); the preprocess has filled ws.
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_bwd(const BackwardParams& bp, const BwdWorkspace& ws, cudaStream_t stream) {
  using Traits = BwdTraits<kHeadDimQK, kHeadDimV, Element>;
  const AttentionParams& p = bp.forward;
  auto* kernel = &attention_bwd_kernel<Traits>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));
  // Keys: the dense Sk, or (varlen) the longest cu_seqlens_k range, which validate() bounds by total_k.
  const int64_t max_keys = p.cu_seqlens_k != nullptr ? p.total_k : p.seqlen_k;
  if (max_keys == 0) return Status::Ok();
  const dim3 grid(unsigned((max_keys + Traits::kBlockN - 1) / Traits::kBlockN), p.heads_kv, p.batch);
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(bp, ws);
  FC_CHECK_LAUNCH("sm80 attention_bwd_kernel");
  return Status::Ok();
}

}  // namespace flashcore::sm80

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM80_BWD_INSTANTIATE(DQK, DV, ELEMENT)                                             \
  template flashcore::Status flashcore::sm80::launch_bwd<DQK, DV, ELEMENT>(const flashcore::BackwardParams&, \
                                                                           const flashcore::sm80::BwdWorkspace&, \
                                                                           cudaStream_t);
