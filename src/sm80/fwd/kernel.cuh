// sm80 forward kernel shell (FlashAttention-2 on mma.sync; fp16/bf16 on m16n8k16, fp32 on 3xTF32
// m16n8k8, the policy chosen by the element type in mainloop.cuh): one CTA per (query tile, head, batch
// entry), split-Q across warps, K/V streamed through shared memory with cp.async, online softmax in
// registers, P kept in registers for P V.
//
// K/V pipeline, KV blocks visited from the last one the tile can see down to the first (the blocks
// that need masking come first). With one K and one V buffer (kv_stages = 1, FlashAttention-2):
//   barrier A: K_j has landed and every warp is done with V_{j+1}  -> issue V_j
//   S = Q K_j^T                                                      (V_j in flight)
//   barrier B: V_j has landed and every warp is done with K_j       -> issue K_{j-1}
//   mask / softmax, O += P V_j                                       (K_{j-1} in flight)
// With two buffers each (kv_stages = 2):
//   barrier: K_j, V_j have landed and every warp is done with block j+1's buffers -> issue K/V_{j-1}
//   S = Q K_j^T, mask / softmax, O += P V_j                          (K/V_{j-1} in flight)
#pragma once

#include <cstdint>

#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/cuda_check.hpp"
#include "sm80/fwd/epilogue.cuh"
#include "sm80/fwd/launch_fwd.hpp"
#include "sm80/common/gemm.cuh"
#include "sm80/fwd/softmax.cuh"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore::sm80 {

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads) attention_fwd_kernel(const AttentionParams params) {
  using Element = typename Traits::Element;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  Element* sQ = reinterpret_cast<Element*>(smem_raw) + Traits::kQOffset;
  Element* sK = reinterpret_cast<Element*>(smem_raw) + Traits::kKOffset;
  Element* sV = reinterpret_cast<Element*>(smem_raw) + Traits::kVOffset;

  // Causal tiles further down the sequence see more keys: launch them first (reverse order).
  const int m_block = gridDim.x - 1 - blockIdx.x;
  const int head = blockIdx.y;
  const int batch = blockIdx.z;
  const attn::SequenceExtent seq = attn::sequence_extent(params, batch);
  const int m0 = m_block * kBlockM;
  if (m0 >= seq.seqlen_q) return;  // varlen: this sequence is shorter than max_seqlen_q
  const int rows_valid = min(kBlockM, seq.seqlen_q - m0);
  const int m_last = m0 + rows_valid - 1;

  const attn::VisibilityMask mask = attn::make_mask(params, seq.seqlen_q, seq.seqlen_k);
  const attn::ScoreTransform transform =
      attn::make_score_transform(params, batch, head, seq.seqlen_q, seq.seqlen_k);
  const bool score_mod = transform.softcap > 0.0f || transform.alibi_slope != 0.0f || !(transform.scale > 0.0f);
  const float log2_multiplier = score_mod ? 1.0f : transform.scale * attn::kLog2e;
  const float scale_over_softcap = transform.dot_softcap().scale_over_softcap;

  // 64-bit element offsets of this (sequence, head) in each tensor.
  const int head_kv = head / (params.heads_q / params.heads_kv);
  const int64_t q_row0 = params.cu_seqlens_q ? seq.q_start : 0;
  const int64_t k_row0 = params.cu_seqlens_k ? seq.k_start : 0;
  const int64_t q_batch = params.cu_seqlens_q ? 0 : int64_t(batch) * params.q_batch_stride;
  const int64_t k_batch = params.cu_seqlens_k ? 0 : int64_t(batch) * params.k_batch_stride;
  const int64_t v_batch = params.cu_seqlens_k ? 0 : int64_t(batch) * params.v_batch_stride;
  const Element* q_tile = static_cast<const Element*>(params.q) + q_batch +
                          (q_row0 + m0) * params.q_seq_stride + int64_t(head) * params.q_head_stride;
  const Element* k_seq = static_cast<const Element*>(params.k) + k_batch + k_row0 * params.k_seq_stride +
                         int64_t(head_kv) * params.k_head_stride;
  const Element* v_seq = static_cast<const Element*>(params.v) + v_batch + k_row0 * params.v_seq_stride +
                         int64_t(head_kv) * params.v_head_stride;

  const int tid = threadIdx.x;
  const int lane = tid & 31;
  const int warp_row0 = (tid >> 5) * Traits::kRowsPerWarp;

  // The KV blocks this tile can see: keys [first_key(m0), last_key(m_last)] (both monotone in i).
  const int kv_first = mask.first_key(m0);
  const int kv_last = mask.last_key(m_last);
  const int n_block_min = kv_first / kBlockN;
  const int n_block_max = kv_last >= kv_first ? kv_last / kBlockN : n_block_min - 1;

  float acc_o[Traits::kMTiles][Traits::kOutNTiles][4];
  zero_accumulators(acc_o);
  OnlineSoftmax<Traits::kMTiles, Traits::kScoreNTiles, Traits::kOutNTiles> softmax;
  softmax.init();
  const FragmentCoords coords_base{m0 + warp_row0 + (lane >> 2), 2 * (lane & 3)};

  // The K/V sequence bases are CTA-uniform 64-bit values needed once per KV block: they wait in
  // shared memory (written before the first barrier, read after it) rather than in four registers
  // for the whole loop. (Kept in registers, they were what ptxas spilled on the 192-accumulator
  // tiles; a shared-memory read per block costs nothing next to the block's MMAs.)
  __shared__ const Element* kv_bases[2];
  if (tid == 0) {
    kv_bases[0] = k_seq;
    kv_bases[1] = v_seq;
  }
  auto load_k = [&](Element* sK_block, int n_block, const Element* k_base) {
    const int n0 = n_block * kBlockN;
    load_tile_async<kBlockN, Traits::kHeadDimQK, Traits::kKStride, Traits::kThreads>(
        sK_block, k_base + int64_t(n0) * params.k_seq_stride, params.k_seq_stride, seq.seqlen_k - n0,
        params.head_dim_qk);
  };
  auto load_v = [&](Element* sV_block, int n_block, const Element* v_base) {
    const int n0 = n_block * kBlockN;
    load_tile_async<kBlockN, Traits::kHeadDimV, Traits::kVStride, Traits::kThreads>(
        sV_block, v_base + int64_t(n0) * params.v_seq_stride, params.v_seq_stride, seq.seqlen_k - n0,
        params.head_dim_v);
  };

  // Score transform, masking (only on tiles that straddle a mask boundary), online softmax, P V.
  auto softmax_and_pv = [&](float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4], int n_block,
                            const Element* sV_block) {
    const int n0 = n_block * kBlockN;
    const FragmentCoords coords{coords_base.row0, coords_base.col0 + n0};
    if (mask.tile_fully_visible(m0, m_last, n0, n0 + kBlockN - 1)) {
      transform_and_mask<false, !Traits::kTf32x3>(acc_s, coords, transform, scale_over_softcap, score_mod, mask);
    } else {
      transform_and_mask<true, !Traits::kTf32x3>(acc_s, coords, transform, scale_over_softcap, score_mod, mask);
    }
    softmax.update(acc_s, acc_o, log2_multiplier);
    gemm_pv<Traits>(acc_o, acc_s, sV_block, lane);
  };

  if (n_block_max >= n_block_min) {
    load_tile_async<kBlockM, Traits::kHeadDimQK, Traits::kQStride, Traits::kThreads>(
        sQ, q_tile, params.q_seq_stride, rows_valid, params.head_dim_qk);
    load_k(sK, n_block_max, k_seq);
    if constexpr (Traits::kKVStages == 2) load_v(sV, n_block_max, v_seq);
    ptx::cp_async_commit();

    if constexpr (Traits::kKVStages == 1) {
#pragma unroll 1
      for (int n_block = n_block_max; n_block >= n_block_min; --n_block) {
        ptx::cp_async_wait<0>();
        __syncthreads();  // barrier A: K_j (and Q) visible to all; every warp finished P V_{j+1}
        load_v(sV, n_block, kv_bases[1]);
        ptx::cp_async_commit();

        float acc_s[Traits::kMTiles][Traits::kScoreNTiles][4];
        gemm_qk<Traits>(acc_s, sQ, sK, warp_row0, lane);

        ptx::cp_async_wait<0>();
        __syncthreads();  // barrier B: V_j visible to all; every warp finished reading K_j
        if (n_block > n_block_min) {
          load_k(sK, n_block - 1, kv_bases[0]);
          ptx::cp_async_commit();
        }
        softmax_and_pv(acc_s, n_block, sV);
      }
    } else {
#pragma unroll 1
      for (int n_block = n_block_max, stage = 0; n_block >= n_block_min; --n_block, stage ^= 1) {
        ptx::cp_async_wait<0>();
        __syncthreads();  // K_j, V_j (and Q) visible to all; every warp finished block j+1 (other stage)
        if (n_block > n_block_min) {
          load_k(sK + (stage ^ 1) * Traits::kKStageElems, n_block - 1, kv_bases[0]);
          load_v(sV + (stage ^ 1) * Traits::kVStageElems, n_block - 1, kv_bases[1]);
          ptx::cp_async_commit();
        }
        float acc_s[Traits::kMTiles][Traits::kScoreNTiles][4];
        gemm_qk<Traits>(acc_s, sQ, sK + stage * Traits::kKStageElems, warp_row0, lane);
        softmax_and_pv(acc_s, n_block, sV + stage * Traits::kVStageElems);
      }
    }
  }

  float lse[Traits::kMTiles][2];
  softmax.finalize(acc_o, lse);
  __syncthreads();  // every warp is done with sQ/sK/sV before the O tile overwrites them
  // Output addresses are formed only now, so they hold no registers during the mainloop; the
  // varlen start row is re-read for the same reason (it is also what the Q load used).
  const int64_t q_start = params.cu_seqlens_q ? int64_t(params.cu_seqlens_q[batch]) : 0;
  const int64_t o_batch = params.cu_seqlens_q ? 0 : int64_t(batch) * params.o_batch_stride;
  Element* o_tile = static_cast<Element*>(params.o) + o_batch + (q_start + m0) * params.o_seq_stride +
                    int64_t(head) * params.o_head_stride;
  float* lse_rows = nullptr;
  if (params.lse != nullptr) {
    lse_rows = params.lse + (params.cu_seqlens_q ? q_start : int64_t(batch) * params.lse_batch_stride) +
               int64_t(head) * params.lse_head_stride + m0;
  }
  store_output<Traits>(acc_o, lse, reinterpret_cast<Element*>(smem_raw), o_tile, params.o_seq_stride,
                       lse_rows, rows_valid, params.head_dim_v, warp_row0, lane, tid);
}

