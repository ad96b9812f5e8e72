// The decode path's kernels (layout and tiling: tile_config.hpp):
//   decode_split_kernel    one CTA per (query row tile x split, KV head, batch entry): the packed
//                          query rows of one KV head against one key range of its cache (dense,
//                          varlen, paged, batch-indexed or left-padded: attn::kv_row_offset).
//   decode_combine_kernel  merges the splits' (o, lse) partials of each row (num_splits > 1).
//
// K/V ring, kStages blocks deep (block i in stage i % kStages):
//   wait for block i, barrier (every warp is also done with block i - 1)
//   issue block i + kStages - 1 into block i - 1's stage
//   S = Q K_w^T over the warp's 16 keys, mask, online softmax, O_w += P V_w
// then the warps' (O_w, max_w, sum_w) are merged through shared memory (attn::SoftmaxState::merge).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "attention/softmax_state.hpp"
#include "common/cuda_check.hpp"
#include "common/dependent_launch.hpp"
#include "ptx/barrier.hpp"
#include "sm80/common/gemm.cuh"
#include "sm80/decode/launch_decode.hpp"
#include "sm80/decode/plan.hpp"
#include "sm80/decode/tile_config.hpp"
#include "sm80/fwd/softmax.cuh"

namespace flashcore::sm80 {

// How a thread copies K/V blocks: the same 16-byte column of kRowsPerThread rows of K and of V per
// block (rows row0 + r * kRowStep), so a row's place is found once for both.
template <class Traits>
struct KvCopyPattern {
  static constexpr int kChunksPerRow = Traits::kHeadDimV / 8;
  static constexpr int kThreadsPerRow = gcd_int(kChunksPerRow, Traits::kThreads);
  static constexpr int kRowStep = Traits::kThreads / kThreadsPerRow;
  static constexpr int kColIters = kChunksPerRow / kThreadsPerRow;
  static constexpr int kRowsPerThread = Traits::kBlockN / kRowStep;
  static_assert(Traits::kHeadDimQK == Traits::kHeadDimV, "K and V rows share the copy pattern");
  static_assert(Traits::kBlockN % kRowStep == 0 && kChunksPerRow % kThreadsPerRow == 0, "whole rows per pass");
  FC_DEVICE static int row0() { return int(threadIdx.x) / kThreadsPerRow; }
  FC_DEVICE static int col() { return (int(threadIdx.x) % kThreadsPerRow) * 8; }
};

// A paged block's rows in shared memory: the element offsets of each key row's (page, row, KV head)
// in k and in v, -1 past the keys, so a copy adds its column and issues (no per-copy address math).
// Thread t < kBlockN finds row t of a block in two halves one mainloop iteration apart: the block
// table read (fetch_paged_row, into a register) and the offsets (store_paged_row, into the slot
// the copy of the next iteration reads). The table read's latency then hides behind a block of
// compute instead of stalling the fetching warps before the next barrier. Two slots, by block parity.
struct PagedRowFetch {
  int entry = 0;  // the block-table entry of the row's page
  int row = -1;   // the row inside the page; -1: past the keys (or a thread with no row)
};
template <class Traits>
FC_DEVICE PagedRowFetch fetch_paged_row(const attn::PageTable& pages, int b, int64_t k_start, int seqlen_k,
                                        int n_block) {
  PagedRowFetch f;
  const int key = n_block * Traits::kBlockN + int(threadIdx.x);
  if (int(threadIdx.x) < Traits::kBlockN && key < seqlen_k) {
    const int row = int(k_start + key);
    f.entry = pages.entry(b, row);
    f.row = row % pages.page_size;
  }
  return f;
}
template <class Traits>
FC_DEVICE void store_paged_row(longlong2* slot, const AttentionParams& p, const attn::PageTable& pages,
                               PagedRowFetch f, int head_kv) {
  if (int(threadIdx.x) >= Traits::kBlockN) return;
  longlong2 at = make_longlong2(-1, -1);
  if (f.row >= 0) {
    const attn::KvRowLocation loc{pages.page_of(f.entry), f.row};
    at.x = attn::kv_location_offset(loc, false, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, head_kv);
    at.y = attn::kv_location_offset(loc, false, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, head_kv);
  }
  slot[threadIdx.x] = at;
}

// Copies the K and V rows of KV block n_block (keys n_block * kBlockN + [0, kBlockN)) into one ring
// stage; keys at or past seqlen_k are zero-filled and not read. Dense: k_rows / v_rows point at key
// 0 of this (entry, KV head); paged: `rows` holds the block's row offsets (store_paged_row).
// l2_policy: the reads' L2 cache policy (kv_l2_policy).
template <class Traits, bool kPaged>
FC_DEVICE void load_kv_block(typename Traits::Element* sK, typename Traits::Element* sV, const AttentionParams& p,
                             const typename Traits::Element* k_rows, const typename Traits::Element* v_rows,
                             const longlong2* rows, int seqlen_k, int n_block, uint64_t l2_policy) {
  using Element = typename Traits::Element;
  using Pattern = KvCopyPattern<Traits>;
  const int row0 = Pattern::row0();
  const int col = Pattern::col();
  // Paged: every row's offsets are read before the first copy is issued. A shared-memory read after
  // a cp.async is not moved above it (both touch shared memory), so reads and copies interleaved
  // row by row wait out one shared-memory latency per row.
  longlong2 paged_at[kPaged ? Pattern::kRowsPerThread : 1];
  if constexpr (kPaged) {
#pragma unroll
    for (int r = 0; r < Pattern::kRowsPerThread; ++r) paged_at[r] = rows[row0 + r * Pattern::kRowStep];
  }
#pragma unroll
  for (int r = 0; r < Pattern::kRowsPerThread; ++r) {
    const int row = row0 + r * Pattern::kRowStep;
    const Element* k_src = static_cast<const Element*>(p.k);  // a real address for the zero-fill
    const Element* v_src = static_cast<const Element*>(p.v);
    bool valid;
    if constexpr (kPaged) {
      const longlong2 at = paged_at[r];
      valid = at.x >= 0;
      if (valid) {
        k_src += at.x + col;
        v_src += at.y + col;
      }
    } else {
      const int key = n_block * Traits::kBlockN + row;
      valid = key < seqlen_k;
      if (valid) {
        k_src = k_rows + int64_t(key) * p.k_seq_stride + col;
        v_src = v_rows + int64_t(key) * p.v_seq_stride + col;
      }
    }
#pragma unroll
    for (int c = 0; c < Pattern::kColIters; ++c) {
      const int offset = c * Pattern::kThreadsPerRow * 8;
      // A call padded to this kernel (api/built_kernels.hpp): zeros past its head dims.
      const bool k_valid = valid && col + offset < p.head_dim_qk;
      const bool v_valid = valid && col + offset < p.head_dim_v;
      // Padded rows keep this address form: with smem_tile_offset<false, ...> instead, ptxas (CUDA
      // 13.0) gave the d96 kernel an LDGSTS whose cache-policy descriptor sat in an odd uniform
      // register, an illegal instruction at run time.
      Element* k_dst = sK + row * Traits::kKStride + col + offset;
      Element* v_dst = sV + row * Traits::kVStride + col + offset;
      if constexpr (Traits::kSwizzledSmem) {
        k_dst = sK + smem_tile_offset<true, Traits::kKStride>(row, col + offset);
        v_dst = sV + smem_tile_offset<true, Traits::kVStride>(row, col + offset);
      }
      ptx::cp_async_16(ptx::smem_address(k_dst), k_valid ? k_src + offset : k_src, k_valid, l2_policy);
      ptx::cp_async_16(ptx::smem_address(v_dst), v_valid ? v_src + offset : v_src, v_valid, l2_policy);
    }
  }
}

// The score transform and mask of one warp's S fragment (kNTiles * 8 keys from key0). Packed rows: a
// thread's row (mt, half) is query token token[mt][half] of head slope[mt][half]'s ALiBi slope.
template <bool kMasked, int kMTiles, int kNTiles>
FC_DEVICE void decode_transform_and_mask(float (&s)[kMTiles][kNTiles][4], const int (&token)[kMTiles][2],
                                         const float (&slope)[kMTiles][2], int key0, attn::ScoreTransform transform,
                                         float scale_over_softcap, bool score_mod, int min_diag, int max_diag,
                                         int seqlen_k) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      transform.alibi_slope = slope[mt][half];
#pragma unroll
      for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = key0 + nt * 8 + 2 * t + e;
          float& v = s[mt][nt][2 * half + e];
          if (score_mod) v = transform.apply_fast(v, token[mt][half], key, scale_over_softcap) * attn::kLog2e;
          if constexpr (kMasked) {
            if (!attn::VisibilityMask::in_band(token[mt][half], key, min_diag, max_diag, seqlen_k)) v = -INFINITY;
          }
        }
    }
}

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads) decode_split_kernel(const AttentionParams p, const DecodeSplits splits) {
  using Element = typename Traits::Element;
  constexpr bool kPaged = Traits::kPaged;
  constexpr int kBlockM = Traits::kBlockM;
  constexpr int kBlockN = Traits::kBlockN;
  constexpr int kStages = Traits::kStages;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // The swizzled tiles' XOR addressing needs them on 128-byte lines (kDecodeSmemAlignSlack).
  unsigned char* const smem = Traits::kSwizzledSmem ? reinterpret_cast<unsigned char*>(
                                                          (reinterpret_cast<uintptr_t>(smem_raw) + 127) & ~uintptr_t(127))
                                                    : smem_raw;
  Element* sQ = reinterpret_cast<Element*>(smem);
  Element* sK = sQ + Traits::kKOffset;
  Element* sV = sQ + Traits::kVOffset;

  // A split call's combine grid may be scheduled now (it waits for this grid's results): its launch
  // latency then overlaps this grid instead of following it.
  ptx::allow_next_grid_to_start();
  const int split = blockIdx.x % splits.count;
  const int m_tile = blockIdx.x / splits.count;
  const int head_kv = blockIdx.y;
  const int b = blockIdx.z;
  const int group = p.heads_q / p.heads_kv;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  const int rows_total = seq.seqlen_q * group;
  const int m0 = m_tile * kBlockM;
  if (m0 >= rows_total) return;  // varlen: this sequence has fewer query rows
  const int rows_valid = min(kBlockM, rows_total - m0);
  const int token_first = m0 / group;
  const int token_last = (m0 + rows_valid - 1) / group;

  // This split's KV blocks: an even share of the blocks any of the tile's rows sees.
  const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
  const int kv_first = mask.first_key(token_first);
  const int kv_last = mask.last_key(token_last);
  const int n_block_min = kv_first / kBlockN;
  const int n_blocks = kv_last >= kv_first ? kv_last / kBlockN - n_block_min + 1 : 0;
  const int per_split = (n_blocks + splits.count - 1) / splits.count;
  const int n_lo = n_block_min + split * per_split;
  const int n_hi = min(n_lo + per_split, n_block_min + n_blocks) - 1;

  attn::ScoreTransform transform = attn::make_score_transform(p, b, 0, seq.seqlen_q, seq.seqlen_k);
  transform.alibi_slope = 0.0f;  // per row below
  const float scale_over_softcap = transform.dot_softcap().scale_over_softcap;  // for apply_fast
  const bool score_mod = transform.softcap > 0.0f || p.alibi_slopes != nullptr || !(transform.scale > 0.0f);
  const float log2_multiplier = score_mod ? 1.0f : transform.scale * attn::kLog2e;

  const int tid = threadIdx.x;
  const int warp = tid >> 5, lane = tid & 31;
  // The packed rows this thread holds in the S / O fragments: rows mt * 16 + lane / 4 + 8 half.
  int token[Traits::kMTiles][2];
  float slope[Traits::kMTiles][2];
#pragma unroll
  for (int mt = 0; mt < Traits::kMTiles; ++mt)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = m0 + mt * 16 + (lane >> 2) + 8 * half;
      token[mt][half] = row / group;
      const int head = head_kv * group + row % group;
      slope[mt][half] = p.alibi_slopes != nullptr && row < rows_total
                            ? p.alibi_slopes[int64_t(b) * p.alibi_batch_stride + head]
                            : 0.0f;
    }

  const bool packed_q = p.is_varlen();
  const Element* k_rows = nullptr;
  const Element* v_rows = nullptr;
  if constexpr (!kPaged) {
    if (p.k != nullptr) {
      k_rows = static_cast<const Element*>(p.k) +
               attn::kv_row_offset(p, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start, head_kv);
      v_rows = static_cast<const Element*>(p.v) +
               attn::kv_row_offset(p, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, seq.k_start, head_kv);
    }
  }

  float acc_o[Traits::kMTiles][Traits::kOutNTiles][4];
  zero_accumulators(acc_o);
  OnlineSoftmax<Traits::kMTiles, Traits::kScoreNTiles, Traits::kOutNTiles> softmax;
  softmax.init();

  // A KV block is read by one CTA when the call has one row tile per KV head (every split reads its
  // own key range): its lines are evicted from L2 first. Several row tiles read each block once
  // each, close together in time, and keep the default policy so the later ones hit in L2.
  const uint64_t kv_l2_policy =
      int(gridDim.x) == splits.count ? ptx::l2_policy_evict_first() : ptx::l2_policy_evict_normal();
  if (n_lo <= n_hi) {
    // Q: the packed rows (token, head) of this tile; rows past the tile's end are zero.
    constexpr int kQChunks = Traits::kHeadDimQK / 8;
    for (int c = tid; c < kBlockM * kQChunks; c += Traits::kThreads) {
      const int r = c / kQChunks, col = (c % kQChunks) * 8;
      const int row = m0 + r;
      const bool valid = r < rows_valid && col < p.head_dim_qk;  // zeros past a padded call's head dim
      const Element* src = static_cast<const Element*>(p.q);
      if (valid) {
        src += attn::token_offset(packed_q, p.q_batch_stride, p.q_seq_stride, p.q_head_stride, b,
                                  seq.q_start + row / group, head_kv * group + row % group) + col;
      }
      ptx::cp_async_16(ptx::smem_address(sQ + smem_tile_offset<Traits::kSwizzledSmem, Traits::kQStride>(r, col)), src,
                       valid);
    }
    // Paged: the row offsets of block n sit in paged_rows[n & 1], stored one iteration before its
    // copy from the table entries fetched one iteration before that (`fetched`).
    __shared__ longlong2 paged_rows[2][kPaged ? Traits::kBlockN : 1];
    const attn::PageTable pages = attn::PageTable::of(p);
    PagedRowFetch fetched;
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (n_lo + s <= n_hi) {
        if constexpr (kPaged) {
          store_paged_row<Traits>(paged_rows[(n_lo + s) & 1], p, pages,
                                  fetch_paged_row<Traits>(pages, b, seq.k_start, seq.seqlen_k, n_lo + s), head_kv);
          __syncthreads();
        }
        load_kv_block<Traits, kPaged>(sK + s * Traits::kKStageElems, sV + s * Traits::kVStageElems, p, k_rows, v_rows,
                                      paged_rows[(n_lo + s) & 1], seq.seqlen_k, n_lo + s, kv_l2_policy);
      }
      ptx::cp_async_commit();  // one group per stage, empty or not, so the wait count below holds
    }
    if constexpr (kPaged) {
      const int first_ahead = n_lo + kStages - 1;
      if (first_ahead <= n_hi) {
        store_paged_row<Traits>(paged_rows[first_ahead & 1], p, pages,
                                fetch_paged_row<Traits>(pages, b, seq.k_start, seq.seqlen_k, first_ahead), head_kv);
      }
      if (first_ahead + 1 <= n_hi) fetched = fetch_paged_row<Traits>(pages, b, seq.k_start, seq.seqlen_k, first_ahead + 1);
    }

    const int min_diag = mask.min_diagonal();
    const int max_diag = mask.max_diagonal();
    QFragments<typename Traits::WarpGemm> q_frag;  // used when Traits::kQInRegisters
