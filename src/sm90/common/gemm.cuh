// Warpgroup GEMMs on flashcore's shared-memory operand tiles ([cols/64][rows][64] 16-bit elements,
// 128-byte swizzle, 1024-byte aligned; ptx/wgmma.hpp): one wgmma per k16 step, the k-step's
// descriptor stepped from one base descriptor.
//
// The base descriptors are made opaque, so the compiler derives each k-step's descriptor with an
// add just before its wgmma instead of hoisting all of them out of the caller's loop (where they
// would hold registers across it).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "ptx/wgmma.hpp"

namespace flashcore::sm90 {

inline constexpr uint32_t kSwizzleRowBytes = 128;  // one row of a 64-column chunk

// acc (64 x kN) = A (64 x kDepth) * B^T, both K-major: A's 64 rows start at shared address a_addr in
// a tile of kARows rows per 64-column chunk, B (kN rows) at b_addr in a tile of kBRows rows per chunk.
// k-step kk reads chunk kk/4 (a whole [rows][64] slab further) at 32 bytes per k16 inside it.
// B's chunks and 8-row groups are kBChunkBytes and kBGroupBytes apart: [chunks][kBRows][64] by
// default, or the row-group tile [kBRows/8][chunks][8][64] (sm90/fwd/kernel_traits.cuh, kKvRowGroups).
template <int kN, int kDepth, int kARows, int kBRows, ptx::WgmmaType kType,
          uint32_t kBChunkBytes = kBRows * kSwizzleRowBytes, uint32_t kBGroupBytes = 8 * kSwizzleRowBytes>
FC_DEVICE void gemm_ss_overwrite(float* acc, uint32_t a_addr, uint32_t b_addr) {
  uint64_t desc_a = ptx::make_smem_desc(a_addr, 16, 1024);
  uint64_t desc_b = ptx::make_smem_desc(b_addr, 16, kBGroupBytes);
  ptx::opaque(desc_a);
  ptx::opaque(desc_b);
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    const uint32_t chunk = kk / 4, within = (kk % 4) * 32;
    ptx::WgmmaSS<kN, kType>::run(acc, ptx::desc_advance(desc_a, chunk * kARows * kSwizzleRowBytes + within),
                                 ptx::desc_advance(desc_b, chunk * kBChunkBytes + within), kk > 0 ? 1 : 0);
  }
}

// acc (64 x kN) += A (64 x kDepth, registers: 4 packed words per k16 step) * B (kDepth x kN) read
// MN-major (trans-b) from a tile of kDepth rows at b_addr: LBO is the distance between B's 64-column
// chunks (kBChunkBytes), SBO between its 8-row groups (kBGroupBytes), and a k-step is two groups.
// Defaults: [chunks][kDepth][64]; the row-group tile as for gemm_ss_overwrite.
template <int kN, int kDepth, ptx::WgmmaType kType, uint32_t kBChunkBytes = kDepth * kSwizzleRowBytes,
          uint32_t kBGroupBytes = 8 * kSwizzleRowBytes>
FC_DEVICE void gemm_rs_accumulate(float* acc, const uint32_t* a, uint32_t b_addr) {
  uint64_t desc_b = ptx::make_smem_desc(b_addr, kBChunkBytes, kBGroupBytes);
  ptx::opaque(desc_b);
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    ptx::WgmmaRS<kN, kType>::run(acc, a + 4 * kk, ptx::desc_advance(desc_b, kk * 2 * kBGroupBytes), 1);
  }
}

// acc (64 x kN) += A (64 x kDepth) * B (kDepth x kN): A K-major in shared memory (one 64-column
// chunk: kDepth <= 64, 32 bytes per k16 step), B read MN-major from a tile of kDepth rows at b_addr
// (as in gemm_rs_accumulate).
template <int kN, int kDepth, ptx::WgmmaType kType>
FC_DEVICE void gemm_ss_transb_accumulate(float* acc, uint32_t a_addr, uint32_t b_addr) {
  static_assert(kDepth <= 64, "A is one 64-column chunk");
  uint64_t desc_a = ptx::make_smem_desc(a_addr, 16, 1024);
  uint64_t desc_b = ptx::make_smem_desc(b_addr, kDepth * kSwizzleRowBytes, 1024);
  ptx::opaque(desc_a);
  ptx::opaque(desc_b);
#pragma unroll
  for (int kk = 0; kk < kDepth / 16; ++kk) {
    ptx::WgmmaSSTransB<kN, kType>::run(acc, ptx::desc_advance(desc_a, kk * 32),
                                       ptx::desc_advance(desc_b, kk * 16 * kSwizzleRowBytes), 1);
  }
}

// Rows [first_row, kRows) of a [kChunks][kRows][64] tile at `tile` become 0 (whole 128-byte rows, so
// the swizzle does not matter), by `threads` threads of which this is number `thread`. The caller
// fences them for the async proxy and meets the wgmma readers.
template <int kChunks, int kRows>
FC_DEVICE void zero_tile_rows(uint16_t* tile, int first_row, int thread, int threads) {
  const uint32_t base = ptx::smem_addr(tile);
  constexpr int kUnitsPerRow = kSwizzleRowBytes / 16;
  const int units = (kRows - first_row) * kUnitsPerRow;
  for (int u = thread; u < kChunks * units; u += threads) {
    const int chunk = u / units, within = u % units;
    ptx::st_shared_zero16(base + (chunk * kRows + first_row) * kSwizzleRowBytes + within * 16);
  }
}

}  // namespace flashcore::sm90
