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
//   No entry spills, on sm_80 or sm_90a (-Xptxas -v, CUDA 13.0; docs/design/sm80.md has the report).
//   The 192-accumulator tiles (d64 128 x 128, d128 and
//   64/128 128 x 64) use 254-255 registers: they fit because the mainloop keeps little else live
//   across the KV loop (see load_tile_async, transform_and_mask and kv_bases in kernel.cuh); code
//   that adds loop-carried state to them must re-check the report.
//   fp32 inputs (3xTF32) have their own entries, keyed by the element size; fp32 d192 / d256 run as
//   two launches of the 192/96 / 256/128 kernel (see the fp32 entries).
//   Host code includes this header (no device code here) to check shared-memory needs in supports().
#pragma once

#include "sm80/common/smem_budget.hpp"

namespace flashcore::sm80 {

struct TileShape {
  int block_m = 0;
  int block_n = 0;
  int warps = 0;
  int kv_stages = 1;
};

constexpr bool operator==(TileShape a, TileShape b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.warps == b.warps && a.kv_stages == b.kv_stages;
}

// Retune here (tools/bench/sm80_timing.cu times other shapes next to the table's). Dqk/Dv pairs
// not listed get the entry of max(Dqk, Dv). `elem_bytes` is the instantiation's element size:
// 2 = fp16/bf16 on mma.m16n8k16, 4 = fp32 inputs on 3xTF32 mma.m16n8k8 (its own entries below).
// Figures: H200, fp16, S = 16k non-causal, TFLOPS.
constexpr TileShape tile_shape(int head_dim_qk, int head_dim_v, int elem_bytes = 2) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  if (elem_bytes == 4) {
    // fp32 (3xTF32): elements are twice as wide, so the tiles hold half as many keys for the same
    // shared memory, and each S / O accumulator costs the same registers as in 16 bits while the
    // hi/lo split needs a few more. Untimed beyond the d64/d128 check in docs/design/sm80.md.
    // One m16 tile per warp: the per-k8-step partial sums of 3xTF32 (mainloop.cuh) made every
    // two-tile shape (128 rows / 4 warps) spill. 64 x 64 (d64: 90 KB) and 64 x 32 (d128: 101 KB),
    // two stages, fit two CTAs per SM.
    if (d <= 64) return {64, 64, 4, 2};
    if (d <= 128) return {64, 32, 4, 2};
    // The half-V pairs 192/96 and 256/128: d128's tile with one stage (its 64 O accumulators fit;
    // 137 / 134 and 144 / 144 registers on sm_80 / sm_90a, no spill; 89600 and 118272 B; two
    // stages would pass the A100's 163 KB at 256/128). They are how fp32 d192 / d256 run: two
    // launches, one per half of V and O (launch.cu). A d192 / d256 kernel of its own is not built: one
    // m16 tile per warp still needs 128 O accumulators, and with the 3xTF32 P V step every d256 shape
    // tried spills at 255 registers (sm_80 / sm_90a bytes, 2026-11-22): 64 x 32 x 4 one stage 36 / 16,
    // two stages 4 / 16; 64 x 16 x 4 one stage 52 / 228, two stages 292 / 28; 128 x 32 x 8 36 / 16;
    // 128 x 16 x 8 52 / 228.
    return {64, 32, 4, 1};
  }
  if (d <= 32) return {128, 128, 4, 1};
  // d64: 128 x 128, one stage; 254 registers, no spill. >= 1.02x FA2 on every S and causal mode;
  // 128 x 96 and 128 x 64 x 2 stages fell below it (docs/design/sm80.md).
  if (d <= 64) return {128, 128, 4, 1};
  // d96: untimed. 128 x 64 x 4 now fits without spills (254 regs) and is the next candidate.
  if (d <= 96) return {128, 32, 4, 1};
  // 64/128 (the only Dqk < Dv pair): 128 x 32, two stages (d128's runner-up). At 128 x 64 ptxas
  // spills 8 B on sm_80 (two stages) and on both archs (one stage); 232 / 234 registers here. Untimed.
  if (head_dim_qk == 64 && head_dim_v == 128) return {128, 32, 4, 2};
  // d128: 128 x 64, one stage (H200 fp16 S=16k: 363 TFLOPS vs 345 for 128 x 32 and 314 for 128 x 64
  // with two stages); 255 registers, no spill; 1.00-1.16x FA2 on every d128 fp16/bf16 row.
  if (d <= 128) return {128, 64, 4, 1};
  if (d <= 192) return {128, 64, 8, 1};
  if (d <= 256) return {128, 64, 8, 1};  // 135 KB of shared memory, one CTA per SM
  // Above 256 (the sm90 wide kernels' head dims, here for GPUs without them): Q stays whole in
  // shared memory, so Dqk sets the tile; O is 256 columns wide (128 fp32 per thread, d256's count)
  // and a wider Dv runs as launches over 256-column parts (launch.cu). Sized for an A100's 163 KB:
  // Dqk 512 (and 320..448 padded to it) 64 x 32 x 4 warps, 117 KB; Dqk 576 (MLA) the same, 129 KB;
  // Dqk 1024 32 x 32 x 2 warps, 149 KB (64 query rows would need 215 KB). 229 registers, no spill
  // (sm_80 and sm_90a). H100 bf16 B1 H16 S4k, TFLOPS counting one S per query block: 512/512 131,
  // 1024/1024 43; the sm90 wide kernel runs 512/512 at 435. Untimed against other shapes.
  if (head_dim_qk <= 576) return {64, 32, 4, 1};
  return {32, 32, 2, 1};
}