#pragma unroll 1
    for (int n_block = n_lo, stage = 0; n_block <= n_hi; ++n_block, stage = stage + 1 == kStages ? 0 : stage + 1) {
      ptx::cp_async_wait<kStages - 2>();
      __syncthreads();  // block n_block visible to all; every warp is done with the previous stage
      const int next = n_block + kStages - 1;
      const int next_stage = stage == 0 ? kStages - 1 : stage - 1;
      if (next <= n_hi) {
        load_kv_block<Traits, kPaged>(sK + next_stage * Traits::kKStageElems, sV + next_stage * Traits::kVStageElems,
                                      p, k_rows, v_rows, paged_rows[next & 1], seq.seqlen_k, next, kv_l2_policy);
        if constexpr (kPaged) {
          // Slot (next + 1) & 1 was last read in the previous iteration, before this one's barrier;
          // `fetched` holds block next + 1's entries, read an iteration ago.
          if (next + 1 <= n_hi) store_paged_row<Traits>(paged_rows[(next + 1) & 1], p, pages, fetched, head_kv);
          if (next + 2 <= n_hi) fetched = fetch_paged_row<Traits>(pages, b, seq.k_start, seq.seqlen_k, next + 2);
        }
      }
      ptx::cp_async_commit();

      const Element* sK_warp = sK + stage * Traits::kKStageElems + warp * Traits::kWarpKeys * Traits::kKStride;
      const Element* sV_warp = sV + stage * Traits::kVStageElems + warp * Traits::kWarpKeys * Traits::kVStride;
      float acc_s[Traits::kMTiles][Traits::kScoreNTiles][4];
      if constexpr (Traits::kQInRegisters) {
        if (n_block == n_lo) load_q_fragments<typename Traits::WarpGemm>(q_frag, sQ, 0, lane);  // Q is visible now
        gemm_qk_regs<typename Traits::WarpGemm>(acc_s, q_frag, sK_warp, lane);
      } else {
        gemm_qk<typename Traits::WarpGemm>(acc_s, sQ, sK_warp, 0, lane);
      }
      const int key0 = n_block * kBlockN + warp * Traits::kWarpKeys;
      if (mask.tile_fully_visible(token_first, token_last, key0, key0 + Traits::kWarpKeys - 1)) {
        decode_transform_and_mask<false>(acc_s, token, slope, key0, transform, scale_over_softcap, score_mod,
                                         min_diag, max_diag, seq.seqlen_k);
      } else {
        decode_transform_and_mask<true>(acc_s, token, slope, key0, transform, scale_over_softcap, score_mod,
                                        min_diag, max_diag, seq.seqlen_k);
      }
      softmax.update(acc_s, acc_o, log2_multiplier);
      // P split into two 16-bit parts (gemm_pv_f16): O gets P's rounding error squared. Rounded
      // once, P's error lets single outputs round to the far neighbour and exceed twice the
      // same-dtype reference's max error (the tests' bound).
      gemm_pv<typename Traits::WarpGemm, true>(acc_o, acc_s, sV_warp, lane);
    }
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // the ring is free: it becomes the merge area

  // Each warp's unnormalized O and (max, sum) per row -> shared memory.
  float* merge_o = reinterpret_cast<float*>(smem);  // [warp][row][kMergeStride]
  float2* merge_stats = reinterpret_cast<float2*>(merge_o + Traits::kWarps * kBlockM * Traits::kMergeStride);
  {
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt)
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = mt * 16 + g + 8 * half;
        const float sum = attn::quad_sum(softmax.row[mt][half].sum);
        if (t == 0) merge_stats[warp * kBlockM + row] = make_float2(softmax.row[mt][half].max_log2, sum);
        float* o_row = merge_o + (warp * kBlockM + row) * Traits::kMergeStride + 2 * t;
