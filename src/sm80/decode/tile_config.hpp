// The decode path's tuning table and the compile-time facts derived from it.
//
// Decode is memory-bound: each (batch entry, KV head) reads its whole K/V cache for a handful of
// query rows. So a CTA packs every query row that shares one KV head (seqlen_q x heads_q / heads_kv
// rows, token-major: row r = token r / group, query head kv_head * group + r % group) into one tile
// of kBlockM rows, streams K/V blocks of kBlockN keys through a kStages-deep cp.async ring, and
// splits each block's keys across the warps (warp w owns keys [w, w + 1) x warp_keys of every block, with
// its own online softmax and O accumulators); the warps' states are merged once at the end. Long
// caches are cut into num_splits key ranges (one CTA each) merged by the combine kernel.
//   Host code includes this header (no device code here) for shared-memory sizes in supports().
#pragma once

#include "sm80/common/smem_budget.hpp"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore::sm80 {

struct DecodeShape {
  int m_tiles = 2;     // m16 tiles of packed query rows per CTA (kBlockM = 16 m_tiles)
  int warps = 4;       // each owns warp_keys keys of a KV block: kBlockN = warp_keys * warps
  int stages = 3;      // K/V blocks in flight (the cp.async ring)
  int warp_keys = 16;  // a multiple of 16 (whole k16 steps of P V)
};

