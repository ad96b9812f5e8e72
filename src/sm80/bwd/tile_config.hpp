// The sm80 backward's ONE tuning table and the compile-time facts derived from it.
//
// Work split (kernel.cuh): a CTA owns kBlockN = 16 * warps keys of one KV head and walks the query
// blocks (kBlockM rows, every query head of the group) that see them. Warp w owns keys
// [16 w, 16 w + 16) of the block: it computes S^T = K Q^T and dP^T = V dO^T for them (one m16 tile
// of keys x kBlockM queries), and keeps dK, dV of its 16 keys in registers for the whole walk, so
// P^T and dS^T go from the accumulators straight into the A operand of dV += P^T dO and
// dK += dS^T Q. Only dS^T passes through shared memory, for dQ = dS K, whose (kBlockM x Dqk) tile
// the warps split as kDqWarpsM x kDqWarpsN.
//
// Registers per thread: dK + dV = 16 (Dqk + Dv) / 32 fp32 accumulators for the whole walk; per step
// S^T, then P^T packed to 16 bits (kBlockM / 4), then dP^T (kBlockM / 4 fp32): at d128 with
// kBlockM = 64, 128 + 16 + 32 at the peak.
// Host code includes this header (no device code here) to check shared-memory needs in supports().
#pragma once

#include "backward/workspace.hpp"

namespace flashcore::sm80 {

struct BwdTileShape {
  int block_m = 0;  // query rows per step of the walk
  int warps = 0;    // kBlockN = 16 * warps keys per CTA
};

// Figures: H200, fp16, B4 H16 S4096 non-causal, TFLOPS, with SDPA's FlashAttention-2 backward in
// the same call (d64 248, d128 282). Eight warps, one CTA per SM: two CTAs of four warps (64 keys;
// the registers allow it and the shared memory just fits at d128) ran 8-12% slower.
constexpr BwdTileShape bwd_tile_shape(int head_dim_qk, int head_dim_v) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  // d <= 64: 128 query rows per step (200-211; 64 rows: 180). 255 registers with a 12-16 byte
  // spill at d64 (sm_90a), more for softcap / ALiBi.
  if (d <= 64) return {128, 8};
  // d96 / d128: 64 rows (d128 227-232; 248-250 registers, no spill on sm_90a). 128 rows fit the
  // registers at d128 but not the shared memory (243 KB with two Q / dO stages).
  return {64, 8};
}

// The shared workspace's row padding (backward/workspace.hpp), which query blocks must tile.
using backward::kBwdRowPad;

constexpr int bwd_row_pad(int elem_bytes) { return 16 / elem_bytes; }  // 16 B per padded row

// Bytes of dynamic shared memory: K, V (one tile), Q, dO (two stages), dS^T, log2 LSE and D (two
// stages).
constexpr int bwd_smem_bytes(int head_dim_qk, int head_dim_v, BwdTileShape t, int elem_bytes) {
  const int pad = bwd_row_pad(elem_bytes);
  const int block_n = 16 * t.warps;
  const int kv = block_n * (head_dim_qk + pad) + block_n * (head_dim_v + pad);
  const int q_do = 2 * t.block_m * (head_dim_qk + pad + head_dim_v + pad);
  const int ds = block_n * (t.block_m + pad);
  return elem_bytes * (kv + q_do + ds) + 2 * 2 * t.block_m * 4;
}
constexpr int bwd_smem_bytes(int head_dim_qk, int head_dim_v, int elem_bytes) {
  return bwd_smem_bytes(head_dim_qk, head_dim_v, bwd_tile_shape(head_dim_qk, head_dim_v), elem_bytes);
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
  static constexpr int kBlockN = 16 * kWarps;
  static constexpr int kQNTiles = kBlockM / 8;   // n8 tiles of S^T / dP^T (queries) per warp
  static constexpr int kDKNTiles = kHeadDimQK / 8;
  static constexpr int kDVNTiles = kHeadDimV / 8;
  // dQ = dS K: the (kBlockM x Dqk) tile as kDqWarpsM x kDqWarpsN warp tiles of 16 rows.
  static constexpr int kDqWarpsM = kBlockM / 16;
  static constexpr int kDqWarpsN = kWarps / kDqWarpsM;
  static constexpr int kDqCols = kHeadDimQK / kDqWarpsN;  // columns of dQ per warp
  static constexpr int kDqNTiles = kDqCols / 8;
  static constexpr int kPad = bwd_row_pad(kElemBytes);
  static constexpr int kKStride = kHeadDimQK + kPad;
  static constexpr int kVStride = kHeadDimV + kPad;
  static constexpr int kQStride = kHeadDimQK + kPad;
  static constexpr int kDOStride = kHeadDimV + kPad;
  static constexpr int kDSStride = kBlockM + kPad;
  // Element offsets inside dynamic shared memory; the fp32 LSE / D stages follow the 16-bit tiles.
  static constexpr int kKOffset = 0;
  static constexpr int kVOffset = kKOffset + kBlockN * kKStride;
  static constexpr int kQOffset = kVOffset + kBlockN * kVStride;  // stage s at + s * kQStageElems
  static constexpr int kQStageElems = kBlockM * kQStride;
  static constexpr int kDOOffset = kQOffset + 2 * kQStageElems;
  static constexpr int kDOStageElems = kBlockM * kDOStride;
  static constexpr int kDSOffset = kDOOffset + 2 * kDOStageElems;
  static constexpr int kElems16 = kDSOffset + kBlockN * kDSStride;
  static constexpr int kRowStatsOffsetBytes = kElems16 * kElemBytes;  // [stage][lse2 | D][kBlockM] floats
  static constexpr int kSmemBytes = kRowStatsOffsetBytes + 2 * 2 * kBlockM * 4;

  static_assert(kSmemBytes == bwd_smem_bytes(kHeadDimQK, kHeadDimV, kShape, kElemBytes),
                "layout and host-side size disagree");
  static_assert(kElemBytes == 2, "the sm80 backward takes fp16 / bf16 (fp32 runs on the naive path)");
  static_assert(kBlockM % 16 == 0 && kWarps % kDqWarpsM == 0, "dQ warp grid covers the tile");
  static_assert(kHeadDimQK % (8 * kDqWarpsN) == 0 && kDqNTiles % 2 == 0, "dQ columns are n16 pairs per warp");
  static_assert(kHeadDimQK % 16 == 0 && kHeadDimV % 16 == 0, "head dims are whole k16 / n16 steps");
  static_assert(kRowStatsOffsetBytes % 16 == 0, "row statistics are 16-byte aligned for cp.async");
  static_assert(kBwdRowPad % kBlockM == 0, "query blocks tile the padded workspace rows");
};

}  // namespace flashcore::sm80
