// The dQ accumulator's query blocks in fragment order: how the sm90 backward's kernels with
// kDqTransposed (sm90/bwd/tile_config.hpp) lay out one step's dQ partial, in shared memory and in
// the workspace alike, so the partial goes out as one contiguous bulk reduce-add and every consumer
// thread writes it with 16-byte stores.
//
// A block of `rows` query rows (a multiple of 8: the kernels' 80) owns workspace rows [row0, row0 +
// rows) of the [rows][kDqTileCols] accumulator: rows * kDqTileCols contiguous floats. Consumer thread
// tid (0..255: warpgroup w = tid / 128, warp, lane = 4 g + t) holds accumulator element i = 4 j + e
// (e = 2 r + e1) of dQ^T: dQ column 64 w + 16 warp + g + 8 r, query row 8 j + 2 t + e1 (the wgmma
// accumulator layout), and stores it at float 4 (256 j + tid) + e of the block.
#pragma once

#include "common/host_device.hpp"

namespace flashcore::backward {

inline constexpr int kDqTileCols = 128;      // dQ columns of a block (the d96 / d128 kernels' padded Dqk)
inline constexpr int kDqTileThreads = 256;   // consumer threads

// Float index, inside its block, of (query row q of the block, dQ column d).
FC_HOST_DEVICE constexpr int dq_tile_offset(int q, int d) {
  const int tid = 128 * (d / 64) + 32 * ((d % 64) / 16) + 4 * (d % 8) + (q % 8) / 2;
  return 4 * (kDqTileThreads * (q / 8) + tid) + 2 * ((d % 16) / 8) + q % 2;
}

// The inverse: (query row, dQ column) of float index f of a block.
struct DqTileElement {
  int q, d;
};
FC_HOST_DEVICE constexpr DqTileElement dq_tile_element(int f) {
  const int e = f % 4, tid = (f / 4) % kDqTileThreads, j = f / (4 * kDqTileThreads);
  const int lane = tid % 32;
  return {8 * j + 2 * (lane % 4) + e % 2, 64 * (tid / 128) + 16 * ((tid / 32) % 4) + lane / 4 + 8 * (e / 2)};
}

}  // namespace flashcore::backward
