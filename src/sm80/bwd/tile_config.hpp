// The sm80 backward's ONE tuning table and the compile-time facts derived from it.
//
// Work split (kernel.cuh): a CTA owns kBlockN keys of one KV head and walks the query blocks
// (kBlockM rows, every query head of the group) that see them. Its warps form kColSplit groups of
// kKeyWarps; warp w owns keys [16 (w % kKeyWarps), + 16) of the block and, of dK and dV, the
// column part w / kKeyWarps (Dqk / kColSplit, Dv / kColSplit columns), which it keeps in registers
// for the whole walk. kBlockN = 16 kKeyWarps.
//   kColSplit 1 (head dims <= 128): a warp computes S^T = K Q^T and dP^T = V dO^T for its 16 keys x
//     kBlockM queries, and P^T and dS^T go from the accumulators straight into the A operand of
//     dV += P^T dO and dK += dS^T Q. Only dS^T passes through shared memory, for dQ = dS K.
//   kColSplit 2 (head dims 129..256, whose whole dK and dV rows would take 16 (Dqk + Dv) / 32 > 160
//     registers): the two warps of a key group split the step's queries for S^T and dP^T, write
//     P^T and dS^T to shared memory, and after a barrier each reads the full 16 x kBlockM tiles
//     back as A fragments for its column part of dV and dK (no GEMM is computed twice).
// dQ = dS K: the (kBlockM x Dqk) tile is split among all warps as kDqWarpsM x kDqWarpsN.
//
// Registers per thread: dK + dV = 16 (Dqk + Dv) / (32 kColSplit) fp32 accumulators for the whole
// walk; per step S^T, then P^T packed to 16 bits, then dP^T (kBlockM / (4 kColSplit) fp32 each):
// at d128 with kBlockM = 64, 128 + 16 + 32 at the peak; d256 128 + 64 (dQ's share).
// Host code includes this header (no device code here) to check shared-memory needs in supports().
#pragma once

#include <type_traits>

#include "backward/workspace.hpp"
#include "sm80/common/smem_budget.hpp"

struct __half;  // cuda_fp16.h's, named only (this header stays free of CUDA headers)

namespace flashcore::sm80 {

struct BwdTileShape {
  int block_m = 0;    // query rows per step of the walk
  int warps = 0;      // kBlockN = 16 * warps / col_split keys per CTA
  int col_split = 1;  // column parts of dK, dV (warps per key group)
};

constexpr bool operator==(BwdTileShape a, BwdTileShape b) {
  return a.block_m == b.block_m && a.warps == b.warps && a.col_split == b.col_split;
}

// Figures: H200, fp16, B4 H16 S4096 non-causal, TFLOPS, with SDPA's FlashAttention-2 backward in
// the same call (d64 248, d128 282). Eight warps, one CTA per SM: two CTAs of four warps (64 keys;
// the registers allow it and the shared memory just fits at d128) ran 8-12% slower.
constexpr BwdTileShape bwd_tile_shape(int head_dim_qk, int head_dim_v) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  // d <= 64: 128 query rows per step (200-211; 64 rows: 180). 255 registers with a 0-20 byte
  // spill at d64 (CUDA 13.0, sm_90a; 32 B on sm_80), 152 B for softcap / ALiBi.
  if (d <= 64) return {128, 8};
  // d96 / d128: 64 rows (d128 227-232; 255 registers, 0-20 B spill on sm_90a, 60 B for softcap /
  // ALiBi). 128 rows fit the registers at d128 but not the shared memory (243 KB with two Q / dO
  // stages).
  if (d <= 128) return {64, 8};
  // d192 / d256: 64 keys per CTA, dK and dV split in column halves (128 + 64 registers at d256).
  // Shared memory with two Q / dO stages: 169 KB at d192, 217 KB at d256 (so not on an A100).
  return {64, 8, 2};
}

// The shared workspace's row padding (backward/workspace.hpp), which query blocks must tile.
using backward::kBwdRowPad;

constexpr int bwd_row_pad(int elem_bytes) { return 16 / elem_bytes; }  // 16 B per padded row

// The head dims and dtypes whose Q, dO, K and V take the swizzled layout (rows on whole 128-byte
// lines, so the cp.async copies move only the bytes they read; sm80/common/smem_layout.hpp) rather
// than padded rows, where the warps' column parts allow it (BwdTraits::kSwizzledSmem). H200,
// flashcore-bench, same call, 2-3 runs, TFLOPS padded -> swizzled: d64 fp16 B4 H32 S4k 233.2 ->
// 238.0, B1 S16k 241.0 -> 245.9, causal S4k 213.9 -> 216.8, bf16 causal B8 S2k 188.1 -> 191.8, B16
// S1k 203.0 -> 206.1; d128 bf16 B4 H16 S4k 250.2 -> 256.3, B1 S16k 260.3 -> 266.9, causal S4k 225.7
// -> 231.0; but d128 fp16 B4 S4k 257.4 -> 255.5, B1 S16k 267.9 -> 265.7, causal S4k 230.4 -> 228.9,
// B16 S1k 225.3 -> 224.2. So: d64, and d128 in bf16; d256 (unmeasured) keeps padded rows.
constexpr bool bwd_swizzle_measured_faster(int head_dim_qk, int head_dim_v, bool fp16) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  return d <= 128;  // A/B: d128 fp16 swizzled too (its padded Q / dO copies are 66 M of 73 M excess L2 sectors)
}

