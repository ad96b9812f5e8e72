// Persistent tile scheduler: grid = min(#units, #SMs). A tile is (query block of kBlockM rows,
// query head, batch entry).
//
// Varlen (kVarlen: cu_seqlens_q/k or seqused_k): the grid of tiles is laid over max_seqlen_q
// (num_m_blocks = ceil(max_seqlen_q / kBlockM) for every sequence); tile() resolves the tile's
// sequence (its token offsets, lengths and mask), and a tile whose query block starts past its
// sequence's end has no rows: the producer skips it (has_rows) and never hands it to the consumers.
// Dense (!kVarlen): every tile's sequence is the launch's: seqlen_q() and mask() read KernelParams
// (constant bank) and nothing per sequence is resolved or held in registers.
//
// Tile order: attention/tile_order.hpp (head groups sized for L2; longest first; causal calls in
// balanced pairs of tiles). It is a sequence of units of one or two tiles.
// Assignment (dense kernels; the kVarlen ones hand units out dynamically, TileQueue below): wave w
// (units w*grid .. w*grid + grid - 1) goes to CTAs in snake order (even waves CTA c gets offset c,
// odd waves offset grid-1-c), so a CTA that got one of the longest units of a
// wave gets one of the shortest of the next: a static approximation of longest-processing-time
// scheduling that needs no global counter (and so stays correct with concurrent launches). A CTA
// runs both tiles of a paired unit before the next wave.
// Cluster kernel (kClusterM = 2): the unit of that order is a pair of adjacent query blocks of one
// head, and the "CTAs" are clusters: both CTAs of a cluster walk the same pairs, rank r taking query
// block 2p + r of pair p (KernelParams::num_units counts pairs; num_m_blocks is even).
// Stream-K tail (kStreamK: dense calls whose tiles are all equally long; attention/stream_k.hpp): the waves
// cover units [0, wave_units); after them each CTA walks the items of its share of the tail, parts
// of tiles included (kv_range() narrows the tile's blocks, role() says how its epilogue ends).
#pragma once

#include "attention/mask.hpp"
#include "common/host_device.hpp"
#include "ptx/mbarrier.hpp"
#include "sm90/fwd/params.hpp"
#include "attention/stream_k.hpp"
#include "attention/tile_order.hpp"

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

// kPartialBlockFirst (the long tile shape's masked kernel, kernel_traits.cuh): when Sq is not a
// multiple of kBlockM, the short query block is block 0 (rows [0, r), r = kBlockM - m_row_shift,
// KernelParams) instead of the last, and block m >= 1 holds rows [m * kBlockM - m_row_shift,
// (m + 1) * kBlockM - m_row_shift), so the last block ends at Sq. Under a causal mask block 0 sees
// the fewest keys and the last block every key: d128 causal S=16k (kBlockM 192) then computes its
// 128 rows nobody reads over one KV block instead of over all 16384 keys (1.5 % of the call's
// tensor work). Block 0 still runs kBlockM rows from row 0 (TMA box coordinates stay >= 0); its
// rows [r, kBlockM) belong to block 1: block 0 visits only the KV blocks of rows [0, r) and stores
// only those rows (rows_end).
template <int kBlockM, int kBlockN, bool kVarlen, int kClusterM = 1, bool kStreamK = false,
          bool kPartialBlockFirst = false>
struct StaticPersistentScheduler {
  static_assert(!kPartialBlockFirst || (!kVarlen && kClusterM == 1 && !kStreamK),
                "the partial block goes first in one-CTA dense kernels without a stream-K tail");
  const KernelParams& params;
  // kStreamK: this CTA's items of the tail (shared memory, filled by the kernel shell). After the
  // waves, `wave` counts on through them (item wave - sk_first_wave), so walking the tail holds no
  // register beyond the waves' two (the producer has 24).
  const attn::StreamKList* tail_list;
  int wave = 0;
  int unit_index;   // the current unit of the order (may be >= wave_units in the last wave)
  int sub = 0;      // which tile of the unit (0, or 1 for the second tile of a pair)

  FC_DEVICE explicit StaticPersistentScheduler(const KernelParams& p, const attn::StreamKList* list = nullptr)
      : params(p), tail_list(list) {
    unit_index = slot(0);
  }

  // The scheduling units: CTAs, or clusters of kClusterM CTAs (a cluster's CTAs are consecutive).
  FC_DEVICE static int units() { return (int)(gridDim.x / kClusterM); }
  FC_DEVICE static int unit() { return (int)(blockIdx.x / kClusterM); }
  FC_DEVICE static int rank_in_cluster() { return (int)(blockIdx.x % kClusterM); }