#pragma unroll
        for (int d = 0; d < Traits::kOutNTiles; ++d) {
          *reinterpret_cast<float2*>(o_row + 8 * d) = make_float2(acc_o[mt][d][2 * half], acc_o[mt][d][2 * half + 1]);
        }
      }
  }
  __syncthreads();

  // One thread per (row, 4 columns): merge the warps, normalize, write o (or this split's partial).
  constexpr int kColChunks = Traits::kHeadDimV / 4;
  for (int item = tid; item < kBlockM * kColChunks; item += Traits::kThreads) {
    const int r = item / kColChunks, col = (item % kColChunks) * 4;
    if (r >= rows_valid) continue;
    attn::SoftmaxState state;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < Traits::kWarps; ++w) {
      const float2 st = merge_stats[w * kBlockM + r];
      float own = 1.0f, other = 1.0f;
      state.merge(attn::SoftmaxState{st.x, st.y}, own, other);
      const float4 ow = *reinterpret_cast<const float4*>(merge_o + (w * kBlockM + r) * Traits::kMergeStride + col);
      o.x = o.x * own + ow.x * other;
      o.y = o.y * own + ow.y * other;
      o.z = o.z * own + ow.z * other;
      o.w = o.w * own + ow.w * other;
    }
    const float inv_sum = state.inv_sum();
    o.x *= inv_sum, o.y *= inv_sum, o.z *= inv_sum, o.w *= inv_sum;
    const int row = m0 + r;
    const int i = row / group, head = head_kv * group + row % group;
    if (splits.count == 1) {
      if (col >= p.head_dim_v) continue;  // a padded call's columns end first (whole 4-column chunks)
      Element* dst = static_cast<Element*>(p.o) +
                     attn::token_offset(packed_q, p.o_batch_stride, p.o_seq_stride, p.o_head_stride, b, seq.q_start + i,
                                        head) + col;
      uint2 packed;
      packed.x = ptx::pack2(o.x, o.y, Element{});
      packed.y = ptx::pack2(o.z, o.w, Element{});
      *reinterpret_cast<uint2*>(dst) = packed;
      if (p.lse != nullptr && col == 0) {
        p.lse[attn::token_offset(packed_q, p.lse_batch_stride, 1, p.lse_head_stride, b, seq.q_start + i, head)] =
            state.lse();
      }
    } else {
      const int64_t prow = splits.row(p, split, head, b, seq.q_start, i);
      *reinterpret_cast<float4*>(splits.o_partial + prow * Traits::kHeadDimV + col) = o;
      if (col == 0) splits.lse_partial[prow] = state.lse();
    }
  }
}

