// The sm90 forward mainloop: a TMA producer and wgmma consumers around a shared-memory ring.
//
// Barriers (mbarriers in SharedStorage; "arrivals" = expected arrive count per phase):
//   q_full[b]   producer -> consumers   Q tile landed in buffer b (1 arrival + Q bytes of TMA
//                                       transactions); tiles take the kQStages buffers in turn
//   q_empty[b]  consumers -> producer   every consumer warp finished its last S = Q K^T of the tile
//                                       held in b (kConsumerWarps arrivals), so b may be overwritten
//   k_full[s]   producer -> consumers   K block in stage s landed (1 arrival + K bytes)
//   k_empty[s]  consumers -> producer   every consumer warp's S wgmma that read stage s completed
//   v_full[s], v_empty[s]               the same for V and the O += P V wgmma
//   job_full[j], job_empty[j]           kVarlen, paged K/V in small pieces (params.paged_helpers):
//                                       producer warp -> helper warps, a block's box job in slot j
//                                       (32 arrivals: each lane after its writes), and back once every
//                                       helper lane has read it (32 kHelperWarps); PagedIssuers
// Cluster kernel (Traits::kClusterM = 2, dense non-causal calls): both CTAs of a cluster visit the
// same KV blocks in the same order. Each producer loads half of every K/V block's 64-column chunks
// and multicasts them into the same stage of both CTAs, so each k_full/v_full phase completes on the
// bytes of two TMA copies (its own half and the peer's); its producer still expects the whole
// block. A stage may be overwritten only when the consumers of BOTH CTAs released it, so every
// consumer warp arrives on k_empty/v_empty of both CTAs (kStageReleases arrivals per phase).
// Producer and consumers walk the same tile sequence and the same KV blocks, so their ring
// positions (PipelineState) stay in step without any other communication: the dense kernels each
// compute the static sequence (scheduler.cuh); in the kVarlen kernels the producer claims tiles
// from a global counter and hands each one to the consumers (tile_full / tile_empty, TileQueue).
//
// Named barriers (ping-pong, Schedule::kOverlapPingPong): kPingPongBarrier + w orders consumer
// warpgroup w's GEMM issue after the other warpgroup's, so one warpgroup's softmax runs while the
// other's GEMMs occupy the tensor cores.
#pragma once

#include <cuda.h>

#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "ptx/mma_sm80.hpp"
#include "ptx/tma.hpp"
#include "ptx/wgmma.hpp"
#include "sm90/common/gemm.cuh"
#include "sm90/common/tma.cuh"
#include "sm90/fwd/launch_args.hpp"
#include "sm90/fwd/params.hpp"
#include "sm90/fwd/scheduler.cuh"
#include "sm90/fwd/softmax.cuh"

namespace flashcore::sm90 {


template <class Traits, class Scheduler>
struct Producer {
  using Storage = typename Traits::SharedStorage;
  static constexpr int kBlockN = Traits::kBlockN;
  // The threads that run the producer (kernel.cuh): one (dense), or the producer warpgroup's first
  // warp (kVarlen), whose lanes help zero V tails (zero_v_tail) and issue paged pieces.
  static constexpr bool kWholeWarp = Traits::kVarlen;

  // Ring positions of the producer, carried from tile to tile.
  struct Rings {
    // K and V of a block go to the same stage index of their rings: one ring position for both
    // (fewer live registers in the 24-register producer).
    ptx::PipelineState<Traits::kStages> stage;
    ptx::PipelineState<Traits::kQStages> q_stage;
    uint32_t tail_phase = 0;  // kVarlen: v_tail's parity
  };

  // Every producer thread walks the tiles and waits on the barriers; the leader (lane 0) alone
  // arrives and issues TMA.
  static __device__ void run(Storage& smem, const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                             const CUtensorMap* tm_v, const KernelParams& params, int lane) {
    const bool leader = !kWholeWarp || lane == 0;
    if (leader) {
      ptx::tma_prefetch_descriptor(tm_q);
      ptx::tma_prefetch_descriptor(tm_k);
      ptx::tma_prefetch_descriptor(tm_v);
    }
    Rings rings;
    if constexpr (Traits::kVarlen) {
      // Dynamic handout (scheduler.cuh, TileQueue): this CTA's first unit, then claimed ones.
      TileQueue<Storage, Traits::kTileSlots> queue{smem};
      int unit = (int)blockIdx.x;  // the grid is at most num_units CTAs
      for (;;) {
        const bool more = unit < params.num_units;
        int next = 0;
        if (more && leader) next = claim_unit(params.tile_counter);  // in flight during this tile's loads
        if (!more) {
          queue.push(-1, leader);
          if (helpers_issue_pieces(params)) end_box_jobs(smem, lane);
          break;
        }
        const typename Scheduler::TileT tile = Scheduler::tile_of(params, unit, 0);
        if (Scheduler::has_rows(tile)) {
          queue.push(unit, leader);
          load_tile(smem, tm_q, tm_k, tm_v, params, tile, Scheduler::kv_range_of(params, tile), rings, lane);
        }
        unit = __shfl_sync(0xffffffffu, next, 0);
      }
    } else {
      // Dense: every tile has rows. The waves, then (kStreamK) this CTA's items of the tail.
      for (Scheduler sched(params); sched.in_waves(); sched.next()) {
        if (!sched.has_tile()) continue;
        const typename Scheduler::TileT tile = sched.tile();
        load_tile(smem, tm_q, tm_k, tm_v, params, tile, sched.kv_range(tile), rings, lane);
      }
      if constexpr (Traits::kStreamK) {
        for (int k = 0; k < smem.sk_list.count; ++k) {
          const attn::StreamKWork& work = smem.sk_list.work[k];
          load_tile(smem, tm_q, tm_k, tm_v, params, Scheduler::tile_of(params, work.unit, 0), Scheduler::part_of(work),
                    rings, lane);
        }
      }
    }
  }

