// The stream-K tail of dense calls whose tiles are all equally long (every query row sees every
// key): host and device code, tested on the CPU (tests/cpu/test_sm90_stream_k.cpp).
//
// Why: a persistent grid of G CTAs runs T equal tiles in ceil(T / G) waves; when T % G = R > 0 the
// last wave keeps only R of the G CTAs busy. Every d256 row of the standard suite has 1024 tiles,
// 7.76 waves on 132 SMs (the last wave 76 % full, about 3 % of the call idle); d128 and d64 at
// S <= 4k have 31.03 and 23.3 waves.
// What: the first (T / G - 1) * G tiles run as whole-tile waves (scheduler.cuh); the last G + R
// tiles, i.e. (G + R) * nb KV blocks (nb per tile), are cut into G contiguous shares of the block
// sequence "tile by tile, each tile's blocks in the order the kernel visits them" (last block
// first). The tail then takes (G + R) / G tile times instead of 2.
// A share holds at least nb blocks (G + R >= G tiles spread over G CTAs), so a tile is split
// between at most two CTAs, c and c + 1: c holds the tile's first blocks (in visit order) at the
// END of its share, c + 1 the rest at the START of its share. Each CTA runs its items in this
// order:
//   1. the end part (kWritePartial): O, row max and row sums go to a global fp32 workspace slot,
//      then a flag is raised (stream_k.cuh);
//   2. the whole tiles of its share (kWholeTile);
//   3. the start part (kMergePartial): it waits for CTA c - 1's flag, folds that partial into its
//      own accumulator and stores the tile (epilogue.cuh).
// CTA c - 1 wrote that partial first thing in its share, so the wait is normally already over; and
// a CTA only ever waits for a lower-indexed one, which was scheduled before it.
// Cluster kernels: the "CTAs" of this arithmetic are clusters; both CTAs of a cluster walk the same
// items, each on its own query block, and exchange partials with the same rank of the neighbour.
#pragma once

#include "common/host_device.hpp"

namespace flashcore::attn {

enum class TileRole : int {
  kWholeTile = 0,     // every KV block of the tile: the usual epilogue
  kWritePartial = 1,  // the tile's first blocks; the next CTA finishes it
  kMergePartial = 2,  // the tile's remaining blocks, merged with the previous CTA's partial
};

// One item of a CTA's share: unit `unit` of the tile order, blocks [j_begin, j_end) of the tile in
// visit order (j = 0 is the tile's last KV block).
struct StreamKItem {
  int unit = 0;
  int j_begin = 0, j_end = 0;
  TileRole role = TileRole::kWholeTile;
};

struct StreamKTail {
  int first_unit = 0;       // units [first_unit, num_units) form the tail
  int num_units = 0;        // units of the tile order
  int blocks_per_unit = 0;  // KV blocks per tile (nb); 0: no tail, every unit runs in the waves
  int grid_units = 1;       // G: CTAs, or clusters

  FC_HOST_DEVICE bool active() const { return blocks_per_unit > 0; }
  // 32-bit arithmetic (a 64-bit division is a subroutine call on the GPU, and the registers live
  // across it spill): plan_stream_k_tail keeps grid_units * total_blocks() within int.
  FC_HOST_DEVICE int total_blocks() const { return (num_units - first_unit) * blocks_per_unit; }
  // CTA c's share of the tail is blocks [share_begin(c), share_begin(c + 1)).
  FC_HOST_DEVICE int share_begin(int c) const { return c * total_blocks() / grid_units; }

