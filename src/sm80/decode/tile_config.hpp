// The decode path's tuning table and the compile-time facts derived from it.
//
// Decode is memory-bound: each (batch entry, KV head) reads its whole K/V cache for a handful of
// query rows. So a CTA packs every query row that shares one KV head (seqlen_q x heads_q / heads_kv
// rows, token-major: row r = token r / group, query head kv_head * group + r % group) into one tile
// of kBlockM rows, streams K/V blocks of kBlockN keys through a kStages-deep cp.async ring, and
// splits each block's keys across the warps (warp w owns keys [16 w, 16 w + 16) of every block, with
// its own online softmax and O accumulators); the warps' states are merged once at the end. Long
// caches are cut into num_splits key ranges (one CTA each) merged by the combine kernel.
//   Host code includes this header (no device code here) for shared-memory sizes in supports().
#pragma once

#include "sm80/fwd/tile_config.hpp"

namespace flashcore::sm80 {

struct DecodeShape {
  int m_tiles = 2;  // m16 tiles of packed query rows per CTA (kBlockM = 16 m_tiles)
  int warps = 4;    // each owns 16 keys of a KV block: kBlockN = 16 warps
  int stages = 3;   // K/V blocks in flight (the cp.async ring)
};

// Retune here. Rows per CTA: 32 covers one token of GQA 64/8 and 32/8 (8 and 4 rows) up to 4 tokens
// of 32/8 (speculative decoding); more rows take more CTAs, each reading the K/V again. d256 keeps
// one m tile (its 128 O accumulators per thread) and two stages (64 KB each).
constexpr DecodeShape decode_shape(int head_dim_qk, int head_dim_v) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  if (d <= 128) return {2, 4, 3};
  return {1, 4, 2};
}

constexpr int decode_smem_bytes(int head_dim_qk, int head_dim_v, int elem_bytes) {
  const DecodeShape s = decode_shape(head_dim_qk, head_dim_v);
  const int pad = smem_row_pad_qko(elem_bytes);
  const int block_n = 16 * s.warps;
  const int q = 16 * s.m_tiles * (head_dim_qk + pad);
  const int kv_stage = block_n * (head_dim_qk + pad) + block_n * (head_dim_v + smem_row_pad_v(elem_bytes));
  const int ring = elem_bytes * (q + s.stages * kv_stage);
  // The warps' states are merged through the K/V ring: fp32 O rows of head_dim_v + 4 floats and
  // (max, sum) per row and warp (DecodeTraits::kMergeStride).
  const int merge = 4 * s.warps * 16 * s.m_tiles * (head_dim_v + 4 + 2);
  return ring > merge ? ring : merge;
}

template <int kHeadDimQK_, int kHeadDimV_, typename Element_>
struct DecodeTraits {
  using Element = Element_;
  static constexpr bool kTf32x3 = false;  // 16-bit inputs only (mma.m16n8k16)
  static constexpr int kElemBytes = int(sizeof(Element));
  static constexpr int kHeadDimQK = kHeadDimQK_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr DecodeShape kShape = decode_shape(kHeadDimQK, kHeadDimV);
  static constexpr int kWarps = kShape.warps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = kShape.stages;
  static constexpr int kMTiles = kShape.m_tiles;
  static constexpr int kBlockM = 16 * kMTiles;
  static constexpr int kWarpKeys = 16;
  static constexpr int kBlockN = kWarpKeys * kWarps;
  static constexpr int kScoreNTiles = kWarpKeys / 8;
  static constexpr int kOutNTiles = kHeadDimV / 8;
  static constexpr int kQStride = kHeadDimQK + smem_row_pad_qko(kElemBytes);
  static constexpr int kKStride = kHeadDimQK + smem_row_pad_qko(kElemBytes);
  static constexpr int kVStride = kHeadDimV + smem_row_pad_v(kElemBytes);
  // What the shared GEMMs (sm80/common/gemm.cuh) read: one warp's view, all rows against its 16 keys.
  struct WarpGemm {
    using Element = Element_;
    static constexpr bool kTf32x3 = false;
    static constexpr int kHeadDimQK = kHeadDimQK_;
    static constexpr int kHeadDimV = kHeadDimV_;
    static constexpr int kMTiles = DecodeTraits::kMTiles;
    static constexpr int kBlockN = DecodeTraits::kWarpKeys;
    static constexpr int kScoreNTiles = DecodeTraits::kScoreNTiles;
    static constexpr int kOutNTiles = DecodeTraits::kOutNTiles;
    static constexpr int kQStride = DecodeTraits::kQStride;
    static constexpr int kKStride = DecodeTraits::kKStride;
    static constexpr int kVStride = DecodeTraits::kVStride;
  };
  static constexpr int kQElems = kBlockM * kQStride;
  static constexpr int kKStageElems = kBlockN * kKStride;
  static constexpr int kVStageElems = kBlockN * kVStride;
  static constexpr int kKOffset = kQElems;
  static constexpr int kVOffset = kKOffset + kStages * kKStageElems;
  static constexpr int kSmemBytes = decode_smem_bytes(kHeadDimQK, kHeadDimV, kElemBytes);
  // The merge area (fp32, overlays the ring): O of every warp [warp][row][kMergeStride], then
  // (max_log2, sum) per warp and row.
  static constexpr int kMergeStride = kHeadDimV + 4;  // 16-byte rows, rows shifted by 4 banks

  static_assert(kElemBytes == 2, "the decode kernel runs 16-bit inputs");
  static_assert(kHeadDimQK % 16 == 0 && kHeadDimV % 16 == 0, "head dims are whole k16 / n16 steps");
  static_assert(kStages >= 2, "a ring of at least two K/V blocks");
  static_assert(4 * kWarps * kBlockM * (kMergeStride + 2) <= kSmemBytes, "the merge area fits the shared memory");
};

}  // namespace flashcore::sm80
