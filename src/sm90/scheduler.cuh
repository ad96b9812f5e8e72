// Persistent tile scheduler: grid = min(#tiles, #SMs). A tile is (query block of kBlockM rows,
// query head, batch entry).
//
// Varlen (kVarlen: cu_seqlens_q/k or seqused_k): the grid of tiles is laid over max_seqlen_q
// (num_m_blocks = ceil(max_seqlen_q / kBlockM) for every sequence); tile() resolves the tile's
// sequence (its token offsets, lengths and mask), and a tile whose query block starts past its
// sequence's end has no rows: producer and consumers both skip it (has_rows), so they stay in step.
// Dense (!kVarlen): every tile's sequence is the launch's: seqlen_q() and mask() read KernelParams
// (constant bank) and nothing per sequence is resolved or held in registers.
//
// Tile order (the sequence index t):
//   * heads are taken in groups of `heads_per_group` (b*Hq + h consecutive), sized on the host so
//     one group's K/V fit comfortably in L2: the CTAs running at the same time share them;
//   * inside a group, query blocks go from the last to the first (longest first: with causal masks
//     the last query blocks see the most keys), all heads of the group at one query block before
//     the next block.
// Assignment: wave w (tiles w*grid .. w*grid + grid - 1) goes to CTAs in snake order (even waves
// CTA c gets offset c, odd waves offset grid-1-c), so a CTA that got one of the longest tiles of a
// wave gets one of the shortest of the next: a static approximation of longest-processing-time
// scheduling that needs no global counter (and so stays correct with concurrent launches).
// Cluster kernel (kClusterM = 2): the unit of that order is a pair of adjacent query blocks of one
// head, and the "CTAs" are clusters: both CTAs of a cluster walk the same pairs, rank r taking query
// block 2p + r of pair p (KernelParams::num_tiles counts pairs; num_m_blocks is even).
#pragma once

#include "attention/mask.hpp"
#include "common/host_device.hpp"
#include "sm90/params.hpp"

namespace flashcore::sm90 {

// A query tile: (query block, query head, batch entry), and where its sequence lies in the tensor
// maps (q_offset / k_offset: its first query / key token row; map_batch(): the maps' batch
// coordinate). Dense kernels (kVarlen false): the launch's sequence, offsets 0; nothing more is held
// per tile.
template <bool kVarlen>
struct Tile {
  int m_block = 0;
  int head = 0;
  int batch = 0;
  static constexpr int q_offset = 0;
  static constexpr int k_offset = 0;
  FC_DEVICE int map_batch() const { return batch; }
};
// kVarlen: the tile's own sequence (read seqlen_q / mask through the scheduler's seqlen_q() / mask()).
template <>
struct Tile<true> {
  int m_block = 0;
  int head = 0;
  int batch = 0;
  int q_offset = 0;           // varlen: cu_seqlens_q[b]; seqused_k alone: 0
  int k_offset = 0;           // varlen: cu_seqlens_k[b]
  int packed_batch = 0;       // varlen: 0 (the maps have no batch); seqused_k alone: batch
  int seqlen_q = 0;           // this sequence's query rows
  attn::VisibilityMask mask;  // this sequence's mask; mask.seqlen_k = its keys (seqused_k applied)
  FC_DEVICE int map_batch() const { return packed_batch; }
};

// The KV blocks [n_first, n_last] a query tile visits (inclusive; empty when n_last < n_first).
struct KvRange {
  int n_first = 0;
  int n_last = -1;
  FC_DEVICE bool empty() const { return n_last < n_first; }
  FC_DEVICE int count() const { return n_last - n_first + 1; }
};

template <int kBlockM, int kBlockN, bool kVarlen, int kClusterM = 1>
struct StaticPersistentScheduler {
  const KernelParams& params;
  int wave = 0;
  int tile_index;  // sequence index t of the current tile (may be >= num_tiles in the last wave)

  FC_DEVICE explicit StaticPersistentScheduler(const KernelParams& p) : params(p) { tile_index = slot(0); }

