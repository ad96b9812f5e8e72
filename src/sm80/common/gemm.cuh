// What the sm80 kernels' mainloops are built from: asynchronous tile loads (cp.async, 16 B per
// thread, zero-filled tails) and the two warp-level GEMMs, S = Q K^T and O += P V, in two MMA policies chosen by the
// element type: 16-bit inputs on mma.sync m16n8k16 with ldmatrix; fp32 inputs on 3xTF32
// mma.sync m16n8k8 with plain shared-memory loads (gemm_qk_tf32x3 / gemm_pv_tf32x3 below).
//
// Warp w owns query rows [w * kRowsPerWarp, (w + 1) * kRowsPerWarp) of the CTA tile, as kMTiles
// m16 tiles. Fragment layouts (l = lane, g = l / 4, t = l % 4), from the PTX ISA:
//   A reg r: row g + 8 (r & 1), cols 2t + 8 (r >> 1) + {0, 1}
//   B reg r: k 2t + 8 r + {0, 1}, col g
//   C c_i:   row g + 8 (i >> 1), col 2t + (i & 1)
#pragma once

#include <cstdint>

#include "ptx/mma_sm80.hpp"
#include "sm80/common/smem_layout.hpp"

namespace flashcore::sm80 {

FC_HOST_DEVICE constexpr int gcd_int(int a, int b) { return b == 0 ? a : gcd_int(b, a % b); }

// Copies rows [0, kRows) of a [rows][kCols] global tile (row stride `row_stride` elements, 16-byte
// aligned rows) into shared memory with row stride kSmemStride (16-byte chunks: 8 16-bit elements
// or 4 floats). Rows >= rows_valid, and the columns >= cols_valid of a call padded to a wider kernel
// (api/built_kernels.hpp; cols_valid a multiple of the chunk), are zero-filled and never read.
// kThreadsPerRow consecutive threads cover consecutive 16-byte chunks of one row (>= 64 contiguous
// bytes per row and warp instruction); each thread walks its rows with one running pointer.
// The thread's place in the tile is recomputed from a fresh threadIdx.x read on every call: with a
// plain `tid` the compiler hoisted the per-copy row indices and shared addresses out of the KV loop
// (~20 registers live across it, the difference between spilling and not on the 192-accumulator
// tiles); recomputing them costs a few integer instructions per KV block.
// kSwizzled: the tile is in the swizzled layout (smem_layout.hpp; kSmemStride == kCols).
template <int kRows, int kCols, int kSmemStride, int kThreads, bool kSwizzled = false, typename Element>
FC_DEVICE void load_tile_async(Element* smem_tile, const Element* gmem_tile, int64_t row_stride,
                               int rows_valid, int cols_valid = kCols) {
  constexpr int kElemsPerChunk = 16 / int(sizeof(Element));
  constexpr int kChunksPerRow = kCols / kElemsPerChunk;
  constexpr int kThreadsPerRow = gcd_int(kChunksPerRow, kThreads);
  constexpr int kRowStep = kThreads / kThreadsPerRow;  // rows between two copies of one thread
  constexpr int kColIters = kChunksPerRow / kThreadsPerRow;
  static_assert(kRows % kRowStep == 0, "every thread copies the same number of rows");
  const int tid = ptx::thread_index_x_here();
  const int row0 = tid / kThreadsPerRow;
  const int col0 = (tid % kThreadsPerRow) * kElemsPerChunk;
  const int rows_left = rows_valid - row0;  // copy r is valid iff r * kRowStep < rows_left
  static_assert(!kSwizzled || (kSmemStride == kCols && kCols % 64 == 0 && kRowStep % 8 == 0 &&
                               (kColIters == 1 || kThreadsPerRow * kElemsPerChunk % 64 == 0)),
                "swizzled rows: a thread's rows share their swizzle phase and its column steps whole segments");
  const Element* src_row = gmem_tile + row0 * row_stride + col0;
  const uint32_t dst_row0 = ptx::smem_address(smem_tile + smem_tile_offset<kSwizzled, kSmemStride>(row0, col0));
#pragma unroll
  for (int r = 0; r < kRows / kRowStep; ++r) {
    const bool valid = r * kRowStep < rows_left;
#pragma unroll
    for (int c = 0; c < kColIters; ++c) {
      const uint32_t dst =
          dst_row0 + (r * kRowStep * kSmemStride + c * kThreadsPerRow * kElemsPerChunk) * sizeof(Element);
      const bool chunk_valid = valid && col0 + c * kThreadsPerRow * kElemsPerChunk < cols_valid;
      // An invalid chunk reads nothing; pass the tile base so the address is still a real one.
      ptx::cp_async_16(dst, chunk_valid ? src_row + c * kThreadsPerRow * kElemsPerChunk : gmem_tile, chunk_valid);
    }
    src_row += kRowStep * row_stride;
  }
}

// Zeroes a warp's accumulator tiles (S before Q K^T, O before the first KV block).
template <int kMTiles, int kNTiles>
FC_DEVICE void zero_accumulators(float (&acc)[kMTiles][kNTiles][4]) {
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;
}

// One A fragment times one ldmatrix.x4 B load that covers two n8 tiles (regs 0-1: the first,
// regs 2-3: the second): the two m16n8k16 MMAs every 16-bit GEMM below is made of.
template <typename Element>
FC_DEVICE void mma_n16(float (&acc_lo)[4], float (&acc_hi)[4], const uint32_t (&a)[4], const uint32_t (&b)[4]) {
  const uint32_t b_lo[2] = {b[0], b[1]};
  const uint32_t b_hi[2] = {b[2], b[3]};
  ptx::mma_m16n8k16(acc_lo, a, b_lo, Element{});
  ptx::mma_m16n8k16(acc_hi, a, b_hi, Element{});
}

// Q K^T's ldmatrix addresses of this lane (16-bit elements) in the CTA's tiles (smem_layout.hpp):
// A (Q, [m][k]): matrix j = rows 8 (j & 1), cols 8 (j >> 1)  -> lane row l % 16, col 8 (l / 16);
// B (K, [n][k]): matrix j = n-tile j >> 1, cols 8 (j & 1) -> lane row 8 (l / 16) + l % 8, col 8 ((l / 8) & 1).
template <class Traits>
FC_DEVICE uint32_t q_fragment_lane(const typename Traits::Element* sQ, int warp_row0, int lane) {
  return ptx::smem_address(
      sQ + smem_tile_offset<swizzled_smem<Traits>(), Traits::kQStride>(warp_row0 + (lane & 15), 8 * (lane >> 4)));
}
template <class Traits>
FC_DEVICE uint32_t k_fragment_lane(const typename Traits::Element* sK, int lane) {
  return ptx::smem_address(sK + smem_tile_offset<swizzled_smem<Traits>(), Traits::kKStride>(
                                    8 * (lane >> 4) + (lane & 7), 8 * ((lane >> 3) & 1)));
}
// Q's A fragments of k16 step ks, row tile mt.
template <class Traits>
FC_DEVICE void load_q_fragment(uint32_t (&a)[4], uint32_t q_lane, int ks, int mt) {
  static_assert(sizeof(typename Traits::Element) == 2, "16-bit elements");
  ptx::ldmatrix_x4(a, smem_step_address<swizzled_smem<Traits>(), Traits::kQStride>(q_lane, mt * 16, 2 * ks));
}
// acc_s += Q K^T over k16 step ks, with Q's A fragments of that step in `a`.
template <class Traits>
FC_DEVICE void qk_step(float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4],
                       const uint32_t (&a)[Traits::kMTiles][4], uint32_t k_lane, int ks) {
  using Element = typename Traits::Element;
#pragma unroll
  for (int np = 0; np < Traits::kScoreNTiles / 2; ++np) {
    uint32_t b[4];
    ptx::ldmatrix_x4(b, smem_step_address<swizzled_smem<Traits>(), Traits::kKStride>(k_lane, np * 16, 2 * ks));
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) mma_n16<Element>(acc_s[mt][2 * np], acc_s[mt][2 * np + 1], a[mt], b);
  }
}