// Shared-memory row padding in elements, chosen so the fragment loads need no swizzle:
// - 16-bit: every row padded by 16 bytes (8 elements): consecutive rows then start in different
//   16-byte bank groups, so ldmatrix (8 rows x 16 B per phase) and the 16-byte cp.async writes are
//   free of bank conflicts.
// - fp32: Q, K and O rows by 8 floats: their fragments are float2 accesses at (row g, col 2t) (the
//   k order inside a k8 step is permuted, see mainloop.cuh), served per half-warp (rows g = 0..3 or
//   4..7, t = 0..3); a row stride = 8 (mod 32) words puts the four rows at word offsets 0, 8, 16, 24,
//   so the 16 lanes x 2 words cover 32 distinct banks. V rows by 4 floats: its B fragments are
//   scalar loads of rows 2t and 2t + 1 at column g by the whole warp; a stride = 4 (mod 16) words
//   gives 2t * stride = 8t (mod 32), so lane (g, t) hits bank 8t + g: 32 distinct banks. (Both need
//   head dims that are multiples of 32 for Q/K/O and of 16 for V; the traits check it.)
constexpr int smem_row_pad_qko(int /*elem_bytes*/) { return 8; }  // 16 B (16-bit) or 32 B (fp32)
constexpr int smem_row_pad_v(int elem_bytes) { return elem_bytes == 4 ? 4 : 8; }

// Bytes of dynamic shared memory: Q tile (reused for the O tile in the epilogue), K and V tiles per
// stage.
constexpr int smem_bytes(int head_dim_qk, int head_dim_v, TileShape t, int elem_bytes) {
  const int pad = smem_row_pad_qko(elem_bytes);
  const int q_or_o = t.block_m * ((head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v) + pad);
  const int k = t.block_n * (head_dim_qk + pad);
  const int v = t.block_n * (head_dim_v + smem_row_pad_v(elem_bytes));
  return elem_bytes * (q_or_o + t.kv_stages * (k + v));
}
constexpr int smem_bytes(int head_dim_qk, int head_dim_v, int elem_bytes) {
  return smem_bytes(head_dim_qk, head_dim_v, tile_shape(head_dim_qk, head_dim_v, elem_bytes), elem_bytes);
}