  // Q, then the K/V blocks of one tile (the consumers walk the same tiles and blocks).
  static __device__ void load_tile(Storage& smem, const CUtensorMap* tm_q, const CUtensorMap* tm_k,
                                   const CUtensorMap* tm_v, const KernelParams& params,
                                   const typename Scheduler::TileT& tile, const KvRange& range, Rings& rings, int lane) {
    const bool leader = !kWholeWarp || lane == 0;
    if (range.empty()) return;  // the consumers skip this tile's mainloop too
    const int head_kv = tile.head / params.heads_per_kv;
    auto& q_stage = rings.q_stage;
    auto& stage = rings.stage;

    // Q: wait until the consumers' last S of the tile that last used this buffer completed
    // (q_empty; with two buffers that is the tile before the previous one, so this load overlaps
    // the previous tile's last blocks), then load. A waiter on an "empty" barrier starts at
    // parity 1, which a fresh barrier reports complete.
    ptx::mbarrier_wait(&smem.q_empty[q_stage.index], q_stage.phase ^ 1u);
    if (leader) {
      ptx::mbarrier_arrive_expect_tx(&smem.q_full[q_stage.index], Traits::kQBytes);
      tma_load_operand<Traits::kDqk, Traits::kBlockM>(smem.q[q_stage.index], tm_q, &smem.q_full[q_stage.index],
                                                      tile.q_offset + Scheduler::row_first(params, tile), tile.head,
                                                      tile.map_batch(), params.qk_per_chunk);
    }
    q_stage.advance();

    if constexpr (Traits::kVarlen) {
      if (params.pages.table != nullptr) {
        load_paged_blocks(smem, tm_k, tm_v, params, tile.batch, head_kv, tile.mask.seqlen_k, range, rings, lane);
        return;
      }
    }
    // K and V, last block first (the masked blocks of a causal tile come first).
    for (int n = range.n_last; n >= range.n_first; --n, stage.advance()) {
      // Stage reuse: wait until every consumer warp released the K (then V) block held there.
      ptx::mbarrier_wait(&smem.k_empty[stage.index], stage.phase ^ 1u);
      const int key_row = tile.k_offset + n * kBlockN;
      if (leader) {
        load_kv_block<Traits::kDqk, Traits::kKChunksPerCta>(smem.k[stage.index], tm_k, &smem.k_full[stage.index],
                                                             Traits::kKBytes, key_row, head_kv, tile.map_batch(),
                                                             params.qk_per_chunk);
      }

      ptx::mbarrier_wait(&smem.v_empty[stage.index], stage.phase ^ 1u);
      // kVarlen: keys past the sequence's end lie inside the k/v maps (a packed neighbour, or keys
      // past seqused_k); dense: past the maps' end, where TMA zero-fills.
      int keys_in_block = kBlockN;  // kVarlen: >= 1, the range ends at the sequence's last key
      if constexpr (Traits::kVarlen) keys_in_block = tile.mask.seqlen_k - n * kBlockN;
      if (keys_in_block < kBlockN) {
        load_v_zeroing_tail(smem, tm_v, stage.index, key_row, head_kv, tile.map_batch(), keys_in_block,
                            rings.tail_phase, lane, params.v_per_chunk);
        rings.tail_phase ^= 1u;
      } else if (leader) {
        load_kv_block<Traits::kDv, Traits::kVChunksPerCta>(smem.v[stage.index], tm_v, &smem.v_full[stage.index],
                                                            Traits::kVBytes, key_row, head_kv, tile.map_batch(),
                                                            params.v_per_chunk);
      }
    }
  }

  // One K or V block into its stage (full barrier `full` expects the whole block): the whole tile,
  // or in the cluster kernel this CTA's share of the chunks, multicast to both CTAs (whose calls are
  // never padded: plan.cpp).
  template <int kHeadDim, int kChunksPerCta>
  static __device__ void load_kv_block(uint16_t* dst, const CUtensorMap* map, uint64_t* full, uint32_t bytes,
                                       int key_row, int head_kv, int batch, bool per_chunk) {
    ptx::mbarrier_arrive_expect_tx(full, bytes);
    if constexpr (Traits::kClusterM > 1) {
      tma_load_operand_multicast<kChunksPerCta, kBlockN, Traits::kClusterM>(dst, map, full, key_row, head_kv, batch);
    } else {
      tma_load_operand<kHeadDim, kBlockN>(dst, map, full, key_row, head_kv, batch, per_chunk);
    }
  }

  // A V block that ends past its sequence's keys, with those rows inside the tensor map (a packed
  // neighbour's keys, or keys past seqused_k, which may hold anything): their P is 0, but 0 * NaN is
  // NaN, so rows [keys, kBlockN) are zeroed before the consumers may read the stage.
  //   v_tail   TMA -> producer warp: the block landed (1 arrival + V bytes), instead of v_full;
  //   then the warp zeroes the rows (zero_v_tail).
  static __device__ void load_v_zeroing_tail(Storage& smem, const CUtensorMap* tm_v, int stage, int key_row,
                                             int head_kv, int batch, int keys, uint32_t tail_phase, int lane,
                                             bool per_chunk) {
    if (lane == 0) {
      ptx::mbarrier_arrive_expect_tx(&smem.v_tail, Traits::kVBytes);
      tma_load_operand<Traits::kDv, kBlockN>(smem.v[stage], tm_v, &smem.v_tail, key_row, head_kv, batch, per_chunk);
    }
    zero_v_tail(smem, stage, keys, tail_phase, lane);
  }