// acc_s[mt][nt] += Q_warp[mt] K_block[nt]^T (gemm_qk zeroes acc_s first). sQ / sK are the CTA's
// padded tiles; `warp_row0` is the first query row of this warp inside the CTA tile.
template <class Traits>
FC_DEVICE void gemm_qk_f16(float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4],
                           const typename Traits::Element* sQ, const typename Traits::Element* sK,
                           int warp_row0, int lane) {
  const uint32_t q_lane = q_fragment_lane<Traits>(sQ, warp_row0, lane);
  const uint32_t k_lane = k_fragment_lane<Traits>(sK, lane);
#pragma unroll
  for (int ks = 0; ks < Traits::kHeadDimQK / 16; ++ks) {
    uint32_t a[Traits::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) load_q_fragment<Traits>(a[mt], q_lane, ks, mt);
    qk_step<Traits>(acc_s, a, k_lane, ks);
  }
}

// Q's A fragments of every k16 step, for a loop that multiplies one Q tile by many K blocks (the
// decode kernel): loaded once (load_q_fragments), then read from registers (gemm_qk_regs).
template <class Traits>
using QFragments = uint32_t[Traits::kHeadDimQK / 16][Traits::kMTiles][4];

template <class Traits>
FC_DEVICE void load_q_fragments(QFragments<Traits>& q, const typename Traits::Element* sQ, int warp_row0, int lane) {
  const uint32_t q_lane = q_fragment_lane<Traits>(sQ, warp_row0, lane);
#pragma unroll
  for (int ks = 0; ks < Traits::kHeadDimQK / 16; ++ks)
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) load_q_fragment<Traits>(q[ks][mt], q_lane, ks, mt);
}