// Warps of a combine CTA (one CTA per row: token, query head, batch entry), and the splits per warp
// whose partials are loaded before the weights are formed.
inline constexpr int kCombineWarps = 4;
inline constexpr int kCombinePrefetch = 4;

// o = sum_s exp(lse_s - lse) o_s, lse = log sum_s exp(lse_s) over the splits of one row (splits
// that saw no key have lse_s = -inf and weight 0; a row no split saw gets o = 0, lse = -inf; a NaN
// stays NaN). Warp 0 forms the weights into shared memory; the warps take every
// kCombineWarps-th split, lanes covering the head dim in float4 chunks, so each thread has several
// independent partial loads in flight (a row's splits walked by one warp one after another left a
// B1 decode step waiting on ~30 dependent loads), and the warps' sums meet in shared memory. Each
// warp's first kCombinePrefetch splits are loaded before the weights exist, so their loads and the
// LSE reads are one round of memory latency rather than two.
template <typename Element, int kHeadDimV>
__global__ void __launch_bounds__(32 * kCombineWarps) decode_combine_kernel(const AttentionParams p,
                                                                           const DecodeSplits splits) {
  constexpr int kChunks = kHeadDimV / 4;            // float4 columns of a row
  constexpr int kLaneChunks = (kChunks + 31) / 32;  // of them per lane
  __shared__ float weight[kMaxSplits];
  __shared__ float row_lse;
  __shared__ float4 warp_sum[kCombineWarps][kChunks];
  const int i = blockIdx.x, head = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const attn::SequenceExtent seq = attn::sequence_extent(p, b);
  if (i >= seq.seqlen_q) return;  // the whole CTA: no barrier is skipped by part of it
  ptx::wait_for_previous_grid();  // a programmatic dependent of the split grid (launch_decode_traits)
  const int64_t row0 = splits.row(p, 0, head, b, seq.q_start, i);
  const int64_t split_step = int64_t(p.heads_q) * splits.token_rows;
  const auto partial_chunk = [&](int split, int chunk) {
    return *reinterpret_cast<const float4*>(splits.o_partial + (row0 + split * split_step) * kHeadDimV + 4 * chunk);
  };

  // Partials of this warp's first splits, loaded alongside the LSE reads below.
  float4 early[kCombinePrefetch][kLaneChunks];
#pragma unroll
  for (int j = 0; j < kCombinePrefetch; ++j)
#pragma unroll
    for (int c = 0; c < kLaneChunks; ++c) {
      const int split = warp + j * kCombineWarps, chunk = lane + 32 * c;
      early[j][c] = split < splits.count && chunk < kChunks ? partial_chunk(split, chunk) : make_float4(0.f, 0.f, 0.f, 0.f);
    }

  if (warp == 0) {
    float max_lse = -INFINITY;
    for (int s = lane; s < splits.count; s += 32) max_lse = fmaxf(max_lse, splits.lse_partial[row0 + s * split_step]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) max_lse = fmaxf(max_lse, __shfl_xor_sync(0xffffffffu, max_lse, off));
    // -inf: no split saw a key (the shift keeps exp finite: every weight is then 0).
    const float shift = max_lse == -INFINITY ? 0.0f : max_lse;
    float sum = 0.0f;
    for (int s = lane; s < splits.count; s += 32) sum += expf(splits.lse_partial[row0 + s * split_step] - shift);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
    const float lse = sum > 0.0f ? shift + logf(sum) : (sum == 0.0f ? -INFINITY : sum);  // NaN stays NaN
    for (int s = lane; s < splits.count; s += 32) {
      const float lse_s = splits.lse_partial[row0 + s * split_step];
      weight[s] = lse_s == -INFINITY ? 0.0f : expf(lse_s - lse);  // an empty split's partial O is 0
    }
    if (lane == 0) row_lse = lse;
  }
  __syncthreads();

#pragma unroll
  for (int c = 0; c < kLaneChunks; ++c) {
    const int chunk = lane + 32 * c;
    if (chunk >= kChunks) break;
    float4 o = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < kCombinePrefetch; ++j) {
      const int s = warp + j * kCombineWarps;
      if (s >= splits.count) break;
      const float w = weight[s];
      o.x = fmaf(w, early[j][c].x, o.x), o.y = fmaf(w, early[j][c].y, o.y);
      o.z = fmaf(w, early[j][c].z, o.z), o.w = fmaf(w, early[j][c].w, o.w);
    }
#pragma unroll 4
    for (int s = warp + kCombinePrefetch * kCombineWarps; s < splits.count; s += kCombineWarps) {
      const float w = weight[s];
      const float4 os = partial_chunk(s, chunk);
      o.x = fmaf(w, os.x, o.x), o.y = fmaf(w, os.y, o.y), o.z = fmaf(w, os.z, o.z), o.w = fmaf(w, os.w, o.w);
    }
    warp_sum[warp][chunk] = o;
  }
  __syncthreads();

  const bool packed_q = p.is_varlen();
  Element* o_row = static_cast<Element*>(p.o) +
                   attn::token_offset(packed_q, p.o_batch_stride, p.o_seq_stride, p.o_head_stride, b, seq.q_start + i, head);
  for (int chunk = threadIdx.x; chunk < kChunks && 4 * chunk < p.head_dim_v; chunk += 32 * kCombineWarps) {
    float4 o = warp_sum[0][chunk];
#pragma unroll
    for (int w = 1; w < kCombineWarps; ++w) {
      const float4 x = warp_sum[w][chunk];
      o.x += x.x, o.y += x.y, o.z += x.z, o.w += x.w;
    }
    uint2 packed;
    packed.x = ptx::pack2(o.x, o.y, Element{});
    packed.y = ptx::pack2(o.z, o.w, Element{});
    *reinterpret_cast<uint2*>(o_row + 4 * chunk) = packed;
  }
  if (p.lse != nullptr && threadIdx.x == 0) {
    p.lse[attn::token_offset(packed_q, p.lse_batch_stride, 1, p.lse_head_stride, b, seq.q_start + i, head)] = row_lse;
  }
}