  // After the copies of V stage `stage` completed v_tail: the warp zeroes rows [keys, kBlockN),
  // fences its generic writes for the async proxy (wgmma reads them), and lane 0 completes v_full
  // with a plain arrival (v_full expects 1 arrival, no bytes).
  static __device__ void zero_v_tail(Storage& smem, int stage, int keys, uint32_t tail_phase, int lane) {
    ptx::mbarrier_wait(&smem.v_tail, tail_phase);
    // (32-bit shared addresses keep this within the producer's 24 registers.)
    const uint32_t v_addr = ptx::smem_addr(smem.v[stage]);
    if constexpr (Traits::kKvRowGroups) {
      // [kBlockN/8][Dv/64][8][64]: the 8-row groups wholly past the keys are one contiguous byte
      // range; in the group holding row `keys`, its rows from there on in each chunk's atom another.
      const uint32_t end = v_addr + kBlockN / 8 * Traits::kVGroupBytes;
      for (uint32_t a = v_addr + (keys + 7) / 8 * Traits::kVGroupBytes + lane * 16; a < end; a += 32 * 16) {
        ptx::st_shared_zero16(a);
      }
      if (keys % 8 != 0) {
        const uint32_t group = v_addr + keys / 8 * Traits::kVGroupBytes;
#pragma unroll
        for (int c = 0; c < Traits::kDvPad / 64; ++c) {
          const uint32_t atom = group + c * Traits::kKvChunkBytes, atom_end = atom + 8 * Traits::kRowBytes;
          for (uint32_t a = atom + keys % 8 * Traits::kRowBytes + lane * 16; a < atom_end; a += 32 * 16) {
            ptx::st_shared_zero16(a);
          }
        }
      }
    } else {
      // [Dv/64][kBlockN][64]: rows `keys`.. of each 64-column chunk are one contiguous byte range.
#pragma unroll
      for (int c = 0; c < Traits::kDvPad / 64; ++c) {
        const uint32_t chunk = v_addr + c * kBlockN * Traits::kRowBytes;
        const uint32_t end = chunk + kBlockN * Traits::kRowBytes;
        for (uint32_t a = chunk + keys * Traits::kRowBytes + lane * 16; a < end; a += 32 * 16) ptx::st_shared_zero16(a);
      }
    }
    ptx::fence_proxy_async_smem();  // these generic writes -> the consumers' wgmma (async proxy) reads
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&smem.v_full[stage]);
  }

  // Paged K/V (params.pages): the tile's blocks, last first, in pieces of params.page_rows rows,
  // piece i of a block by lane i (kBlockN / page_rows <= 32: launch_kernel.cuh). Two things keep
  // the paged bookkeeping (table reads, divisions) off the path the consumers wait on:
  //   * K runs one block ahead of V: block n - 1's K is issued before block n's V, whose stage
  //     frees later (P V retires after S), so a K never waits behind a V stage and the producer's
  //     work between the two (with a two-stage ring that delay lands on the consumers' next S);
  //   * a piece's table entry is read one block before its K is issued.
  static __device__ void load_paged_blocks(Storage& smem, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                                           const KernelParams& params, int batch, int head_kv, int seqlen_k,
                                           const KvRange& range, Rings& rings, int lane) {
    static_assert(Traits::kVarlen, "paged K/V: the varlen kernels' producer warp issues the pieces");
    // This lane's piece of block n: its first key row, or -1 when the block's keys end before it.
    auto piece_row = [&](int n) {
      const int offset = lane * params.page_rows, row = n * kBlockN + offset;
      return n >= range.n_first && offset < kBlockN && row < seqlen_k ? row : -1;
    };
    auto entry_of = [&](int row) { return row < 0 ? 0 : params.pages.slot_entry(batch, params.page_div.div(row)); };
    auto piece_of = [&](int row, int entry) {
      return PagedPiece{row < 0 ? 0 : int(params.page_div.mod(row)), params.pages.page_of(entry), row >= 0};
    };
    ptx::PipelineState<Traits::kStages> k_stage = rings.stage;
    PagedPiece k_piece = piece_of(piece_row(range.n_last), entry_of(piece_row(range.n_last)));
    load_paged_k(smem, tm_k, params, head_kv, seqlen_k - range.n_last * kBlockN, k_piece, k_stage, lane);
    k_stage.advance();
    int row = piece_row(range.n_last - 1);
    int entry = entry_of(row);
    for (int n = range.n_last; n >= range.n_first; --n, rings.stage.advance()) {
      const PagedPiece v_piece = k_piece;
      if (n > range.n_first) {
        k_piece = piece_of(row, entry);
        row = piece_row(n - 2);
        entry = entry_of(row);  // in flight until block n - 2's K
        load_paged_k(smem, tm_k, params, head_kv, seqlen_k - (n - 1) * kBlockN, k_piece, k_stage, lane);
        k_stage.advance();
      }
      load_paged_v(smem, tm_v, params, head_kv, seqlen_k - n * kBlockN, v_piece, rings, lane);
    }
  }