// acc_s = Q K_block^T with Q from registers (16-bit elements; zeroes acc_s first, as gemm_qk).
template <class Traits>
FC_DEVICE void gemm_qk_regs(float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4], const QFragments<Traits>& q,
                            const typename Traits::Element* sK, int lane) {
  static_assert(!Traits::kTf32x3, "16-bit elements");
  const uint32_t k_lane = k_fragment_lane<Traits>(sK, lane);
  zero_accumulators(acc_s);
#pragma unroll
  for (int ks = 0; ks < Traits::kHeadDimQK / 16; ++ks) qk_step<Traits>(acc_s, q[ks], k_lane, ks);
}

// acc_o[mt] += P[mt] V_block, with P taken from the softmax'ed S accumulators of this warp: the C
// fragments of n-tiles 2kk and 2kk+1, rounded to 16 bits, are exactly the A fragment of k-step kk
// (P never leaves registers). Rounding just before each k-step keeps few packed registers live.
// kSplitP: P = hi + lo, both 16-bit (lo = P - hi rounded), and two MMAs per tile, so P carries
// ~2x the dtype's mantissa into O (the decode kernel: memory-bound, the second MMA costs it 1-2%).
template <class Traits, bool kSplitP = false>
FC_DEVICE void gemm_pv_f16(float (&acc_o)[Traits::kMTiles][Traits::kOutNTiles][4],
                           const float (&p)[Traits::kMTiles][Traits::kScoreNTiles][4],
                           const typename Traits::Element* sV, int lane) {
  using Element = typename Traits::Element;
  // B (V, [k][n], transposed by ldmatrix): matrix j = rows 8 (j & 1), cols 8 (j >> 1)
  //   -> lane row l % 16, col 8 (l / 16); regs 0-1 = n-tile 0, regs 2-3 = n-tile 1.
  constexpr bool kSwizzled = swizzled_smem<Traits>();
  const uint32_t v_lane =
      ptx::smem_address(sV + smem_tile_offset<kSwizzled, Traits::kVStride>(lane & 15, 8 * (lane >> 4)));

#pragma unroll
  for (int kk = 0; kk < Traits::kBlockN / 16; ++kk) {
    uint32_t a[Traits::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) {
      a[mt][0] = ptx::pack2(p[mt][2 * kk][0], p[mt][2 * kk][1], Element{});
      a[mt][1] = ptx::pack2(p[mt][2 * kk][2], p[mt][2 * kk][3], Element{});
      a[mt][2] = ptx::pack2(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1], Element{});
      a[mt][3] = ptx::pack2(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3], Element{});
    }
    uint32_t a_lo[kSplitP ? Traits::kMTiles : 1][4];
    if constexpr (kSplitP) {
#pragma unroll
      for (int mt = 0; mt < Traits::kMTiles; ++mt)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float* pair = &p[mt][2 * kk + (r >> 1)][2 * (r & 1)];
          const float2 hi = ptx::unpack2(a[mt][r], Element{});
          a_lo[mt][r] = ptx::pack2(pair[0] - hi.x, pair[1] - hi.y, Element{});
        }
    }