// Retune here (FLASHCORE_DECODE_TUNE="m_tiles, warps, stages, warp_keys" overrides the dense d <= 128
// entry in A/B builds). d <= 128: 16 packed rows (one token of GQA up to 16:1; more rows take more
// row tiles, each reading the K/V again, mostly from L2 as they run together). Dense caches and
// pages of at least kLargePageRows rows: 8 warps x 16 keys = 128-key blocks, 2 stages (132 KB at
// d128: one CTA per SM, fits the A100's 163 KB); smaller pages: 4 warps, 64-key blocks, 3 stages
// (100 KB: two CTAs per SM). H100, swizzled tiles, bf16 d128 GQA 64/8, one token, CUDA graphs, GB/s
// of K/V read, B1 S8k / B1 S128k / B8 S32k / B128 S32k / B8 S32k paged 16 / paged 256 (the paged
// columns with the row offsets read row by row between the copies), two runs in one call:
//   {1, 4, 3, 16} 1690-1718 / 2935-2940 / 3003-3005 / 3082-3086 / 2926 / 2942-2945
//   {1, 8, 2, 16} 1754-1760 / 3018-3025 / 3077-3079 / 3168 / 2390 / 2969-2975
//   {1, 8, 3, 16} 1758-1760 / 2961-2968 / 3021-3023 / 3036 / - / 2985-2987
//   {1, 4, 2, 16} 1721 / 2922 / 3000 / 3077 / 2947 / 2954 (three CTAs per SM)
//   {1, 2, 4, 16} 1554 / 2885 / 2946 / 2929 / 2747 / 2848; {1, 4, 3, 32} 1765 / 2906 / 2962 / 2983 /
//   1846 / 2575; {1, 2, 6, 16} 1593 / 2897 / 2923 / 3057 / 2308 / 2425.
// Paged, with the row offsets read ahead of the copies (kernel.cuh, load_kv_block), H100, B8 S32k /
// B128 S32k / B8 S128k / B32 S32k, random page order, pages of 16 | 64 | 256 rows, two runs:
//   {1, 4, 3, 16} 2941-2957 / 3064-3068 / 3024-3028 / 3038-3040 | 2970-2980 / 3037-3039 / 3037 / - |
//                 2991-2998 / 3061-3063 / 3056-3060 / 3071-3075
//   {1, 8, 2, 16} 2915-2920 / 3004-3006 / 2968-2972 / 2996 | 3001-3007 / 3091 / 3056-3057 / - |
//                 3052-3053 / 3138 / 3102-3105 / 3108-3109  (dense: 3074-3080 / 3168-3172 / 3155-3178)
//   {1, 8, 3, 16} 2910-2917 / 3001-3002 / 2969-2971 / 2989-2990 | - | 3009-3011 / 3042-3044 / 3076-3078
// With pages in table order (the dense layout) the 8-warp tiles read pages of 16 at 3049-3054 (B8
// S32k): what they lose at random small pages is the pages' scatter, not the lookups, and more
// stages do not win it back; the 4-warp tiles lose less of it (two CTAs per SM, 2992 in order).
// Pages of 32 rows, 4-warp / 8-warp tile, same four columns: 2953-2959 / 2972-2973, 3062 / 3058,
// 3029 / 3019-3021, 3036-3039 / 3034: a tie, so kLargePageRows stays at 64.
// H200, swizzled tiles, attention_forward per step in a CUDA graph (C++ harness, two runs), B1 S8k / S32k / S128k /
// B8 S32k / B32 S32k / B128 S32k, dense, us per step: {1, 8, 2, 16} 16.0 / 39.0 / 126.2 / 244.2 /
// 948 / 3763; {1, 8, 3, 16} (196 KB) 16.0 / 38.8 / 128.9 / 249.2 / 946 / 3858: no better.
// Earlier, H200 with padded tiles (109 KB), dense / paged 4-warp entries, same columns as above:
//   {1, 4, 3, 16} 1398 / 3553 / 3850 / 4070 / 3643 / 3859
//   {1, 8, 3, 16} 1700 / 3666 / 3880 / 4028 / 2958 / 4014   (209 KB: not on the A100)
//   {1, 8, 2, 16} 1606 / 3538 / 3705 / 3764 / 2944 / 3525
// and, before the paged rows were looked up one block ahead: {2, 4, 3, 16} 1296 / 3578 / 3932 /
// 4127 (B8 paged: 2004); {2, 8, 2, 16} 1506 / 3505 / 3741 / 3881; {1, 4, 4, 16} 1610 / 3242 / 3404
// / 3484; {2, 4, 2, 32} 1339 / 2487 / 2581 / 2765. Reading K/V as [B, H, S, D] instead of the flash
// layout changed nothing (within 1.5%).
// d256: one m tile (128 O accumulators per thread), 4 warps, two stages (64 KB each; 136 KB in all).
// `wide_rows`: the call has more than 16 packed rows per KV head (several tokens of a wide GQA group,
// e.g. 4 speculative tokens of 64/8): 32-row tiles, so one CTA still reads each K/V block once. H200
// (same columns as above): {2, 4, 3, 16} 1299 / 3582 / 3934 / 4120 / 3230 / 3581 with one token,
// with four tokens of 64/8 1160 / 3485 / 3874 / 4109 where the 16-row tiles give 1268 / 2336 / 2425 /
// 2461 (two CTAs per unit, each reading all of it).
// Whether a call with this many packed query rows per KV head (seqlen_q x heads_q / heads_kv) takes
// the 32-row tiles: the one rule launch_decode and supports() both read.
constexpr bool decode_wide_rows(long long rows_per_kv_head) { return rows_per_kv_head > 16; }

// How a call reads K/V, as far as the tile shape goes (see the table above): a dense cache, pages of
// fewer than kLargePageRows rows, or larger pages.
enum class DecodeKv { kDense, kSmallPages, kLargePages };
inline constexpr int kLargePageRows = 64;
constexpr DecodeKv decode_kv(bool paged, int page_size) {
  return !paged ? DecodeKv::kDense : page_size >= kLargePageRows ? DecodeKv::kLargePages : DecodeKv::kSmallPages;
}

constexpr DecodeShape decode_shape(int head_dim_qk, int head_dim_v, bool wide_rows, DecodeKv kv) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
#if defined(FLASHCORE_DECODE_TUNE)
  if (d <= 128 && !wide_rows && kv == DecodeKv::kDense) return {FLASHCORE_DECODE_TUNE};
#endif
  if (d > 128) return {1, 4, 2, 16};
  if (wide_rows) return {2, 4, 3, 16};
  return kv == DecodeKv::kSmallPages ? DecodeShape{1, 4, 3, 16} : DecodeShape{1, 8, 2, 16};
}