  // This lane's piece of one paged block: its first row inside its page, the page, whether it has one.
  struct PagedPiece {
    int in_page;
    int page;
    bool mine;
  };
  // Whether the helper warps issue the paged pieces (PagedIssuers); false at compile time in the
  // kernels built without them.
  static __device__ bool helpers_issue_pieces(const KernelParams& params) {
    return Traits::kPagedHelpers && params.paged_helpers;
  }
  // The helper warps' last job (params.paged_helpers): they return.
  static __device__ void end_box_jobs(Storage& smem, int lane) {
    const uint32_t slot = next_job_slot(smem);
    if (lane == 0) smem.box_job[slot].is_v = -1;
    ptx::mbarrier_arrive(&smem.job_full[slot]);
    job_handed_out(smem, lane);
  }
  // The next job's slot, once the helpers have released it. The count of jobs handed out lives in
  // shared memory: a ring position in registers made the d64 producer spill.
  static __device__ uint32_t next_job_slot(Storage& smem) {
    const uint32_t count = smem.jobs_handed_out;
    const uint32_t slot = count % Traits::kBoxJobSlots;
    ptx::mbarrier_wait(&smem.job_empty[slot], ((count / Traits::kBoxJobSlots) & 1u) ^ 1u);
    return slot;
  }
  static __device__ void job_handed_out(Storage& smem, int lane) {
    __syncwarp();  // every lane has read the count
    if (lane == 0) ++smem.jobs_handed_out;
    __syncwarp();
  }

  // Rows a paged block loads for its first `keys` keys (keys >= 1; more than kBlockN: the block is
  // whole): whole pieces. Pieces wholly past the keys are not loaded: those K rows are masked (their
  // scores become -inf whatever the stage held) and V rows [keys, kBlockN) are zeroed (zero_v_tail),
  // as are the rows of a loaded piece past the keys.
  static __device__ uint32_t paged_rows_loaded(const KernelParams& params, int keys) {
    if (keys >= kBlockN) return uint32_t(kBlockN);  // every block but a sequence's last: no division
    return uint32_t((keys + params.page_rows - 1) / params.page_rows * params.page_rows);
  }
  // Elements from a tile's start to piece `lane`: inside each 64-column chunk, or with row groups
  // (kPad / 64 chunks of every row) from the tile's start.
  template <int kPad>
  static __device__ uint32_t piece_offset(const KernelParams& params, int lane) {
    return uint32_t(lane * params.page_rows) * (Traits::kKvRowGroups ? uint32_t(kPad) : 64u);
  }
  // A piece's first row group in the row-group map's pool-wide coordinate (tma.cuh).
  static __device__ int piece_row_group(const KernelParams& params, int page, int in_page) {
    return page * (params.pages.page_size / 8) + in_page / 8;
  }
  static __device__ void load_paged_k(Storage& smem, const CUtensorMap* tm_k, const KernelParams& params, int head_kv,
                                      int keys, const PagedPiece& piece, const ptx::PipelineState<Traits::kStages>& stage,
                                      int lane) {
    ptx::mbarrier_wait(&smem.k_empty[stage.index], stage.phase ^ 1u);
    issue_paged_pieces<Traits::kDqkPad>(smem, smem.k[stage.index], tm_k, &smem.k_full[stage.index], paged_rows_loaded(params, keys),
                                        piece, head_kv, params, 0, lane);
  }
  static __device__ void load_paged_v(Storage& smem, const CUtensorMap* tm_v, const KernelParams& params, int head_kv,
                                      int keys, const PagedPiece& piece, Rings& rings, int lane) {
    const int stage = rings.stage.index;
    ptx::mbarrier_wait(&smem.v_empty[stage], rings.stage.phase ^ 1u);
    if (keys < kBlockN) {
      issue_paged_pieces<Traits::kDvPad>(smem, smem.v[stage], tm_v, &smem.v_tail, paged_rows_loaded(params, keys), piece,
                                         head_kv, params, 1, lane);
      zero_v_tail(smem, stage, keys, rings.tail_phase, lane);
      rings.tail_phase ^= 1u;
    } else {
      issue_paged_pieces<Traits::kDvPad>(smem, smem.v[stage], tm_v, &smem.v_full[stage], uint32_t(kBlockN), piece, head_kv,
                                         params, 1, lane);
    }
  }
  // Lane 0 expects the bytes of `rows` rows of every chunk on `full` before any box can complete
  // on it; then the pieces (`mine`: the block's keys reach them) are copied into `tile`, piece i at
  // row i * page_rows: with row groups one 5-D box per piece; else into every 64-column chunk of
  // [kPad/64][kBlockN][64], one 5-D box per piece when the piece is the whole block
  // (params.paged_whole_blocks), else a box per chunk. Issued by the lane that holds the piece or,
  // with params.paged_helpers, handed with every lane's piece to the helper warps (PagedIssuers).
  template <int kPad>
  static __device__ void issue_paged_pieces(Storage& smem, uint16_t* tile, const CUtensorMap* map, uint64_t* full,
                                            uint32_t rows, const PagedPiece& piece, int head_kv,
                                            const KernelParams& params, int is_v, int lane) {
    if (lane == 0) ptx::mbarrier_arrive_expect_tx(full, rows * (kPad / 64) * Traits::kRowBytes);
    if (helpers_issue_pieces(params)) {
      const uint32_t slot = next_job_slot(smem);
      PagedBoxJob& job = smem.box_job[slot];
      if constexpr (Traits::kKvRowGroups) {
        job.page[lane] = piece_row_group(params, piece.page, piece.in_page);
      } else {
        job.page[lane] = piece.page;
        job.in_page[lane] = piece.in_page;
      }
      if (lane == 0) {
        job.dst = ptx::smem_addr(tile), job.barrier = ptx::smem_addr(full), job.is_v = is_v;
        job.rows = int(rows), job.head_kv = head_kv;
      }
      ptx::mbarrier_arrive(&smem.job_full[slot]);  // releases this lane's fields of the job
      job_handed_out(smem, lane);
      return;
    }
    __syncwarp();
    if (!piece.mine) return;
    uint16_t* dst = tile + piece_offset<kPad>(params, lane);
    if constexpr (Traits::kKvRowGroups) {
      ptx::tma_load_5d(dst, map, full, 0, 0, 0, piece_row_group(params, piece.page, piece.in_page), head_kv);
      return;
    }
    if (params.paged_whole_blocks) {
      ptx::tma_load_5d(dst, map, full, 0, piece.in_page, 0, head_kv, piece.page);
      return;
    }
#pragma unroll
    for (int c = 0; c < kPad / 64; ++c) {
      ptx::tma_load_4d(dst + c * kBlockN * 64, map, full, 64 * c, piece.in_page, head_kv, piece.page);
    }
  }
};