#pragma unroll
    for (int dp = 0; dp < Traits::kOutNTiles / 2; ++dp) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, smem_step_address<kSwizzled, Traits::kVStride>(v_lane, kk * 16, 2 * dp));
#pragma unroll
      for (int mt = 0; mt < Traits::kMTiles; ++mt) {
        mma_n16<Element>(acc_o[mt][2 * dp], acc_o[mt][2 * dp + 1], a[mt], b);
        if constexpr (kSplitP) mma_n16<Element>(acc_o[mt][2 * dp], acc_o[mt][2 * dp + 1], a_lo[mt], b);
      }
    }
  }
}

// ---- fp32 inputs: 3xTF32 on mma.sync m16n8k8 -------------------------------------------------
// Each fp32 operand x is split into two tf32 values, x = hi + lo with hi = tf32(x) and
// lo = tf32(x - hi) (|x - hi - lo| <= 2^-22 |x|), and a * b ~ a_hi b_hi + a_hi b_lo + a_lo b_hi
// (the dropped a_lo b_lo is <= 2^-22 |a b|): three MMAs per tile and k8 step (mma_tf32x3).
//
// No ldmatrix for 32-bit elements: since the order of the k terms inside one k8 step is free, the
// tf32 fragment's k slot t holds element 2t and slot t + 4 element 2t + 1 of the step, in A and B
// alike. Then a thread's A values of one row, (g, 2t) and (g, 2t + 1), are one float2 load, and so
// are its B values of K (row g of K, cols 2t, 2t + 1); and an S accumulator tile in C layout
// (row g: cols 2t, 2t + 1; row g + 8: the same) is already the A fragment of the P V step over its
// 8 keys, {c0, c2, c1, c3}, with V's B fragment read as V[key 2t][col g], V[key 2t + 1][col g].
// Bank conflicts: see smem_row_pad_* in sm80/fwd/tile_config.hpp.

struct Tf32Split {
  uint32_t hi, lo;
};
FC_DEVICE Tf32Split split_tf32(float x) {
  const uint32_t hi = ptx::cvt_tf32(x);
  return {hi, ptx::cvt_tf32(x - __uint_as_float(hi))};
}

FC_DEVICE void split_a_fragment(const float (&a)[4], uint32_t (&hi)[4], uint32_t (&lo)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const Tf32Split sp = split_tf32(a[r]);
    hi[r] = sp.hi;
    lo[r] = sp.lo;
  }
}

// acc += a * b (one k8 step) with both operands split. The three products are summed by the tensor
// core into a fresh partial (small terms first), which is then added to acc with an fp32 FADD
// (round to nearest). Chaining acc through the MMAs instead would round every step toward zero
// (the tensor core's fp32 accumulation truncates): in a host emulation of that arithmetic the
// biased error grew with the chain length, to 2e-5 relative at S = 4k, d64, inputs x10 (12x the
// fp32 SIMT loop), while the fresh-partial form stays at the SIMT loop's level (docs/design/sm80.md).
FC_DEVICE void mma_tf32x3(float (&acc)[4], const uint32_t (&a_hi)[4], const uint32_t (&a_lo)[4],
                          const uint32_t (&b_hi)[2], const uint32_t (&b_lo)[2]) {
  float partial[4];
  ptx::mma_m16n8k8_tf32_zero_c(partial, a_lo, b_hi);
  ptx::mma_m16n8k8_tf32(partial, a_hi, b_lo);
  ptx::mma_m16n8k8_tf32(partial, a_hi, b_hi);
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] += partial[i];
}