constexpr bool operator==(DecodeShape a, DecodeShape b) {
  return a.m_tiles == b.m_tiles && a.warps == b.warps && a.stages == b.stages && a.warp_keys == b.warp_keys;
}

// Q, K and V tiles in the swizzled layout (sm80/common/gemm.cuh: rows on whole 128-byte lines, so
// the cp.async copies move only the bytes they read) where rows are a multiple of 64 elements, else
// padded rows.
constexpr bool decode_swizzled_smem(int head_dim_qk, int head_dim_v) {
  return head_dim_qk % 64 == 0 && head_dim_v % 64 == 0;
}
// The swizzled tiles start on a 128-byte line: the dynamic shared memory is aligned up by the kernel.
inline constexpr int kDecodeSmemAlignSlack = 128;
// Row padding (elements) of the Q / K tiles and of the V tile: none when swizzled.
constexpr int decode_row_pad_qk(int head_dim_qk, int head_dim_v, int elem_bytes) {
  return decode_swizzled_smem(head_dim_qk, head_dim_v) ? 0 : smem_row_pad_qko(elem_bytes);
}
constexpr int decode_row_pad_v(int head_dim_qk, int head_dim_v, int elem_bytes) {
  return decode_swizzled_smem(head_dim_qk, head_dim_v) ? 0 : smem_row_pad_v(elem_bytes);
}

constexpr int decode_smem_bytes(int head_dim_qk, int head_dim_v, int elem_bytes, DecodeShape s) {
  const int pad_qk = decode_row_pad_qk(head_dim_qk, head_dim_v, elem_bytes);
  const int pad_v = decode_row_pad_v(head_dim_qk, head_dim_v, elem_bytes);
  const int block_n = s.warp_keys * s.warps;
  const int q = 16 * s.m_tiles * (head_dim_qk + pad_qk);
  const int kv_stage = block_n * (head_dim_qk + pad_qk) + block_n * (head_dim_v + pad_v);
  const int ring = elem_bytes * (q + s.stages * kv_stage);
  // The warps' states are merged through the K/V ring: fp32 O rows of head_dim_v + 4 floats and
  // (max, sum) per row and warp (DecodeTraits::kMergeStride).
  const int merge = 4 * s.warps * 16 * s.m_tiles * (head_dim_v + 4 + 2);
  return (ring > merge ? ring : merge) + (decode_swizzled_smem(head_dim_qk, head_dim_v) ? kDecodeSmemAlignSlack : 0);
}
constexpr int decode_smem_bytes(int head_dim_qk, int head_dim_v, int elem_bytes, bool wide_rows, DecodeKv kv) {
  return decode_smem_bytes(head_dim_qk, head_dim_v, elem_bytes, decode_shape(head_dim_qk, head_dim_v, wide_rows, kv));
}

// The entry for parts with 99 KB per block (common/smem_budget.hpp): the table's own where it fits;
// else two stages, then half the warps (half the keys per block), until it fits: d128 {1, 4, 2, 16}
// (68 KB; on an H100, GQA 64/8 B8 S32k, 2804 GB/s against the entry's 2801 in one call, both with
// padded tiles), d256 {1, 2, 2, 16} (72 KB; 2751 against 2853 at GQA 32/8 B8 S16k). Untimed on those
// parts (the device tool lends H100 / H200 only).
constexpr DecodeShape compact_decode_shape(int head_dim_qk, int head_dim_v, bool wide_rows, DecodeKv kv) {
  DecodeShape s = decode_shape(head_dim_qk, head_dim_v, wide_rows, kv);
  if (decode_smem_bytes(head_dim_qk, head_dim_v, 2, s) > kCompactSmemBytes) s.stages = 2;
  while (decode_smem_bytes(head_dim_qk, head_dim_v, 2, s) > kCompactSmemBytes && s.warps > 1) s.warps /= 2;
  return s;
}