// The helper warps of paged K/V in small pieces (KernelParams::paged_helpers): a block of pieces
// of page_rows rows needs kBlockN / page_rows TMA boxes (row-group tiles), or that many per 64-column
// chunk, and the producer warp's lanes issuing more than kPagedHelperBoxesAbove of them one after
// another kept the consumers waiting (docs/design/decode.md). Warps
// 1..kHelperWarps of the producer warpgroup take the producer warp's jobs in order, box b of a
// block by lane b / kHelperWarps of helper warp b % kHelperWarps, so the boxes of a block issue from
// several warps at once. The producer warp has looked the pages up and set the bytes the barrier
// expects before it hands a job over.
template <class Traits>
struct PagedIssuers {
  using Storage = typename Traits::SharedStorage;
  static constexpr int kBlockN = Traits::kBlockN;

  static __device__ void run(Storage& smem, const CUtensorMap* tm_k, const CUtensorMap* tm_v, const KernelParams& params,
                             int helper, int lane) {
    for (ptx::PipelineState<Traits::kBoxJobSlots> slot;; slot.advance()) {
      ptx::mbarrier_wait(&smem.job_full[slot.index], slot.phase);
      const PagedBoxJob& job = smem.box_job[slot.index];
      const int is_v = job.is_v;
      if (is_v < 0) return;
      if (is_v) {
        issue<Traits::kDvPad>(job, tm_v, params.page_rows, helper, lane);
      } else {
        issue<Traits::kDqkPad>(job, tm_k, params.page_rows, helper, lane);
      }
      ptx::mbarrier_arrive(&smem.job_empty[slot.index]);  // this lane has read the job
    }
  }

  template <int kPad>
  static __device__ void issue(const PagedBoxJob& job, const CUtensorMap* map, int page_rows, int helper, int lane) {
    if constexpr (Traits::kKvRowGroups) {  // a box per piece, every chunk (Producer::issue_paged_pieces)
      const int pieces = job.rows / page_rows;
      for (int piece = helper + Traits::kHelperWarps * lane; piece < pieces; piece += 32 * Traits::kHelperWarps) {
        const uint32_t dst = job.dst + uint32_t(piece * page_rows * kPad * 2);
        ptx::tma_load_5d_addr(dst, map, job.barrier, 0, 0, 0, job.page[piece], job.head_kv);
      }
      return;
    }
    constexpr int kChunks = kPad / 64;
    const int boxes = job.rows / page_rows * kChunks;
    for (int box = helper + Traits::kHelperWarps * lane; box < boxes; box += 32 * Traits::kHelperWarps) {
      const int piece = box / kChunks, chunk = box % kChunks;
      const uint32_t dst = job.dst + uint32_t((chunk * kBlockN + piece * page_rows) * Traits::kRowBytes);
      ptx::tma_load_4d_addr(dst, map, job.barrier, 64 * chunk, job.in_page[piece], job.head_kv, job.page[piece]);
    }
  }
};

template <class Traits, class Scheduler>
struct Consumer {
  using Storage = typename Traits::SharedStorage;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  static constexpr int kAccS = Traits::kAccS;
  static constexpr int kAccO = Traits::kAccO;
  static constexpr int kRegsP = Traits::kRegsP;
  static constexpr int kRowBytes = Traits::kRowBytes;

  Storage& smem;
  const KernelParams& params;
  int warpgroup;    // 0 .. kConsumerWarpgroups-1: owns query rows [64 warpgroup, 64 warpgroup + 64) of a tile
  int lane, warp;   // warp inside the warpgroup
  ptx::PipelineState<Traits::kStages> k_state, v_state;
  ptx::PipelineState<Traits::kQStages> q_state;  // the current tile's Q buffer (advanced after its last Q K^T)
  // Cluster kernel: the peer CTA's shared::cluster address of any of this CTA's shared variables is
  // the variable's own address plus this (each CTA's window in the cluster's shared space is one
  // contiguous range, so mapa is the same shift for every offset). Set by begin().
  uint32_t peer_shift = 0;

  // ---- GEMM issue -----------------------------------------------------------------------------
  // S = Q K^T: A = this warpgroup's 64 rows of Q, B = the K block (sm90/common/gemm.cuh).
  __device__ void issue_qk(float* s, const uint16_t* k_tile) const {
    gemm_ss_overwrite<kBlockN, Traits::kDqk, kBlockM, kBlockN, Traits::kWgmmaType, Traits::kKvChunkBytes,
                      Traits::kKGroupBytes>(s, ptx::smem_addr(smem.q[q_state.index]) + warpgroup * 64 * kRowBytes,
                                            ptx::smem_addr(k_tile));
  }
  // O += P V: A = P from registers, B = the V block read MN-major.
  __device__ void issue_pv(float* o, const uint32_t* p, const uint16_t* v_tile) const {
    gemm_rs_accumulate<Traits::kDv, kBlockN, Traits::kWgmmaType, Traits::kKvChunkBytes, Traits::kVGroupBytes>(
        o, p, ptx::smem_addr(v_tile));
  }
  // P's A fragment for k-step kk is the S accumulator pairs 8kk..8kk+7 (no shuffles needed).
  __device__ static void convert_p(const float* s, uint32_t* p) {
#pragma unroll
    for (int i = 0; i < kRegsP; ++i) p[i] = ElementTraits<typename Traits::Element>::pack(s[2 * i], s[2 * i + 1]);
  }