// The split kernel of one instantiation, configured (its shared-memory size set) once per device,
// and the CTAs of it one SM holds: a decode step is a few microseconds of GPU time, so the per-call
// host work (attribute set, occupancy query) is done once and kept.
template <class Traits>
struct DecodeSplitKernel {
  static constexpr int kMaxDevices = 64;
  static Status get(int device, void (**kernel)(AttentionParams, DecodeSplits), int* ctas_per_sm) {
    static std::atomic<int> cached_ctas[kMaxDevices] = {};  // 0: not configured yet
    *kernel = &decode_split_kernel<Traits>;
    if (device >= 0 && device < kMaxDevices) {
      *ctas_per_sm = cached_ctas[device].load(std::memory_order_acquire);
      if (*ctas_per_sm > 0) return Status::Ok();
    }
    FC_CUDA_RETURN(cudaFuncSetAttribute(*kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));
    int ctas = 0;
    FC_CUDA_RETURN(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&ctas, *kernel, Traits::kThreads, Traits::kSmemBytes));
    *ctas_per_sm = ctas > 0 ? ctas : 1;
    if (device >= 0 && device < kMaxDevices) cached_ctas[device].store(*ctas_per_sm, std::memory_order_release);
    return Status::Ok();
  }
};

// Plans (plan.hpp) and runs one call: the split kernel, then the combine when it is split. The
// partials' workspace comes from the stream-ordered pool and is freed on the stream after the
// combine (graph capture allowed).
template <class Traits>
Status launch_decode_traits(const AttentionParams& p, int device, int sm_count, cudaStream_t stream) {
  using Element = typename Traits::Element;
  constexpr int kHeadDimV = Traits::kHeadDimV;
  void (*kernel)(AttentionParams, DecodeSplits) = nullptr;
  int ctas_per_sm = 0;
  FC_RETURN_IF_ERROR(DecodeSplitKernel<Traits>::get(device, &kernel, &ctas_per_sm));
  const DecodePlan plan = plan_decode(p, Traits::kBlockM, Traits::kBlockN, sm_count * ctas_per_sm, Traits::kHeadDimV);
  DecodeSplits splits;
  splits.count = plan.num_splits;
  splits.token_rows = plan.token_rows;
  void* workspace = nullptr;
  if (plan.num_splits > 1) {
    FC_CUDA_RETURN(cudaMallocAsync(&workspace, plan.workspace_bytes, stream));
    splits.o_partial = static_cast<float*>(workspace);
    splits.lse_partial = splits.o_partial + size_t(plan.num_splits) * p.heads_q * plan.token_rows * kHeadDimV;
  }
  const dim3 grid(unsigned(plan.row_tiles) * unsigned(plan.num_splits), p.heads_kv, p.batch);
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(p, splits);
  Status status = Status::Ok();
  if (const cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    status = Status::CudaError(std::string("decode_split_kernel launch: ") + cudaGetErrorString(e));
  }
  if (status.ok() && plan.num_splits > 1) {
    // A programmatic dependent of the split grid on sm_90 and later (common/dependent_launch.hpp).
    const cudaError_t e =
        launch_kernel(&decode_combine_kernel<Element, kHeadDimV>, dim3(p.seqlen_q, p.heads_q, p.batch),
                      dim3(32 * kCombineWarps), 0, stream, dependent_launch_supported(device), p, splits);
    if (e != cudaSuccess) status = Status::CudaError(std::string("decode_combine_kernel launch: ") + cudaGetErrorString(e));
  }
  if (workspace != nullptr) {
    const cudaError_t freed = cudaFreeAsync(workspace, stream);
    if (status.ok() && freed != cudaSuccess) status = Status::CudaError(std::string("cudaFreeAsync: ") + cudaGetErrorString(freed));
  }
  return status;
}