// Whether a launch takes the compact shape on a device allowing `smem_limit` bytes per block, and
// the shape it takes.
constexpr bool decode_compact(int head_dim_qk, int head_dim_v, bool wide_rows, DecodeKv kv, long long smem_limit) {
  return decode_smem_bytes(head_dim_qk, head_dim_v, 2, wide_rows, kv) > smem_limit;
}
constexpr DecodeShape decode_shape_for(int head_dim_qk, int head_dim_v, bool wide_rows, DecodeKv kv,
                                       long long smem_limit) {
  return decode_compact(head_dim_qk, head_dim_v, wide_rows, kv, smem_limit)
             ? compact_decode_shape(head_dim_qk, head_dim_v, wide_rows, kv)
             : decode_shape(head_dim_qk, head_dim_v, wide_rows, kv);
}

template <int kHeadDimQK_, int kHeadDimV_, typename Element_, bool kWideRows_, DecodeKv kKv_, bool kCompact_ = false>
struct DecodeTraits {
  using Element = Element_;
  static constexpr bool kTf32x3 = false;  // 16-bit inputs only (mma.m16n8k16)
  static constexpr int kElemBytes = int(sizeof(Element));
  static constexpr int kHeadDimQK = kHeadDimQK_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr bool kWideRows = kWideRows_;
  static constexpr DecodeKv kKv = kKv_;
  static constexpr bool kPaged = kKv != DecodeKv::kDense;  // K/V through a block table
  static constexpr bool kCompact = kCompact_;
  static constexpr DecodeShape kShape = kCompact ? compact_decode_shape(kHeadDimQK, kHeadDimV, kWideRows, kKv)
                                                 : decode_shape(kHeadDimQK, kHeadDimV, kWideRows, kKv);
  static constexpr int kWarps = kShape.warps;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kStages = kShape.stages;
  static constexpr int kMTiles = kShape.m_tiles;
  static constexpr int kBlockM = 16 * kMTiles;
  static constexpr int kWarpKeys = kShape.warp_keys;
  static constexpr int kBlockN = kWarpKeys * kWarps;
  static constexpr int kScoreNTiles = kWarpKeys / 8;
  static constexpr int kOutNTiles = kHeadDimV / 8;
  static constexpr bool kSwizzledSmem = decode_swizzled_smem(kHeadDimQK, kHeadDimV);
  static constexpr int kQStride = kHeadDimQK + decode_row_pad_qk(kHeadDimQK, kHeadDimV, kElemBytes);
  static constexpr int kKStride = kQStride;
  static constexpr int kVStride = kHeadDimV + decode_row_pad_v(kHeadDimQK, kHeadDimV, kElemBytes);
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
    static constexpr bool kSwizzledSmem = DecodeTraits::kSwizzledSmem;
  };
  // Q's A fragments stay in registers across the K/V blocks (not re-read from shared memory per
  // block) where they take at most 32 registers: d <= 128 with one row tile. Above that they
  // would crowd the O accumulators (128 per thread at d256).
  static constexpr bool kQInRegisters = kHeadDimQK / 16 * kMTiles * 4 <= 32;
  static constexpr int kQElems = kBlockM * kQStride;
  static constexpr int kKStageElems = kBlockN * kKStride;
  static constexpr int kVStageElems = kBlockN * kVStride;
  static constexpr int kKOffset = kQElems;
  static constexpr int kVOffset = kKOffset + kStages * kKStageElems;
  static constexpr int kSmemBytes = decode_smem_bytes(kHeadDimQK, kHeadDimV, kElemBytes, kShape);
  // The merge area (fp32, overlays the ring): O of every warp [warp][row][kMergeStride], then
  // (max_log2, sum) per warp and row.
  static constexpr int kMergeStride = kHeadDimV + 4;  // 16-byte rows, rows shifted by 4 banks

  static_assert(kElemBytes == 2, "the decode kernel runs 16-bit inputs");
  static_assert(kHeadDimQK % 16 == 0 && kHeadDimV % 16 == 0, "head dims are whole k16 / n16 steps");
  static_assert(kStages >= 2, "a ring of at least two K/V blocks");
  static_assert(4 * kWarps * kBlockM * (kMergeStride + 2) + (kSwizzledSmem ? kDecodeSmemAlignSlack : 0) <= kSmemBytes,
                "the merge area fits the shared memory");
};

}  // namespace flashcore::sm80