  // The scheduling units: CTAs, or clusters of kClusterM CTAs (a cluster's CTAs are consecutive).
  FC_DEVICE static int units() { return (int)(gridDim.x / kClusterM); }
  FC_DEVICE static int unit() { return (int)(blockIdx.x / kClusterM); }
  FC_DEVICE static int rank_in_cluster() { return (int)(blockIdx.x % kClusterM); }

  FC_DEVICE int slot(int w) const {
    const int offset = (w & 1) ? units() - 1 - unit() : unit();
    return w * units() + offset;
  }
  // More waves to visit. In the last wave some CTAs get no tile: has_tile() is false for them.
  FC_DEVICE bool valid() const { return wave * units() < params.num_tiles; }
  FC_DEVICE bool has_tile() const { return tile_index < params.num_tiles; }
  FC_DEVICE void next() { tile_index = slot(++wave); }

  using TileT = Tile<kVarlen>;

  FC_DEVICE TileT tile() const {
    const int m_units = (int)((unsigned)params.num_m_blocks / kClusterM);  // query blocks, or pairs of them
    const int group_tiles = params.heads_per_group * m_units;
    const int group = tile_index / group_tiles;
    const int first_head = group * params.heads_per_group;  // b * Hq + h of the group's first head
    const int total_heads = params.batch * params.heads_q;
    const int group_heads = min(params.heads_per_group, total_heads - first_head);
    const int within = tile_index - group * group_tiles;
    TileT t;
    t.m_block = (m_units - 1 - within / group_heads) * kClusterM + rank_in_cluster();
    const int head_index = first_head + within % group_heads;
    t.head = head_index % params.heads_q;
    t.batch = head_index / params.heads_q;
    if constexpr (kVarlen) {
      const attn::SequenceExtent seq = attn::sequence_extent(params.cu_seqlens_q, params.cu_seqlens_k,
                                                             params.seqused_k, params.seqlen_q, params.seqlen_k, t.batch);
      t.q_offset = (int)seq.q_start;
      t.k_offset = (int)seq.k_start;
      t.packed_batch = params.cu_seqlens_q != nullptr ? 0 : t.batch;  // varlen: q and k are both packed
      t.seqlen_q = seq.seqlen_q;
      t.mask = attn::mask_for_lengths(params.mask, params.mask_align, seq.seqlen_q, seq.seqlen_k);
    }
    return t;
  }

  // The tile's sequence: its query rows and its mask (mask.seqlen_k = its keys).
  FC_DEVICE static int seqlen_q(const KernelParams& p, const TileT& t) {
    if constexpr (kVarlen) return t.seqlen_q;
    else return p.seqlen_q;
  }
  FC_DEVICE static const attn::VisibilityMask& mask(const KernelParams& p, const TileT& t) {
    if constexpr (kVarlen) return t.mask;
    else return p.mask;
  }

  // False for a varlen tile past its sequence's last query row (nothing to load or store).
  FC_DEVICE static bool has_rows(const TileT& t) {
    if constexpr (kVarlen) return t.m_block * kBlockM < t.seqlen_q;
    else return true;
  }

  // Union of the visible keys of the tile's rows (contiguous because each row's window is an
  // interval sliding by one key per row), in KV blocks.
  FC_DEVICE KvRange kv_range(const TileT& t) const {
    KvRange r;
    const attn::VisibilityMask& m = mask(params, t);
    const int row_first = t.m_block * kBlockM;
    const int row_last = min(row_first + kBlockM, seqlen_q(params, t)) - 1;
    const int key_first = m.first_key(row_first);
    const int key_last = m.last_key(row_last);
    if (key_last < key_first) return r;  // also covers Sk == 0 (last_key < 0)
    r.n_first = key_first / kBlockN;
    r.n_last = key_last / kBlockN;
    return r;
  }
};

// The scheduler of a kernel (Traits: kernel_traits.cuh).
template <class Traits>
using TileScheduler = StaticPersistentScheduler<Traits::kBlockM, Traits::kBlockN, Traits::kVarlen, Traits::kClusterM>;

}  // namespace flashcore::sm90
