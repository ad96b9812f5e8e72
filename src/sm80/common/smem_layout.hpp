// Shared-memory layouts of the 16-bit tiles the sm80 kernels read with ldmatrix (gemm.cuh), and the
// address arithmetic both sides of a tile use: the cp.async copies that fill it and the ldmatrix
// lanes that read it. Host code includes this header (tests/cpu/test_smem_layout.cpp).
//
// Padded (the default): rows kStride = cols + 8 elements apart, so the 16-byte chunks of the 8
// consecutive rows one ldmatrix matrix reads fall on distinct banks.
// Swizzled (Traits::kSwizzledSmem): rows exactly cols apart (a multiple of 64 16-bit elements, the
// tile 128-byte aligned), chunk c of row r stored at chunk c ^ (r % 8) of its 128-byte segment: as
// conflict-free as the padding, and every row starts on a 128-byte line. Rows that straddle
// shared-memory lines make cp.async move 1.5x the bytes from L2 to the SM (ncu, the decode kernel:
// 1.61 GB over the crossbar for 1.07 GB of K/V, 1.07 GB with rows on whole lines).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace flashcore::sm80 {

template <class Traits>
constexpr bool swizzled_smem() {
  if constexpr (requires { Traits::kSwizzledSmem; }) {
    return Traits::kSwizzledSmem;
  } else {
    return false;
  }
}

// Element offset of (row, col) in a tile of that layout, col a multiple of 8.
template <bool kSwizzled, int kStride>
FC_HOST_DEVICE constexpr int smem_tile_offset(int row, int col) {
  if constexpr (kSwizzled) {
    return row * kStride + (((col >> 3) ^ (row & 7)) << 3);
  } else {
    return row * kStride + col;
  }
}

// The byte address `row_step` rows and `chunk_step` 16-byte chunks past a lane's ldmatrix address
// (that of chunk 0 or 1 of its row). row_step is a multiple of 8, so the row's swizzle bits do not
// change, and chunk_step is even, so adding it to the lane's chunk is XOR on the low three bits.
template <bool kSwizzled, int kStride>
FC_HOST_DEVICE constexpr uint32_t smem_step_address(uint32_t lane_address, int row_step, int chunk_step) {
  constexpr int kRowBytes = 2 * kStride;
  if constexpr (kSwizzled) {
    return (lane_address ^ uint32_t((chunk_step & 7) << 4)) + uint32_t((chunk_step & ~7) << 4) +
           uint32_t(row_step * kRowBytes);
  } else {
    return lane_address + uint32_t(row_step * kRowBytes + chunk_step * 16);
  }
}

}  // namespace flashcore::sm80