// The table's shape for the call's rows and cache kind, or its compact variant (the 99 KB parts;
// only entries that need more compile one).
template <int kHeadDimQK, int kHeadDimV, typename Element, bool kWideRows, DecodeKv kKv>
Status launch_decode_shape(const AttentionParams& p, int device, int sm_count, bool compact, cudaStream_t stream) {
  using Entry = DecodeTraits<kHeadDimQK, kHeadDimV, Element, kWideRows, kKv>;
  using Compact = DecodeTraits<kHeadDimQK, kHeadDimV, Element, kWideRows, kKv, true>;
  if constexpr (!(Compact::kShape == Entry::kShape)) {
    static_assert(Compact::kSmemBytes <= kCompactSmemBytes, "the compact shape fits the 99 KB parts");
    if (compact) return launch_decode_traits<Compact>(p, device, sm_count, stream);
  }
  return launch_decode_traits<Entry>(p, device, sm_count, stream);
}

// More than 16 packed rows per KV head take the 32-row tiles (tile_config.hpp, wide_rows); paged
// caches their own shapes. Large pages compile a kernel of their own only where their shape (the
// entry, or the compact one on the 99 KB parts: d96) differs from small pages'; elsewhere they run
// the small pages' kernel, which then has their shape.
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_decode(const AttentionParams& p, int device, int sm_count, bool compact, cudaStream_t stream) {
  const int64_t rows = int64_t(p.seqlen_q) * (p.heads_q / p.heads_kv);
  const bool wide = decode_wide_rows(rows);
  if (p.is_paged()) {
    if (!wide && decode_kv(true, p.page_size) == DecodeKv::kLargePages) {
      using Large = DecodeTraits<kHeadDimQK, kHeadDimV, Element, false, DecodeKv::kLargePages>;
      using LargeCompact = DecodeTraits<kHeadDimQK, kHeadDimV, Element, false, DecodeKv::kLargePages, true>;
      using Small = DecodeTraits<kHeadDimQK, kHeadDimV, Element, false, DecodeKv::kSmallPages>;
      using SmallCompact = DecodeTraits<kHeadDimQK, kHeadDimV, Element, false, DecodeKv::kSmallPages, true>;
      if constexpr (!(Large::kShape == Small::kShape)) {
        if (!compact) return launch_decode_traits<Large>(p, device, sm_count, stream);
      }
      if constexpr (!(LargeCompact::kShape == Large::kShape) && !(LargeCompact::kShape == SmallCompact::kShape)) {
        if (compact) return launch_decode_traits<LargeCompact>(p, device, sm_count, stream);
      }
    }
    return wide ? launch_decode_shape<kHeadDimQK, kHeadDimV, Element, true, DecodeKv::kSmallPages>(p, device, sm_count,
                                                                                                   compact, stream)
                : launch_decode_shape<kHeadDimQK, kHeadDimV, Element, false, DecodeKv::kSmallPages>(p, device, sm_count,
                                                                                                    compact, stream);
  }
  return wide ? launch_decode_shape<kHeadDimQK, kHeadDimV, Element, true, DecodeKv::kDense>(p, device, sm_count, compact,
                                                                                             stream)
              : launch_decode_shape<kHeadDimQK, kHeadDimV, Element, false, DecodeKv::kDense>(p, device, sm_count, compact,
                                                                                              stream);
}

}  // namespace flashcore::sm80

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM80_DECODE_INSTANTIATE(DQK, DV, ELEMENT)              \
  template flashcore::Status flashcore::sm80::launch_decode<DQK, DV, ELEMENT>( \
      const flashcore::AttentionParams&, int, int, bool, cudaStream_t);