  // Pairs only in dense one-CTA kernels (the host sets pair_tiles only for causal
  // calls); elsewhere `sub` stays 0 and the compiler drops the pair arithmetic.
  static constexpr bool kMayPair = kClusterM == 1 && !kVarlen;

  // The launch's order (the launcher sizes the grid from it too). On the device its fields come
  // from the constant bank, so no registers are held across the loops.
  static FC_HOST_DEVICE attn::TileOrder order_of(const KernelParams& p) {
    attn::TileOrder o;
    o.m_units = (int)((unsigned)p.num_m_blocks / kClusterM);
    o.total_heads = p.batch * p.heads_q;
    o.heads_per_group = p.heads_per_group;
    o.paired = kMayPair && p.pair_tiles;
    return o;
  }
  FC_DEVICE attn::TileOrder order() const { return order_of(params); }

  FC_DEVICE int slot(int w) const {
    const int offset = (w & 1) ? units() - 1 - unit() : unit();
    return w * units() + offset;
  }
  // The stream-K tail of a launch (inactive when wave_units == num_units); the kernel shell fills
  // each CTA's StreamKList from it.
  FC_DEVICE static attn::StreamKTail tail_of(const KernelParams& p) {
    attn::StreamKTail t;
    t.first_unit = p.wave_units;
    t.num_units = p.num_units;
    t.blocks_per_unit = p.sk_blocks_per_unit;
    t.grid_units = units();
    return t;
  }
  FC_DEVICE bool in_waves() const {
    if constexpr (kStreamK) {
      if (params.sk_blocks_per_unit > 0) return wave < params.sk_first_wave;
    }
    return wave * units() < params.wave_units;
  }
  FC_DEVICE bool in_tail() const { return kStreamK && !in_waves(); }
  FC_DEVICE const attn::StreamKWork& tail_item() const { return tail_list->work[wave - params.sk_first_wave]; }

  // More waves (then tail items) to visit. In the last wave some CTAs get no unit: has_tile() is
  // false for them.
  FC_DEVICE bool valid() const {
    if constexpr (kStreamK) {
      if (params.sk_blocks_per_unit > 0) return wave - params.sk_first_wave < tail_list->count;
    }
    return wave * units() < params.wave_units;
  }
  FC_DEVICE bool has_tile() const {
    if (in_tail()) return true;
    attn::TileSlot s;
    return unit_index < params.wave_units && order().tile(unit_index, sub, s);
  }
  // The unit's second tile, if it has one, else the next wave's unit (or the next tail item).
  FC_DEVICE void next() {
    if constexpr (kMayPair) {
      attn::TileSlot second;
      if (sub == 0 && unit_index < params.num_units && order().tile(unit_index, 1, second)) {
        sub = 1;
        return;
      }
    }
    sub = 0;
    unit_index = slot(++wave);
  }

  using TileT = Tile<kVarlen>;

  // The current tile (after has_tile() returned true).
  FC_DEVICE TileT tile() const {
    if (in_tail()) return tile_of(params, tail_item().unit, 0);
    return tile_of(params, unit_index, sub);
  }
  // How the current tile's epilogue ends: kWholeTile in the waves; a tail item's role.
  FC_DEVICE attn::TileRole role() const { return in_tail() ? tail_item().role : attn::TileRole::kWholeTile; }