template <class Traits>
FC_DEVICE void gemm_qk_tf32x3(float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4], const float* sQ,
                              const float* sK, int warp_row0, int lane) {
  const int g = lane >> 2, t = lane & 3;
  const float* q_lane = sQ + (warp_row0 + g) * Traits::kQStride + 2 * t;  // A: rows g, g + 8
  const float* k_lane = sK + g * Traits::kKStride + 2 * t;                 // B: key g of each n-tile

#pragma unroll
  for (int ks = 0; ks < Traits::kHeadDimQK / 8; ++ks) {
    uint32_t a_hi[Traits::kMTiles][4], a_lo[Traits::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) {
      const float2 top = *reinterpret_cast<const float2*>(q_lane + mt * 16 * Traits::kQStride + ks * 8);
      const float2 bottom = *reinterpret_cast<const float2*>(q_lane + (mt * 16 + 8) * Traits::kQStride + ks * 8);
      // slots (g, t) (g + 8, t) (g, t + 4) (g + 8, t + 4)
      split_a_fragment({top.x, bottom.x, top.y, bottom.y}, a_hi[mt], a_lo[mt]);
    }
#pragma unroll
    for (int nt = 0; nt < Traits::kScoreNTiles; ++nt) {
      const float2 kv = *reinterpret_cast<const float2*>(k_lane + nt * 8 * Traits::kKStride + ks * 8);
      const Tf32Split b0 = split_tf32(kv.x), b1 = split_tf32(kv.y);
      const uint32_t b_hi[2] = {b0.hi, b1.hi}, b_lo[2] = {b0.lo, b1.lo};
#pragma unroll
      for (int mt = 0; mt < Traits::kMTiles; ++mt) mma_tf32x3(acc_s[mt][nt], a_hi[mt], a_lo[mt], b_hi, b_lo);
    }
  }
}

// acc_o[mt] += P[mt] V_block: k8 step kk of P V is S n-tile kk (see above), used in fp32 directly.
template <class Traits>
FC_DEVICE void gemm_pv_tf32x3(float (&acc_o)[Traits::kMTiles][Traits::kOutNTiles][4],
                              const float (&p)[Traits::kMTiles][Traits::kScoreNTiles][4], const float* sV,
                              int lane) {
  const int g = lane >> 2, t = lane & 3;
  const float* v_lane = sV + 2 * t * Traits::kVStride + g;  // B: keys 2t, 2t + 1 at column g

#pragma unroll
  for (int kk = 0; kk < Traits::kScoreNTiles; ++kk) {
    uint32_t a_hi[Traits::kMTiles][4], a_lo[Traits::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < Traits::kMTiles; ++mt) {
      split_a_fragment({p[mt][kk][0], p[mt][kk][2], p[mt][kk][1], p[mt][kk][3]}, a_hi[mt], a_lo[mt]);
    }
#pragma unroll
    for (int dt = 0; dt < Traits::kOutNTiles; ++dt) {
      const float* v = v_lane + kk * 8 * Traits::kVStride + dt * 8;
      const Tf32Split b0 = split_tf32(v[0]), b1 = split_tf32(v[Traits::kVStride]);
      const uint32_t b_hi[2] = {b0.hi, b1.hi}, b_lo[2] = {b0.lo, b1.lo};
#pragma unroll
      for (int mt = 0; mt < Traits::kMTiles; ++mt) mma_tf32x3(acc_o[mt][dt], a_hi[mt], a_lo[mt], b_hi, b_lo);
    }
  }
}