// Bytes of dynamic shared memory: K, V (one tile), Q, dO (two stages), dS^T (and P^T when the
// columns are split), log2 LSE and D (two stages); `swizzled`: Q, dO, K, V without row padding.
// Host code takes the padded figure, which bounds both layouts.
constexpr int bwd_smem_bytes(int head_dim_qk, int head_dim_v, BwdTileShape t, int elem_bytes, bool swizzled = false) {
  const int pad = bwd_row_pad(elem_bytes);
  const int operand_pad = swizzled ? 0 : pad;
  const int block_n = 16 * t.warps / t.col_split;
  const int kv = block_n * (head_dim_qk + operand_pad) + block_n * (head_dim_v + operand_pad);
  const int q_do = 2 * t.block_m * (head_dim_qk + operand_pad + head_dim_v + operand_pad);
  const int ds = (t.col_split > 1 ? 2 : 1) * block_n * (t.block_m + pad);
  return elem_bytes * (kv + q_do + ds) + 2 * 2 * t.block_m * 4;
}
constexpr int bwd_smem_bytes(int head_dim_qk, int head_dim_v, int elem_bytes) {
  return bwd_smem_bytes(head_dim_qk, head_dim_v, bwd_tile_shape(head_dim_qk, head_dim_v), elem_bytes);
}

// The entries for parts with 99 KB per block (common/smem_budget.hpp); the table's own where it
// fits them. Untimed on those parts (the device tool lends H100 / H200 only); correct on them by the
// tests that cap the limit. d192 / d256 have none: their 64 keys of K and V and one Q / dO stage
// already take 101 KB / 135 KB, so those calls run on the naive backward there.
constexpr BwdTileShape compact_bwd_tile_shape(int head_dim_qk, int head_dim_v) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  if (d <= 32) return bwd_tile_shape(head_dim_qk, head_dim_v);  // 96 KB
  if (d <= 64) return {64, 8};                                   // 91 KB
  // d96: 64 keys; 32 query rows would leave dQ's warp tile 24 columns wide (odd n8 tiles).
  if (d <= 96) return {64, 4};   // 88 KB
  if (d <= 128) return {32, 4};  // 74 KB
  return bwd_tile_shape(head_dim_qk, head_dim_v);
}

// Whether a launch takes the compact tile on a device allowing `smem_limit` bytes per block, and
// the tile it takes.
constexpr bool uses_compact_bwd_tile(int head_dim_qk, int head_dim_v, int elem_bytes, long long smem_limit) {
  return bwd_smem_bytes(head_dim_qk, head_dim_v, elem_bytes) > smem_limit;
}
constexpr BwdTileShape bwd_tile_shape_for(int head_dim_qk, int head_dim_v, int elem_bytes, long long smem_limit) {
  return uses_compact_bwd_tile(head_dim_qk, head_dim_v, elem_bytes, smem_limit)
             ? compact_bwd_tile_shape(head_dim_qk, head_dim_v)
             : bwd_tile_shape(head_dim_qk, head_dim_v);
}

template <int kHeadDimQK_, int kHeadDimV_, typename Element_,
          BwdTileShape kShape_ = bwd_tile_shape(kHeadDimQK_, kHeadDimV_)>
