// The order in which the persistent scheduler (scheduler.cuh) hands out query tiles, as host and
// device code: the kernel walks exactly this order, and the CPU tests check it (every tile exactly
// once; the static balance of the snake assignment on the standard shapes).
//
// The order is a sequence of scheduling units; wave w of the grid takes units w*grid .. w*grid +
// grid - 1 in snake order (scheduler.cuh). A unit is one tile or, with `paired`, two tiles that the
// same CTA runs one after the other.
//
// Heads are taken in groups of `heads_per_group` (b*Hq + h consecutive; head_groups.hpp sizes them
// so one group's K/V stay in L2 while its tiles run). Inside a group:
//   * unpaired (every tile equally long, or the last group of a paired order): query blocks from the
//     last to the first (longest first under a causal mask), all heads of the group at one block
//     before the next. The snake then approximates longest-processing-time scheduling, but only
//     within one such run: where a new group starts again with its longest tiles mid-wave, the CTAs
//     that just got long tiles get long ones again (H200, d64 causal S=8k: 74% static balance,
//     349 TFLOPS against 485 without the mask);
//   * paired (causal calls, every group but the last): block m_units-1-p with block p of the same
//     head, whose key counts add up to about the same for every p, so every unit costs about the
//     same and no alignment of groups to waves matters. (A sliding window's tiles are all about
//     equally long but the first few: longest-first is balanced there, and pairs would join a
//     short tile with a full one; the launcher keeps them unpaired.) With an odd block count the
//     middle blocks of two heads form a unit. The last group stays unpaired, longest first: its
//     short tiles fill the last waves evenly.
#pragma once

#include "common/host_device.hpp"

namespace flashcore::attn {

// True when every head group of the unpaired order holds a whole number of waves of tiles, or at
// most a tenth of a wave more: the next group's longest tiles then start (nearly) a fresh wave, the
// snake stays aligned and the unpaired order is balanced as it is. The launcher pairs only when
// this is false. Same-binary A/B on the H200 (docs/design/sm90.md):
// pairs lost 1-2 % on exactly those causal rows (d64 S=2k/4k: 528 tiles per group = 4.0 waves of
// 132; d256 S=1k/2k: 2.0 / 2.06 waves) and gained 8-30 % where groups cut waves (d64 S=8k: 3.9
// waves, 352 -> 457 TFLOPS; d128 S=2k 452 -> 504; d256 S=16k 655 -> 758).
FC_HOST_DEVICE bool groups_fill_waves(int m_units, int heads_per_group, int grid) {
  const long long group_tiles = (long long)m_units * heads_per_group;
  return grid > 0 && (group_tiles % grid) * 10 <= grid;
}

// A tile of the order: query block (the cluster kernel: pair of blocks) and head index b*Hq + h.
struct TileSlot {
  int m_unit = 0;
  int head_index = 0;
};

struct TileOrder {
  int m_units = 0;          // query blocks per head (the cluster kernel: pairs of blocks)
  int total_heads = 0;      // B * Hq
  int heads_per_group = 1;  // >= 1
  bool paired = false;

  FC_HOST_DEVICE int num_groups() const { return (total_heads + heads_per_group - 1) / heads_per_group; }
  // Groups [0, paired_groups()) are paired; the rest are not.
  FC_HOST_DEVICE int paired_groups() const { return paired ? num_groups() - 1 : 0; }
  // Units of one paired group (always a full group: only the last group may have fewer heads).
  FC_HOST_DEVICE int units_per_paired_group() const {
    return (m_units / 2) * heads_per_group + (m_units % 2) * ((heads_per_group + 1) / 2);
  }
  FC_HOST_DEVICE int num_units() const {
    const int paired_heads = paired_groups() * heads_per_group;
    return paired_groups() * units_per_paired_group() + (total_heads - paired_heads) * m_units;
  }

  // Tile `sub` (0 or 1) of unit `u` (0 <= u < num_units()); false when the unit has no such tile.
  FC_HOST_DEVICE bool tile(int u, int sub, TileSlot& out) const {
    const int paired_units = paired ? paired_groups() * units_per_paired_group() : 0;
    if (paired && u < paired_units) {
      const int group = u / units_per_paired_group();
      const int within = u - group * units_per_paired_group();
      const int first_head = group * heads_per_group;
      const int pair_units = (m_units / 2) * heads_per_group;
      if (within < pair_units) {  // (block m_units-1-p, block p) of one head
        const int p = within / heads_per_group;
        out.head_index = first_head + (within - p * heads_per_group);
        out.m_unit = sub == 0 ? m_units - 1 - p : p;
        return sub <= 1;
      }
      const int head = 2 * (within - pair_units) + sub;  // the middle blocks of two heads
      out.head_index = first_head + head;
      out.m_unit = m_units / 2;
      return sub <= 1 && head < heads_per_group;
    }
    if (sub != 0) return false;
    // Unpaired groups, from group paired_groups() on: longest first, heads interleaved.
    const int t = u - paired_units;
    const int group_tiles = heads_per_group * m_units;
    const int group = t / group_tiles;
    const int first_head = (paired_groups() + group) * heads_per_group;
    const int group_heads = total_heads - first_head < heads_per_group ? total_heads - first_head : heads_per_group;
    const int within = t - group * group_tiles;
    out.m_unit = m_units - 1 - within / group_heads;
    out.head_index = first_head + within % group_heads;
    return true;
  }
};

}  // namespace flashcore::attn