// The MMA policy of the instantiation: 16-bit elements or fp32 (3xTF32). acc_s = Q K^T.
template <class Traits>
FC_DEVICE void gemm_qk(float (&acc_s)[Traits::kMTiles][Traits::kScoreNTiles][4],
                       const typename Traits::Element* sQ, const typename Traits::Element* sK,
                       int warp_row0, int lane) {
  zero_accumulators(acc_s);
  if constexpr (Traits::kTf32x3) {
    gemm_qk_tf32x3<Traits>(acc_s, sQ, sK, warp_row0, lane);
  } else {
    gemm_qk_f16<Traits>(acc_s, sQ, sK, warp_row0, lane);
  }
}

template <class Traits, bool kSplitP = false>
FC_DEVICE void gemm_pv(float (&acc_o)[Traits::kMTiles][Traits::kOutNTiles][4],
                       const float (&p)[Traits::kMTiles][Traits::kScoreNTiles][4],
                       const typename Traits::Element* sV, int lane) {
  if constexpr (Traits::kTf32x3) {
    gemm_pv_tf32x3<Traits>(acc_o, p, sV, lane);
  } else {
    gemm_pv_f16<Traits, kSplitP>(acc_o, p, sV, lane);
  }
}

// ---- One m16 row tile per warp, 16-bit operands (the backward's GEMMs) ---------------------------
// Three operand shapes, named by where A and B come from; each shared tile is described by its row
// stride and layout (smem_layout.hpp: padded, or swizzled with whole 64-column segments, so a tile
// pointer may be offset by whole rows of 8 and whole segments of 64 columns):
//   warp_gemm_nt: A row-major [m][k] (16 rows at a_rows), B stored [n][k]      -> acc += A B^T
//   warp_gemm_rs: A from registers (packed 16-bit A fragments, see pack_a_fragments), B stored
//                 [k][n]                                                       -> acc += P B
//   warp_gemm_tn: A stored transposed, [k][m] (16 columns at a_cols), B stored [k][n] -> acc += A B
// acc[nt] is the C fragment of n-tile nt (8 columns). B tiles start at their first row and column.
// Every lane address below is that of chunk 0 or 1 of a row, and every step moves whole rows of 8
// and even chunks: what smem_step_address takes.

template <int kK, int kNTiles, int kAStride, bool kASwizzled, int kBStride, bool kBSwizzled, typename Element>
FC_DEVICE void warp_gemm_nt(float (&acc)[kNTiles][4], const Element* a_rows, const Element* b_rows, int lane) {
  static_assert(kK % 16 == 0 && kNTiles % 2 == 0, "whole k16 steps and n16 pairs");
  const uint32_t a_lane =
      ptx::smem_address(a_rows + smem_tile_offset<kASwizzled, kAStride>(lane & 15, 8 * (lane >> 4)));
  const uint32_t b_lane = ptx::smem_address(
      b_rows + smem_tile_offset<kBSwizzled, kBStride>(8 * (lane >> 4) + (lane & 7), 8 * ((lane >> 3) & 1)));
#pragma unroll
  for (int ks = 0; ks < kK / 16; ++ks) {
    uint32_t a[4];
    ptx::ldmatrix_x4(a, smem_step_address<kASwizzled, kAStride>(a_lane, 0, 2 * ks));
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, smem_step_address<kBSwizzled, kBStride>(b_lane, np * 16, 2 * ks));
      mma_n16<Element>(acc[2 * np], acc[2 * np + 1], a, b);
    }
  }
}

// The A fragments of k16 step kk of a 16 x 8 kPTiles C-fragment tile: n-tiles 2kk and 2kk + 1,
// rounded to Element in pairs (the A layout is the C layout of two adjacent n-tiles).
template <int kPTiles, typename Element>
FC_DEVICE void pack_a_fragments(uint32_t (&a)[kPTiles / 2][4], const float (&c)[kPTiles][4], Element) {
#pragma unroll
  for (int kk = 0; kk < kPTiles / 2; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float(&tile)[4] = c[2 * kk + (r >> 1)];
      a[kk][r] = ptx::pack2(tile[2 * (r & 1)], tile[2 * (r & 1) + 1], Element{});
    }
}

