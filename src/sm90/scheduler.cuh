// Persistent tile scheduler: grid = min(#tiles, #SMs); CTA c takes tiles c, c + grid, c + 2 grid ...
// A tile is (query block of kBlockM rows, query head, batch entry).
//
// Order: tiles of one (batch, head) are consecutive so the CTAs running at the same time share that
// head's K/V in L2; inside a head, query blocks go from the last to the first. With causal masks the
// last query blocks see the most keys, so each wave of CTAs starts with its longest tiles.
#pragma once

#include "common/host_device.hpp"
#include "sm90/params.hpp"

namespace flashcore::sm90 {

struct Tile {
  int m_block = 0;
  int head = 0;
  int batch = 0;
};

// The KV blocks [n_first, n_last] a query tile visits (inclusive; empty when n_last < n_first).
struct KvRange {
  int n_first = 0;
  int n_last = -1;
  FC_DEVICE bool empty() const { return n_last < n_first; }
  FC_DEVICE int count() const { return n_last - n_first + 1; }
};

template <int kBlockM, int kBlockN>
struct StaticPersistentScheduler {
  const KernelParams& params;
  int tile_index;

  FC_DEVICE explicit StaticPersistentScheduler(const KernelParams& p) : params(p), tile_index(blockIdx.x) {}

  FC_DEVICE bool valid() const { return tile_index < params.num_tiles; }
  FC_DEVICE void next() { tile_index += gridDim.x; }

  FC_DEVICE Tile tile() const {
    Tile t;
    const int head_index = tile_index / params.num_m_blocks;  // b * Hq + h
    t.m_block = params.num_m_blocks - 1 - tile_index % params.num_m_blocks;
    t.head = head_index % params.heads_q;
    t.batch = head_index / params.heads_q;
    return t;
  }

  // Union of the visible keys of the tile's rows (contiguous because each row's window is an
  // interval sliding by one key per row), in KV blocks.
  FC_DEVICE KvRange kv_range(const Tile& t) const {
    KvRange r;
    const int row_first = t.m_block * kBlockM;
    const int row_last = min(row_first + kBlockM, params.seqlen_q) - 1;
    const int key_first = params.mask.first_key(row_first);
    const int key_last = params.mask.last_key(row_last);
    if (key_last < key_first) return r;  // also covers Sk == 0 (last_key < 0)
    r.n_first = key_first / kBlockN;
    r.n_last = key_last / kBlockN;
    return r;
  }
};

}  // namespace flashcore::sm90