struct BwdTraits {
  using Element = Element_;  // __half or __nv_bfloat16
  static constexpr int kElemBytes = int(sizeof(Element));
  static constexpr int kHeadDimQK = kHeadDimQK_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr BwdTileShape kShape = kShape_;
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kWarps = kShape.warps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kColSplit = kShape.col_split;
  static constexpr int kKeyWarps = kWarps / kColSplit;  // warps per column part: 16 keys each
  static constexpr int kBlockN = 16 * kKeyWarps;
  static constexpr int kQNTiles = kBlockM / 8;               // n8 tiles (queries) of a step
  static constexpr int kStepQueries = kBlockM / kColSplit;   // queries of a warp's S^T / dP^T
  static constexpr int kSNTiles = kStepQueries / 8;          // their n8 tiles
  static constexpr int kDKCols = kHeadDimQK / kColSplit;     // dK columns per warp
  static constexpr int kDVCols = kHeadDimV / kColSplit;
  static constexpr int kDKNTiles = kDKCols / 8;
  static constexpr int kDVNTiles = kDVCols / 8;
  // dQ = dS K: the (kBlockM x Dqk) tile as kDqWarpsM x kDqWarpsN warp tiles of 16 rows.
  static constexpr int kDqWarpsM = kBlockM / 16;
  static constexpr int kDqWarpsN = kWarps / kDqWarpsM;
  static constexpr int kDqCols = kHeadDimQK / kDqWarpsN;  // columns of dQ per warp
  static constexpr int kDqNTiles = kDqCols / 8;
  static constexpr int kPad = bwd_row_pad(kElemBytes);
  // Q, dO, K, V in the swizzled layout (sm80/common/smem_layout.hpp) where it measured faster and
  // every column part a warp addresses (dQ's, dK's, dV's) starts on a 64-column segment, so a tile
  // pointer moves by whole segments (sm80/common/gemm.cuh, the backward's GEMMs); else padded rows.
  // P^T and dS^T are always padded.
  static constexpr bool kSwizzledSmem = bwd_swizzle_measured_faster(kHeadDimQK, kHeadDimV,
                                                                    std::is_same_v<Element, __half>) &&
                                        kHeadDimQK % 64 == 0 && kHeadDimV % 64 == 0 && kDqCols % 64 == 0 &&
                                        kDKCols % 64 == 0 && kDVCols % 64 == 0;
  static constexpr int kOperandPad = kSwizzledSmem ? 0 : kPad;
  static constexpr int kKStride = kHeadDimQK + kOperandPad;
  static constexpr int kVStride = kHeadDimV + kOperandPad;
  static constexpr int kQStride = kHeadDimQK + kOperandPad;
  static constexpr int kDOStride = kHeadDimV + kOperandPad;
  static constexpr int kDSStride = kBlockM + kPad;
  // Element offsets inside dynamic shared memory; the fp32 LSE / D stages follow the 16-bit tiles.
  static constexpr int kKOffset = 0;
  static constexpr int kVOffset = kKOffset + kBlockN * kKStride;
  static constexpr int kQOffset = kVOffset + kBlockN * kVStride;  // stage s at + s * kQStageElems
  static constexpr int kQStageElems = kBlockM * kQStride;
  static constexpr int kDOOffset = kQOffset + 2 * kQStageElems;
  static constexpr int kDOStageElems = kBlockM * kDOStride;
  static constexpr int kDSOffset = kDOOffset + 2 * kDOStageElems;
  static constexpr int kPOffset = kDSOffset + kBlockN * kDSStride;  // P^T, kColSplit > 1 only
  static constexpr int kElems16 = kPOffset + (kColSplit > 1 ? kBlockN * kDSStride : 0);
  static constexpr int kRowStatsOffsetBytes = kElems16 * kElemBytes;  // [stage][lse2 | D][kBlockM] floats
  static constexpr int kSmemBytes = kRowStatsOffsetBytes + 2 * 2 * kBlockM * 4;

  static_assert(kSmemBytes == bwd_smem_bytes(kHeadDimQK, kHeadDimV, kShape, kElemBytes, kSwizzledSmem) &&
                    kSmemBytes <= bwd_smem_bytes(kHeadDimQK, kHeadDimV, kShape, kElemBytes),
                "layout and host-side size disagree");
  static_assert(kElemBytes == 2, "the sm80 backward takes fp16 / bf16 (fp32 runs on the naive path)");
  static_assert(kBlockM % 16 == 0 && kWarps % kDqWarpsM == 0, "dQ warp grid covers the tile");
  static_assert(kHeadDimQK % (8 * kDqWarpsN) == 0 && kDqNTiles % 2 == 0, "dQ columns are n16 pairs per warp");
  static_assert(kHeadDimQK % 16 == 0 && kHeadDimV % 16 == 0, "head dims are whole k16 / n16 steps");
  static_assert(kColSplit == 1 || kColSplit == 2, "dK, dV whole or in column halves");
  static_assert(kWarps % kColSplit == 0 && kSNTiles % 2 == 0, "a warp's queries are whole k16 steps");
  static_assert(kDKNTiles % 2 == 0 && kDVNTiles % 2 == 0, "dK, dV column parts are n16 pairs");
  static_assert(kRowStatsOffsetBytes % 16 == 0, "row statistics are 16-byte aligned for cp.async");
  static_assert(!kSwizzledSmem || (kVOffset * kElemBytes % 128 == 0 && kQOffset * kElemBytes % 128 == 0 &&
                                   kDOOffset * kElemBytes % 128 == 0 && kQStageElems * kElemBytes % 128 == 0 &&
                                   kDOStageElems * kElemBytes % 128 == 0),
                "swizzled tiles start on 128-byte lines");
  static_assert(kBlockM <= kBwdRowPad && kBlockM % backward::kRowAlign == 0,
                "a query block stays inside the workspace rows of its sequence (backward::padded_rows)");
};

}  // namespace flashcore::sm80
