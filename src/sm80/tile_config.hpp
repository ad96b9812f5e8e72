// The sm80 path's ONE tuning table: tile shape per (Dqk, Dv). Everything else (fragment counts,
// shared-memory layout, launch size) is derived from these four numbers in FwdTraits below.
//
//   block_m: query rows per CTA      block_n: keys per KV block      warps: warps per CTA
//   kv_stages: 1 = one K and one V buffer, K_{j-1} loads during softmax + P V_j and V_j during
//              Q K_j^T (two barriers per KV block, FlashAttention-2's scheme);
//              2 = two K/V buffers, block j+1 loads during all of block j (one barrier per block).
//   Each warp owns block_m / warps query rows (one or two m16 MMA tiles). Two m16 tiles per warp
//   halve the shared-memory traffic for K/V fragments (each B fragment feeds two MMAs) at the cost
//   of registers; d >= 192 uses one m16 tile per warp with 8 warps to stay under 255 registers.
//   The -Xptxas -v report for every entry is in docs/perf-notes.md (sm80 section): no spills on sm_90a; on
//   sm_80 only d128 spills (40 B), a trade measured on the H200 only (see the d128 entry).
//   Host code includes this header (no device code here) to check shared-memory needs in supports().
#pragma once

namespace flashcore::sm80 {

struct TileShape {
  int block_m = 0;
  int block_n = 0;
  int warps = 0;
  int kv_stages = 1;
};

// Retune here (tools/bench/sm80_timing.cu times other shapes next to the table's). Dqk/Dv pairs
// not listed get the entry of max(Dqk, Dv). Figures: H200, fp16, S = 16k non-causal, TFLOPS.
constexpr TileShape tile_shape(int head_dim_qk, int head_dim_v) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  if (d <= 32) return {128, 128, 4, 1};
  // d64 (128 x 64): two stages 301-308 vs one 299-301; 128 x 128 reached 314 (untested in the sweep).
  if (d <= 64) return {128, 64, 4, 2};
  // d96: untimed. 128 x 64 x 4 now fits without spills (254 regs) and is the next candidate.
  if (d <= 96) return {128, 32, 4, 1};
  // d128: 363 vs 345 (128 x 32, two stages, spill-free on sm_80 too) vs 314 (128 x 64, two stages).
  if (d <= 128) return {128, 64, 4, 1};
  if (d <= 192) return {128, 64, 8, 1};
  return {128, 64, 8, 1};  // 256: 135 KB of shared memory, one CTA per SM
}

// Shared-memory rows are padded by 16 bytes (8 elements): consecutive rows then start in different
// 16-byte bank groups, so ldmatrix (8 rows x 16 B per phase) and the 16-byte cp.async writes are
// free of bank conflicts without a swizzle.
inline constexpr int kSmemRowPad = 8;

// Bytes of dynamic shared memory: Q tile (reused for the O tile in the epilogue), K and V tiles per
// stage, all 16-bit elements.
constexpr int smem_bytes(int head_dim_qk, int head_dim_v, TileShape t) {
  const int q_or_o = t.block_m * ((head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v) + kSmemRowPad);
  const int k = t.block_n * (head_dim_qk + kSmemRowPad);
  const int v = t.block_n * (head_dim_v + kSmemRowPad);
  return 2 * (q_or_o + t.kv_stages * (k + v));
}
constexpr int smem_bytes(int head_dim_qk, int head_dim_v) {
  return smem_bytes(head_dim_qk, head_dim_v, tile_shape(head_dim_qk, head_dim_v));
}

}  // namespace flashcore::sm80

namespace flashcore::sm80 {

// Compile-time facts of one instantiation, all derived from the tile shape (the table's entry unless
// a tuning experiment passes another one, see tools/bench/sm80_timing.cu).
template <int kHeadDimQK_, int kHeadDimV_, typename Element_, TileShape kShape_ = tile_shape(kHeadDimQK_, kHeadDimV_)>
struct FwdTraits {
  using Element = Element_;  // __half or __nv_bfloat16
  static constexpr int kHeadDimQK = kHeadDimQK_;
  static constexpr int kHeadDimV = kHeadDimV_;
  static constexpr TileShape kShape = kShape_;
  static constexpr int kBlockM = kShape.block_m;
  static constexpr int kBlockN = kShape.block_n;
  static constexpr int kWarps = kShape.warps;
  static constexpr int kKVStages = kShape.kv_stages;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kRowsPerWarp = kBlockM / kWarps;
  static constexpr int kMTiles = kRowsPerWarp / 16;     // m16 MMA tiles per warp
  static constexpr int kScoreNTiles = kBlockN / 8;      // n8 tiles of S = Q K^T per m16 tile
  static constexpr int kOutNTiles = kHeadDimV / 8;      // n8 tiles of O per m16 tile
  // Shared-memory row strides in elements (padded, see kSmemRowPad).
  static constexpr int kQStride = kHeadDimQK + kSmemRowPad;
  static constexpr int kKStride = kHeadDimQK + kSmemRowPad;
  static constexpr int kVStride = kHeadDimV + kSmemRowPad;
  static constexpr int kOStride = kHeadDimV + kSmemRowPad;
  // Element offsets of the tiles inside dynamic shared memory.
  static constexpr int kQOffset = 0;
  static constexpr int kQOrOElems = kBlockM * (kQStride > kOStride ? kQStride : kOStride);
  static constexpr int kKOffset = kQOrOElems;  // stage s of K at kKOffset + s * kKStageElems
  static constexpr int kKStageElems = kBlockN * kKStride;
  static constexpr int kVOffset = kKOffset + kKVStages * kKStageElems;
  static constexpr int kVStageElems = kBlockN * kVStride;
  static constexpr int kSmemBytes = 2 * (kVOffset + kKVStages * kVStageElems);

  static_assert(kSmemBytes == smem_bytes(kHeadDimQK, kHeadDimV, kShape), "layout and host-side size disagree");
  static_assert(kKVStages == 1 || kKVStages == 2, "one or two K/V buffers");
  static_assert(kRowsPerWarp % 16 == 0 && kMTiles >= 1, "each warp owns whole m16 tiles");
  static_assert(kBlockN % 16 == 0, "KV blocks are whole k16 steps of P V");
  static_assert(kHeadDimQK % 16 == 0 && kHeadDimV % 16 == 0, "head dims are whole k16 / n16 steps");
};

}  // namespace flashcore::sm80