  // ---- Releases (one arrival per consumer warp) -------------------------------------------------
  // Called after wgmma_wait has retired the GEMM that read the stage: the whole warpgroup's wgmma
  // is complete, so lane 0 may speak for its warp.
  __device__ void release(uint64_t* bar) const {
    if (lane == 0) ptx::mbarrier_arrive(bar);
  }
  // A K/V stage: in the cluster kernel both CTAs' producers write it (multicast), so the release
  // goes to the stage's barrier in both CTAs: this CTA's with a plain arrival at the barrier's own
  // address, the peer's at that address plus peer_shift. (Mapping both ranks' addresses with mapa
  // at each release costs ~4 more instructions per release.)
  __device__ void release_stage(uint64_t* bar) const {
    static_assert(Traits::kClusterM <= 2, "release_stage: one peer CTA at most");
    if (lane != 0) return;
    ptx::mbarrier_arrive(bar);
    if constexpr (Traits::kClusterM == 2) ptx::mbarrier_arrive_mapped(ptx::smem_addr(bar) + peer_shift);
  }

  // ---- Keeping the softmax under O += P V -----------------------------------------------------
  // ptxas schedules wgmma.wait_group like any instruction without operands: in the overlap schedule
  // it moved the wait for P V above the whole softmax of the next S (seen in the SASS), so the
  // softmax ran after P V instead of under it. It does not move the wait above a shared-memory
  // store, so lane 0 of each warp stores the softmax's last results (the row sums, which depend on
  // every exponential) to its own never-read slot right before the wait. (A wait predicated on those
  // values would order it too, but then ptxas serializes every wgmma.)
  __device__ void pin_before_wait(float last0, float last1) {
    if (lane == 0) ptx::st_shared_f32x2(ptx::smem_addr(&smem.wait_order_sink[warpgroup * 4 + warp]), last0, last1);
  }

  // ---- Ping-pong between the two consumer warpgroups ------------------------------------------
  __device__ void gemm_turn_begin() const {
    if constexpr (Traits::kPingPong) ptx::named_barrier_sync(kPingPongBarrier + warpgroup, 256);
  }
  __device__ void gemm_turn_end() const {
    if constexpr (Traits::kPingPong) ptx::named_barrier_arrive(kPingPongBarrier + (1 - warpgroup), 256);
  }

  // S = Q K^T on the next K stage, run to completion, stage released (K full -> consumer ->
  // K empty). Inside this warpgroup's ping-pong turn when the schedule has one.
  __device__ void qk_to_completion(float* s) {
    ptx::mbarrier_wait(&smem.k_full[k_state.index], k_state.phase);  // K block landed
    gemm_turn_begin();
    ptx::wgmma_fence();
    issue_qk(s, smem.k[k_state.index]);
    ptx::wgmma_commit();
    gemm_turn_end();
    ptx::wgmma_wait<0>();
    ptx::fence_registers<kAccS>(s);
    release_stage(&smem.k_empty[k_state.index]);  // S done reading this K stage
    k_state.advance();
  }
  // O += P V on the next V stage, run to completion, stage released (V full -> consumer -> V empty).
  __device__ void pv_to_completion(float* o, const uint32_t* p) {
    ptx::mbarrier_wait(&smem.v_full[v_state.index], v_state.phase);  // V block landed
    gemm_turn_begin();
    ptx::wgmma_fence();
    issue_pv(o, p, smem.v[v_state.index]);
    ptx::wgmma_commit();
    gemm_turn_end();
    ptx::wgmma_wait<0>();
    ptx::fence_registers<kAccO>(o);
    release_stage(&smem.v_empty[v_state.index]);  // P V done reading this V stage
    v_state.advance();
  }

  // Softcap, then, for kMasked, the visibility mask (only on blocks that are not fully visible to
  // this warpgroup's 64 rows: tails, causal diagonal, window edges). kMasked = false: blocks known
  // to be fully visible (kAllKeysVisible's main loop), no mask code there, so fewer live registers.
  // `mask`: the tile's sequence's (Scheduler::mask); keys past the sequence's end are invisible there.
  template <bool kMasked = true>
  __device__ void prepare_scores(float* s, const attn::VisibilityMask& mask, int n_block, int wg_row_first) const {
    if (params.has_softcap) apply_softcap<kAccS>(s, params.softcap);
    if constexpr (Traits::kAlibi) {
      const float2 alibi = smem.alibi[warpgroup * 4 + warp];  // set_tile_alibi
      apply_alibi<kAccS>(s, alibi.x, wg_row_first + 16 * warp + lane / 4, n_block * kBlockN + 2 * (lane % 4),
                         __float_as_int(alibi.y));
    }
    if constexpr (!kMasked) return;
    const int key_first = n_block * kBlockN;
    if (!mask.tile_fully_visible(wg_row_first, wg_row_first + 63, key_first, key_first + kBlockN - 1)) {
      const int row0 = wg_row_first + 16 * warp + lane / 4;
      apply_mask<kAccS>(s, mask, row0, key_first + 2 * (lane % 4));
    }
  }
  // kAlibi: this warp's slot of the tile's slope (dot units) and Sk - Sq. The two __syncwarp
  // order lane 0's write after every lane's reads for the previous tile and before their next ones.
  __device__ void set_tile_alibi(const typename Scheduler::TileT& tile, const attn::VisibilityMask& mask) {
    __syncwarp();
    if (lane == 0) {
      const float slope = params.alibi_slopes[tile.batch * params.alibi_batch_stride + tile.head];
      smem.alibi[warpgroup * 4 + warp] =
          make_float2(slope / params.scale, __int_as_float(mask.seqlen_k - Scheduler::seqlen_q(params, tile)));
    }
    __syncwarp();
  }