// pack_a_fragments' A fragments (16 rows x 16 kKSteps columns) to a padded row-major shared tile
// whose row 0, column 0 is `tile`, and back (ldmatrix, warp_gemm_nt's A addressing): A operands that
// one warp computes and others multiply.
template <int kStride, int kKSteps, typename Element>
FC_DEVICE void store_a_fragments(const uint32_t (&a)[kKSteps][4], Element* tile, int g, int t) {
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      *reinterpret_cast<uint32_t*>(tile + (g + 8 * (r & 1)) * kStride + kk * 16 + 8 * (r >> 1) + 2 * t) = a[kk][r];
}

template <int kStride, int kKSteps, typename Element>
FC_DEVICE void load_a_fragments(uint32_t (&a)[kKSteps][4], const Element* tile, int lane) {
  const uint32_t a_lane = ptx::smem_address(tile + (lane & 15) * kStride + 8 * (lane >> 4));
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) ptx::ldmatrix_x4(a[kk], a_lane + kk * 16 * uint32_t(sizeof(Element)));
}

template <int kKSteps, int kNTiles, int kBStride, bool kBSwizzled, typename Element>
FC_DEVICE void warp_gemm_rs(float (&acc)[kNTiles][4], const uint32_t (&a)[kKSteps][4], const Element* b, int lane) {
  static_assert(kNTiles % 2 == 0, "n16 pairs");
  const uint32_t b_lane = ptx::smem_address(b + smem_tile_offset<kBSwizzled, kBStride>(lane & 15, 8 * (lane >> 4)));
#pragma unroll
  for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, smem_step_address<kBSwizzled, kBStride>(b_lane, kk * 16, 2 * np));
      mma_n16<Element>(acc[2 * np], acc[2 * np + 1], a[kk], b);
    }
  }
}

// A (a_cols) is a padded tile.
template <int kK, int kNTiles, int kAStride, int kBStride, bool kBSwizzled, typename Element>
FC_DEVICE void warp_gemm_tn(float (&acc)[kNTiles][4], const Element* a_cols, const Element* b, int lane) {
  static_assert(kK % 16 == 0 && kNTiles % 2 == 0, "whole k16 steps and n16 pairs");
  // A via ldmatrix.trans: matrix j covers k 8 (j >> 1), m 8 (j & 1) -> lane row (k) l % 8 + 8 (l / 16),
  // column (m) 8 ((l / 8) & 1); transposed, each lane gets A's (row g, k 2t, 2t + 1).
  const uint32_t a_lane = ptx::smem_address(a_cols + ((lane & 7) + 8 * (lane >> 4)) * kAStride + 8 * ((lane >> 3) & 1));
  const uint32_t b_lane = ptx::smem_address(b + smem_tile_offset<kBSwizzled, kBStride>(lane & 15, 8 * (lane >> 4)));
  constexpr uint32_t kBytes = sizeof(Element);
#pragma unroll
  for (int kk = 0; kk < kK / 16; ++kk) {
    uint32_t a[4];
    ptx::ldmatrix_x4_trans(a, a_lane + kk * 16 * kAStride * kBytes);
#pragma unroll
    for (int np = 0; np < kNTiles / 2; ++np) {
      uint32_t bf[4];
      ptx::ldmatrix_x4_trans(bf, smem_step_address<kBSwizzled, kBStride>(b_lane, kk * 16, 2 * np));
      mma_n16<Element>(acc[2 * np], acc[2 * np + 1], a, bf);
    }
  }
}

template <int kNTiles>
FC_DEVICE void zero_accumulators(float (&acc)[kNTiles][4]) {
#pragma unroll
  for (int nt = 0; nt < kNTiles; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;
}

}  // namespace flashcore::sm80