  // The number of items of CTA c (0 without a tail) and item k of them, in running order.
  FC_HOST_DEVICE int items(int c) const {
    if (!active()) return 0;
    const int nb = blocks_per_unit, a = share_begin(c), b = share_begin(c + 1);
    const int whole = b / nb - (a + nb - 1) / nb;  // tiles that lie wholly inside [a, b)
    return whole + (b % nb != 0 ? 1 : 0) + (a % nb != 0 ? 1 : 0);
  }
  FC_HOST_DEVICE StreamKItem item(int c, int k) const {
    const int nb = blocks_per_unit, a = share_begin(c), b = share_begin(c + 1);
    StreamKItem it;
    if (b % nb != 0) {
      if (k == 0) {  // the end part: the first b % nb blocks of tile b / nb
        it.unit = first_unit + b / nb;
        it.j_begin = 0, it.j_end = b % nb;
        it.role = TileRole::kWritePartial;
        return it;
      }
      --k;
    }
    const int first_whole = (a + nb - 1) / nb;
    if (first_whole + k < b / nb) {
      it.unit = first_unit + first_whole + k;
      it.j_begin = 0, it.j_end = nb;
      return it;
    }
    // The start part: the blocks of tile a / nb from a % nb on.
    it.unit = first_unit + a / nb;
    it.j_begin = a % nb, it.j_end = nb;
    it.role = TileRole::kMergePartial;
    return it;
  }
};

// The items of one CTA's share as the kernel runs them, computed once per CTA (the kernel shell,
// into shared memory) so the 24-register producer only reads them: at most the end part, two
// whole tiles (a share holds fewer than 2 nb + 1 blocks) and the start part. Every tile of a
// stream-K call visits KV blocks nb - 1 down to 0, so visit position j is block nb - 1 - j.
inline constexpr int kMaxStreamKItems = 4;
struct StreamKWork {
  int unit = 0;
  int n_first = 0, n_last = -1;  // the KV blocks of this item, inclusive
  TileRole role = TileRole::kWholeTile;
};
struct StreamKList {
  int count = 0;
  StreamKWork work[kMaxStreamKItems];
  FC_HOST_DEVICE void fill(const StreamKTail& tail, int c) {
    count = tail.items(c);
    for (int k = 0; k < count && k < kMaxStreamKItems; ++k) {
      const StreamKItem it = tail.item(c, k);
      work[k].unit = it.unit;
      work[k].n_first = tail.blocks_per_unit - it.j_end;
      work[k].n_last = tail.blocks_per_unit - 1 - it.j_begin;
      work[k].role = it.role;
    }
  }
};

// The tail a launch runs with: none unless the tiles overflow the grid by a partial wave and the
// tail saves at least kStreamKMinSavedBlocks blocks per CTA (what a split costs: one more tile
// prologue and drain, the partial's store and merge; the smallest saving measured, d64 S=1k at 5.8
// blocks, gained 1.3 % on the H200). force: -1 that rule, 0 never, 1 whenever there is a partial
// wave (FLASHCORE_SM90_STREAM_K=off|on, tests/tuning; the launcher passes 0 for head dims whose
// tile config has kStreamKTail false unless the variable says on).
inline constexpr int kStreamKMinSavedBlocks = 4;

FC_HOST_DEVICE StreamKTail plan_stream_k_tail(int num_units, int grid_units, int blocks_per_unit, int force) {
  StreamKTail t;
  t.num_units = num_units, t.first_unit = num_units, t.grid_units = grid_units > 0 ? grid_units : 1;
  const int g = t.grid_units;
  const int partial = num_units % g;
  if (force == 0 || num_units <= g || partial == 0 || blocks_per_unit < 2) return t;
  const long long saved_blocks_per_cta = (long long)(g - partial) * blocks_per_unit / g;
  if (force < 0 && saved_blocks_per_cta < kStreamKMinSavedBlocks) return t;
  const long long tail_blocks = (long long)(g + partial) * blocks_per_unit;
  if (tail_blocks * (g + 1) > 0x7fffffffLL) return t;  // StreamKTail's int arithmetic
  t.first_unit = (num_units / g - 1) * g;  // the last full wave and the partial one
  t.blocks_per_unit = blocks_per_unit;
  return t;
}

}  // namespace flashcore::attn