// Launches the kernel for one set of traits.
template <class Traits>
Status launch_with_traits(const AttentionParams& params, cudaStream_t stream) {
  auto* kernel = &attention_fwd_kernel<Traits>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));
  const int m_blocks = (params.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  const dim3 grid(m_blocks, params.heads_q, params.batch);
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(params);
  FC_CHECK_LAUNCH("sm80 attention_fwd_kernel");
  return Status::Ok();
}

// The tuning table's kernel for (Dqk, Dv, Element), or its compact variant (the 99 KB parts; only
// entries that need more compile one); each generated unit of the kernel list
// (cmake/KernelList.cmake) instantiates it once.
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_fwd(const AttentionParams& params, bool compact, cudaStream_t stream) {
  constexpr int kElemBytes = int(sizeof(Element));
  constexpr TileShape kCompact = compact_tile_shape(kHeadDimQK, kHeadDimV, kElemBytes);
  if constexpr (!(kCompact == tile_shape(kHeadDimQK, kHeadDimV, kElemBytes))) {
    static_assert(smem_bytes(kHeadDimQK, kHeadDimV, kCompact, kElemBytes) <= kCompactSmemBytes,
                  "the compact tile fits the 99 KB parts");
    if (compact) return launch_with_traits<FwdTraits<kHeadDimQK, kHeadDimV, Element, kCompact>>(params, stream);
  }
  return launch_with_traits<FwdTraits<kHeadDimQK, kHeadDimV, Element>>(params, stream);
}

}  // namespace flashcore::sm80

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM80_FWD_INSTANTIATE(DQK, DV, ELEMENT) \
  template flashcore::Status flashcore::sm80::launch_fwd<DQK, DV, ELEMENT>(const flashcore::AttentionParams&, bool, \
                                                                          cudaStream_t);