  // This warp's 16 rows of S = Q K^T for the K stage in use, on the warp's own tensor cores
  // (mma.sync m16n8k16): the stale-max path's last resort (softmax.cuh, OnlineSoftmax step 3), which
  // has overwritten the scores with exponentials. The m16n8 accumulator of n-tile j is exactly acc
  // 4j..4j+3 of the wgmma layout (softmax.cuh), so the scores land where the wgmma put them. Thread
  // (g = lane / 4, t = lane % 4) loads its fragments itself, 32 bits each: A = Q rows g and g + 8 of
  // the warp at columns 2t and 2t + 8 of the k-step, B = K key 8j + g at the same columns.
  // Tiles are [Dqk/64][rows][64] with the 128-byte swizzle (K: or row groups, kernel_traits.cuh): the
  // 16-byte unit u of row r lies at unit u ^ (r % 8) of the row (atoms start 1024-byte aligned), and
  // r % 8 = g for every row read here.
  // Why not cheaper: a second wgmma issue makes the d128 long kernels spill 44-104 bytes;
  // ldmatrix fragments, or mma.sync accumulating straight into s, 20-32 bytes.
  __device__ void recompute_scores(float* s) const {
    using Element = typename Traits::Element;
    const int g = lane >> 2, t = lane & 3;
    const uint32_t q_rows = ptx::smem_addr(smem.q[q_state.index]) + (warpgroup * 64 + warp * 16 + g) * kRowBytes + 4 * t;
    const uint32_t k_rows = ptx::smem_addr(smem.k[k_state.index]) + g * kRowBytes + 4 * t;
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) {
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll 1
      for (int kk = 0; kk < Traits::kDqk / 16; ++kk) {
        const uint32_t lo = ((2 * (kk % 4)) ^ g) << 4, hi = lo ^ 16;  // columns 2t (+ 8) of the k-step
        const uint32_t q = q_rows + (kk / 4) * kBlockM * kRowBytes;
        const uint32_t k = k_rows + (kk / 4) * Traits::kKvChunkBytes + j * Traits::kKGroupBytes;
        const uint32_t a[4] = {ptx::ld_shared_b32(q + lo), ptx::ld_shared_b32(q + 8 * kRowBytes + lo),
                               ptx::ld_shared_b32(q + hi), ptx::ld_shared_b32(q + 8 * kRowBytes + hi)};
        const uint32_t b[2] = {ptx::ld_shared_b32(k + lo), ptx::ld_shared_b32(k + hi)};
        ptx::mma_m16n8k16(acc, a, b, Element{});
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) s[4 * j + c] = acc[c];
    }
  }

  __device__ void rescale_o(float* o, const float (&factor)[2]) const {
    // Skipping is exact: factor == 1 means the row max did not move. The vote keeps the branch
    // warp-uniform.
    if (params.always_rescale_o || __any_sync(0xffffffffu, factor[0] != 1.0f || factor[1] != 1.0f)) {
      scale_rows<kAccO>(o, factor);
    }
  }

  // K_n (and, after a tile's last block, Q) read for the last time: the producer may refill them.
  __device__ void release_k_and_q(bool last_block) {
    release_stage(&smem.k_empty[k_state.index]);
    k_state.advance();
    if (last_block) release(&smem.q_empty[q_state.index]);  // last read of Q in this tile
  }

  // ---- One KV block of the overlap schedule (every block after a tile's first) ------------------
  // Entry: s holds P_{n+1}'s unnormalized probabilities already packed into p, O has everything up
  // to block n + 2. Exit: p holds P_n, O everything up to block n + 1.
  template <bool kMasked>
  __device__ void overlap_step(float* o, float* s, uint32_t* p, OnlineSoftmax& softmax, const attn::VisibilityMask& mask,
                               int n, int wg_row_first, bool last_block) {
    float factor[2] = {1.0f, 1.0f};
    // Issue S_n = Q K_n^T and O += P_{n+1} V_{n+1} back to back (two commit groups).
    ptx::mbarrier_wait(&smem.k_full[k_state.index], k_state.phase);
    ptx::mbarrier_wait(&smem.v_full[v_state.index], v_state.phase);
    gemm_turn_begin();
    ptx::wgmma_fence();
    issue_qk(s, smem.k[k_state.index]);
    ptx::wgmma_commit();
    issue_pv(o, p, smem.v[v_state.index]);
    ptx::wgmma_commit();
    gemm_turn_end();
    // S_n retired (P V may still run): softmax S_n.
    ptx::wgmma_wait<1>();
    ptx::fence_registers<kAccS>(s);
    // Blocks that are fully visible to the warpgroup take the stale-max path (softmax.cuh, steps 1-3)
    // where the tile config has it; others the exact update. A warp that has to settle its block does
    // so after P V retired (P's registers are free then) and keeps K_n and Q until then (step 3 may
    // read them again).
    bool settle = false;
    float block_sum[2];
    const int key_first = n * kBlockN;
    constexpr bool kStaleMax = Traits::Config::kStaleMaxSoftmax && (!kMasked || Traits::Config::kStaleMaxMasked);
    if (!kStaleMax ||
        (kMasked && !mask.tile_fully_visible(wg_row_first, wg_row_first + 63, key_first, key_first + kBlockN - 1))) {
      release_k_and_q(last_block);
      prepare_scores<kMasked>(s, mask, n, wg_row_first);
      softmax.update<kAccS>(s, params.scale_log2, factor);
    } else {
      prepare_scores<false>(s, mask, n, wg_row_first);  // softcap and ALiBi (the block is fully visible)
      settle = !__all_sync(0xffffffffu, softmax.exp_against_running_max<kAccS>(s, params.scale_log2, block_sum));
      if (!settle) {
        release_k_and_q(last_block);
        softmax.commit_block(block_sum);
      }
    }
    pin_before_wait(softmax.row_sum[0], softmax.row_sum[1]);
    // P_{n+1} V_{n+1} retired: release V, then O and P may be rewritten.
    ptx::wgmma_wait<0>();
    ptx::fence_registers<kAccO>(o);
    release_stage(&smem.v_empty[v_state.index]);
    v_state.advance();
    if (settle) {
      if (!softmax.settle_by_power_of_two<kAccS>(s, block_sum, factor)) {
        recompute_scores(s);
        prepare_scores<false>(s, mask, n, wg_row_first);  // softcap and ALiBi (the block is fully visible)
        softmax.update<kAccS>(s, params.scale_log2, factor);
      }
      release_k_and_q(last_block);
    }
    rescale_o(o, factor);
    convert_p(s, p);
  }

  // ---- One tile -------------------------------------------------------------------------------
  // Runs the tile's KV blocks `range` (all of them, or a stream-K tail item's part) into o (this
  // thread's unnormalized O fragment) and softmax (its rows' running max and sums); the kernel
  // shell then ends the tile (stream-K partials, epilogue).
  __device__ void run_tile(const typename Scheduler::TileT& tile, const KvRange& range, float (&o)[kAccO],
                           OnlineSoftmax& softmax) {
    float s[kAccS];
    uint32_t p[kRegsP];
    softmax.init();
#pragma unroll
    for (int i = 0; i < kAccO; ++i) o[i] = 0.0f;
    const int wg_row_first = Scheduler::row_first(params, tile) + warpgroup * 64;
    const attn::VisibilityMask& mask = Scheduler::mask(params, tile);  // the tile's sequence's
    if constexpr (Traits::kAlibi) set_tile_alibi(tile, mask);

    if (!range.empty()) {
      // Q of this tile landed (producer -> consumers).
      ptx::mbarrier_wait(&smem.q_full[q_state.index], q_state.phase);
      const int num_blocks = range.count();
      float factor[2];

      if constexpr (Traits::kSchedule == Schedule::kSerial) {
        for (int it = 0; it < num_blocks; ++it) {
          qk_to_completion(s);
          if (it == num_blocks - 1) release(&smem.q_empty[q_state.index]);  // last read of Q in this tile
          prepare_scores(s, mask, range.n_last - it, wg_row_first);
          softmax.update<kAccS>(s, params.scale_log2, factor);
          rescale_o(o, factor);
          convert_p(s, p);
          pv_to_completion(o, p);
        }
      } else {
        // Prologue: S of the first block alone.
        qk_to_completion(s);
        if (num_blocks == 1) release(&smem.q_empty[q_state.index]);
        prepare_scores(s, mask, range.n_last, wg_row_first);
        softmax.update<kAccS>(s, params.scale_log2, factor);  // O is still 0: no rescale needed
        convert_p(s, p);

        // Blocks n_last - 1 down to n_first. kAllKeysVisible: every one of them is fully visible
        // (only the first block of a tile can hold the Sk tail), so the loop has no mask code.
        // Masked kernels keep one loop for masked and unmasked blocks (docs/design/sm90.md).
        for (int it = 1; it < num_blocks; ++it) {
          overlap_step<!Traits::kAllKeysVisible>(o, s, p, softmax, mask, range.n_last - it, wg_row_first,
                                                 it == num_blocks - 1);
        }
        // Drain: the last block's O += P V.
        pv_to_completion(o, p);
      }
      q_state.advance();  // the next tile's Q is in the other buffer (kQStages 2)
    }
  }

  // Before the first tile.
  __device__ void begin() {
    if constexpr (Traits::kClusterM == 2) {
      const uint32_t own = ptx::smem_addr(&smem);
      peer_shift = ptx::map_shared_to_cta(own, ptx::cluster_ctarank() ^ 1u) - own;
    }
    // Ping-pong start: warpgroup 1 pre-arrives on warpgroup 0's barrier so warpgroup 0 issues first.
    if constexpr (Traits::kPingPong) {
      if (warpgroup == 1) ptx::named_barrier_arrive(kPingPongBarrier + 0, 256);
    }
  }
  // After the last tile.
  __device__ void end() {
    // Ping-pong end: warpgroup 1's last turn_end arrived on warpgroup 0's barrier with no matching
    // sync; consume it so both named barriers end the kernel with no pending arrivals.
    if constexpr (Traits::kPingPong) {
      if (warpgroup == 0) ptx::named_barrier_sync(kPingPongBarrier + 0, 256);
    }
  }
};

// The forward mainloop of one kernel: the producer role (TMA loads into the ring) and the consumer
// role (wgmma and online softmax per tile), walking the tiles of `Scheduler_`.
template <class Traits_, class Scheduler_>
struct Mainloop {
  using Traits = Traits_;
  using Scheduler = Scheduler_;
  using ProducerRole = Producer<Traits, Scheduler>;
  using ConsumerRole = Consumer<Traits, Scheduler>;
};

}  // namespace flashcore::sm90