  // Tile `sub` of unit `unit` of the launch's order (it must exist). Also what the kVarlen kernels'
  // dynamic handout (TileQueue, below) resolves a unit index with.
  FC_DEVICE static TileT tile_of(const KernelParams& params, int unit, int sub) {
    attn::TileSlot slot_now;
    order_of(params).tile(unit, sub, slot_now);
    TileT t;
    t.m_block = slot_now.m_unit * kClusterM + rank_in_cluster();
    t.head = slot_now.head_index % params.heads_q;
    t.batch = slot_now.head_index / params.heads_q;
    if constexpr (kVarlen) {
      const attn::SequenceExtent seq =
          attn::sequence_extent(params.cu_seqlens_q, params.cu_seqlens_k, params.seqused_k, params.seqlen_q,
                                params.seqlen_k, params.total_q, params.total_k, t.batch);
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

  // The tile's first query row in its sequence.
  FC_DEVICE static int row_first(const KernelParams& p, const TileT& t) {
    if constexpr (kPartialBlockFirst) return t.m_block == 0 ? 0 : t.m_block * kBlockM - p.m_row_shift;
    else return t.m_block * kBlockM;
  }
  // One past the last row the tile owns (stores, and asks keys for): its sequence's end, or r for a
  // kPartialBlockFirst kernel's block 0.
  FC_DEVICE static int rows_end(const KernelParams& p, const TileT& t) {
    if constexpr (kPartialBlockFirst) return t.m_block == 0 ? kBlockM - p.m_row_shift : p.seqlen_q;
    else return seqlen_q(p, t);
  }

  // False for a varlen tile past its sequence's last query row (nothing to load or store).
  FC_DEVICE static bool has_rows(const TileT& t) {
    if constexpr (kVarlen) return t.m_block * kBlockM < t.seqlen_q;
    else return true;
  }

  // Union of the visible keys of the tile's rows (contiguous because each row's window is an
  // interval sliding by one key per row), in KV blocks. A tail item: its part of them (blocks are
  // visited from n_last down, so visit position j is block n_last - j).
  FC_DEVICE KvRange kv_range(const TileT& t) const {
    return in_tail() ? part_of(tail_item()) : kv_range_of(params, t);
  }
  // A tail item's blocks of its tile.
  FC_DEVICE static KvRange part_of(const attn::StreamKWork& w) {
    KvRange r;
    r.n_first = w.n_first;
    r.n_last = w.n_last;
    return r;
  }
  FC_DEVICE static KvRange kv_range_of(const KernelParams& params, const TileT& t) {
    KvRange r;
    const attn::VisibilityMask& m = mask(params, t);
    const int row_first = StaticPersistentScheduler::row_first(params, t);
    const int row_last = min(row_first + kBlockM, rows_end(params, t)) - 1;
    const int key_first = m.first_key(row_first);
    const int key_last = m.last_key(row_last);
    if (key_last < key_first) return r;  // also covers Sk == 0 (last_key < 0)
    r.n_first = key_first / kBlockN;
    r.n_last = key_last / kBlockN;
    return r;
  }
};

// kVarlen kernels: dynamic tile handout. A varlen call's tiles differ in length from sequence to
// sequence, and the tiles of the order past a shorter sequence's rows are empty, so the static
// waves above balance badly (H200, d128 bf16 causal, batch of 8 lengths 512-4096: 470 TFLOPS with
// the L2 head groups, 523 with one head per group; a static model of the waves put them at 0.88 and
// 0.96 of perfect balance, a greedy handout at 0.99). Instead CTA c starts on unit c, and its
// producer claims every further unit from a global counter (claim_unit; the next claim is in flight
// while the current tile loads), skips units without rows, and hands the others to its consumers
// through a queue of kSlots tile indices in shared memory; -1 says the order is exhausted.
//   tile_full[i]   producer -> consumers: tile_unit[i] holds a unit (1 arrival, release: the write
//                  of tile_unit[i] before it is visible to the waiters)
//   tile_empty[i]  consumers -> producer: every consumer warp read tile_unit[i] (kConsumerWarps
//                  arrivals), so the producer may overwrite it
FC_DEVICE int claim_unit(int* counter) { return atomicAdd(counter, 1) + (int)gridDim.x; }

template <class Storage, int kSlots>
struct TileQueue {
  Storage& smem;
  ptx::PipelineState<kSlots> slot{};

  // Producer: hand out `unit` (-1: none left). Every producer lane waits; `leader` writes.
  FC_DEVICE void push(int unit, bool leader) {
    ptx::mbarrier_wait(&smem.tile_empty[slot.index], slot.phase ^ 1u);
    if (leader) {
      smem.tile_unit[slot.index] = unit;
      ptx::mbarrier_arrive(&smem.tile_full[slot.index]);
    }
    slot.advance();
  }
  // Consumer warp: the next unit (-1: none left).
  FC_DEVICE int pop(int lane) {
    ptx::mbarrier_wait(&smem.tile_full[slot.index], slot.phase);
    const int unit = smem.tile_unit[slot.index];
    __syncwarp();  // every lane read the slot before its warp frees it
    if (lane == 0) ptx::mbarrier_arrive(&smem.tile_empty[slot.index]);
    slot.advance();
    return unit;
  }
};

// The scheduler of a kernel (Traits: kernel_traits.cuh).
template <class Traits>
using TileScheduler =
    StaticPersistentScheduler<Traits::kBlockM, Traits::kBlockN, Traits::kVarlen, Traits::kClusterM, Traits::kStreamK,
                              Traits::kPartialBlockFirst>;

}  // namespace flashcore::sm90
