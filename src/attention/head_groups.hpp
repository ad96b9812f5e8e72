// How many (batch, head)s the persistent scheduler interleaves (scheduler.cuh's "group"), chosen on
// the host. Host-only arithmetic, tested on the CPU (tests/cpu/test_sm90_head_groups.cpp).
#pragma once

#include <algorithm>
#include <cmath>

namespace flashcore::attn {

// Causal / windowed groups span at least this many waves of the grid (see heads_per_group).
inline constexpr int kMinWavesPerGroup = 2;

// kv_bytes_per_query_head: K + V bytes one query head reads (GQA heads sharing a KV head split it);
// l2_group_bytes: the K/V budget a group may keep in L2 (tile_config.hpp's kL2GroupBytes);
// uneven_tiles: causal or windowed, so tiles of one head differ in length.
//
// Tiles of equal length (no causal mask, no window): one head per group, i.e. head after head, so
// a wave holds the fewest heads and each head's K/V is read by all its CTAs at about the same time.
// H200, fp16, same binary, three rounds, the
// L2-budget groups below -> one head: d128 S=1k 567 -> 578 TFLOPS, S=8k 588 -> 595-600, S=16k
// 604 -> 605-608; d256 S=1k 567 -> 583; d64 S=1k 351.5 -> 353.5-356; no row lower beyond noise.
// Uneven tiles: as many heads as keep their K/V within the L2 budget, so the CTAs running together
// share K/V in L2, and at least kMinWavesPerGroup waves of tiles: the longest-first order inside a
// group only balances the snake waves when a group spans several waves (one 16k-token d256 head is
// 128 tiles, less than a wave on 132 SMs, so each wave mixed a head's longest and shortest tiles;
// H200: d256 causal S=16k 434 -> 611 TFLOPS with this rule).
inline int heads_per_group(double kv_bytes_per_query_head, double l2_group_bytes, int num_m_blocks, int grid,
                           int total_heads, bool uneven_tiles) {
  if (!uneven_tiles) return 1;
  const double by_l2 = l2_group_bytes / std::max(kv_bytes_per_query_head, 1.0);
  const double by_balance = std::ceil(double(kMinWavesPerGroup) * grid / std::max(num_m_blocks, 1));
  return int(std::clamp<double>(std::max(by_l2, by_balance), 1.0, double(std::max(total_heads, 1))));
}

}  // namespace flashcore::attn