// The entry for parts with 99 KB per block (common/smem_budget.hpp): the table's own where it fits;
// else one K/V stage, then half the rows with half the warps (rows per warp, so the registers per
// thread, unchanged), then half the keys, until it fits. Untimed on those parts (the device tool
// lends H100 / H200 only); correct on them by the tests that cap the limit.
constexpr TileShape compact_tile_shape(int head_dim_qk, int head_dim_v, int elem_bytes = 2) {
  TileShape t = tile_shape(head_dim_qk, head_dim_v, elem_bytes);
  if (smem_bytes(head_dim_qk, head_dim_v, t, elem_bytes) > kCompactSmemBytes) t.kv_stages = 1;
  while (smem_bytes(head_dim_qk, head_dim_v, t, elem_bytes) > kCompactSmemBytes && t.warps > 1) {
    t.block_m /= 2;
    t.warps /= 2;
  }
  while (smem_bytes(head_dim_qk, head_dim_v, t, elem_bytes) > kCompactSmemBytes && t.block_n > 16) t.block_n /= 2;
  return t;
}

// Whether a launch takes the compact tile on a device allowing `smem_limit` bytes per block, and
// the tile it takes.
constexpr bool uses_compact_tile(int head_dim_qk, int head_dim_v, int elem_bytes, long long smem_limit) {
  return smem_bytes(head_dim_qk, head_dim_v, elem_bytes) > smem_limit;
}
constexpr TileShape tile_shape_for(int head_dim_qk, int head_dim_v, int elem_bytes, long long smem_limit) {
  return uses_compact_tile(head_dim_qk, head_dim_v, elem_bytes, smem_limit)
             ? compact_tile_shape(head_dim_qk, head_dim_v, elem_bytes)
             : tile_shape(head_dim_qk, head_dim_v, elem_bytes);
}

}  // namespace flashcore::sm80

namespace flashcore::sm80 {

// Compile-time facts of one instantiation, all derived from the tile shape (the table's entry unless
// a tuning experiment passes another one, see tools/bench/sm80_timing.cu).
template <int kHeadDimQK_, int kHeadDimV_, typename Element_,
          TileShape kShape_ = tile_shape(kHeadDimQK_, kHeadDimV_, int(sizeof(Element_)))>
struct FwdTraits {
  using Element = Element_;  // __half or __nv_bfloat16 (mma.m16n8k16), float (3xTF32 mma.m16n8k8)
  static constexpr int kElemBytes = int(sizeof(Element));
  static constexpr bool kTf32x3 = kElemBytes == 4;
  static constexpr int kElemsPer16B = 16 / kElemBytes;  // elements per cp.async / vector store
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
  static constexpr int kQStride = kHeadDimQK + smem_row_pad_qko(kElemBytes);
  static constexpr int kKStride = kHeadDimQK + smem_row_pad_qko(kElemBytes);
  static constexpr int kVStride = kHeadDimV + smem_row_pad_v(kElemBytes);
  static constexpr int kOStride = kHeadDimV + smem_row_pad_qko(kElemBytes);
  // Element offsets of the tiles inside dynamic shared memory.
  static constexpr int kQOffset = 0;
  static constexpr int kQOrOElems = kBlockM * (kQStride > kOStride ? kQStride : kOStride);
  static constexpr int kKOffset = kQOrOElems;  // stage s of K at kKOffset + s * kKStageElems
  static constexpr int kKStageElems = kBlockN * kKStride;
  static constexpr int kVOffset = kKOffset + kKVStages * kKStageElems;
  static constexpr int kVStageElems = kBlockN * kVStride;
  static constexpr int kSmemBytes = kElemBytes * (kVOffset + kKVStages * kVStageElems);

  static_assert(kSmemBytes == smem_bytes(kHeadDimQK, kHeadDimV, kShape, kElemBytes),
                "layout and host-side size disagree");
  static_assert(kElemBytes == 2 || kElemBytes == 4, "16-bit or fp32 elements");
  static_assert(kKVStages == 1 || kKVStages == 2, "one or two K/V buffers");
  static_assert(kRowsPerWarp % 16 == 0 && kMTiles >= 1, "each warp owns whole m16 tiles");
  static_assert(kBlockN % 16 == 0, "KV blocks are whole k16 steps of P V (fp32: pairs of k8 steps)");
  static_assert(kHeadDimQK % 16 == 0 && kHeadDimV % 16 == 0, "head dims are whole k16 / n16 steps");
  static_assert(!kTf32x3 || (kQStride % 32 == 8 && kOStride % 32 == 8 && kVStride % 16 == 4),
                "fp32 strides keep the fragment accesses conflict-free (see smem_row_pad_*)");
};

}  // namespace flashcore::sm80
