// The sm90 backward's ONE tuning table and the compile-time facts derived from it (shared-memory
// layout, register split).
//
// Work split (mainloop.cuh): a CTA owns kBlockN = 128 keys of one KV head and walks the query
// blocks (kBlockM rows, every query head of the group) that see them. Consumer warpgroup w owns
// keys [64 w, 64 w + 64): per step it computes S^T = K Q^T and dP^T = V dO^T for them (wgmma, keys
// as M), so P^T and dS^T leave the accumulators straight as the A operand of dV += P^T dO and
// dK += dS^T Q; dK and dV stay in registers for the whole walk. dS also goes to shared memory, where
// one warpgroup a step (heavy and light steps alternate, mainloop.cuh) reads both halves for the
// step's dQ, in two chunks: kBlockM = 80 (d96, d128) computes dQ^T = K^T dS^T, chunk c being dQ's
// 64-column chunk c of the padded Dqk as the M of the GEMM (dS stored query-major, the N = 80
// queries); kBlockM = 128 (d64) computes dQ = dS K, chunk c being query rows [64 c, 64 c + 64) (dS^T
// stored key-major). Either way each operand starts on a 64-column chunk.
//
// Registers per consumer thread: dK + dV = (Dqk + Dv) / 2 fp32 for the whole walk; per step S^T
// and dP^T (kBlockM / 2 fp32 each), P^T and dS^T packed (kBlockM / 4 each); on a heavy step dQ's two
// chunks (kBlockM / 2 or Dqk / 2 fp32 each) once dV and dK retired. d128 at kBlockM 80: 128 + 40 +
// 40 + 20 + 20, then 2 x 40 for dQ^T; dQ^T leaves in the accumulator's own order
// (backward/dq_tile.hpp).
//
// Above 128 (col_split: d256) whole dK, dV rows of 64 keys would be 256 fp32 per thread, so both
// warpgroups take the same kBlockN = 64 keys and each keeps a column half of dK and dV, and the
// main kernel computes no dQ: a pass of its own (dq_pass.cuh, tile kDqPassTile) computes dQ per
// query block, S and dP recomputed, dQ in registers over the block's whole walk. Per step the
// warpgroups split by role (kRoleSplit: S^T and P^T on one, dP^T and dS^T on the other, each for all
// 64 queries, so those GEMMs are m64n64; score-mod calls split by query halves instead), exchange
// P^T and dS^T (16-bit) through shared memory, and add their column halves of dV += P^T dO and
// dK += dS^T Q (B = the half's 64-column chunks of dO / Q). Registers: 64 + 64 for dK, dV; S^T or
// dP^T 32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backward/dq_tile.hpp"
#include "backward/workspace.hpp"
#include "common/host_device.hpp"

namespace flashcore::sm90::bwd {

struct BwdTile {
  int block_m = 0;  // query rows per step (80: dQ^T = K^T dS^T; 128: dQ = dS K by rows; col_split: 64)
  int stages = 0;   // Q / dO / statistics buffers in the ring
  bool col_split = false;  // both warpgroups on the same 64 keys, dK / dV split by columns
  constexpr int block_n() const { return col_split ? 64 : 128; }  // keys per CTA
  // dQ by the dQ pass (dq_pass.cuh) rather than the main kernel: where the columns are split.
  constexpr bool dq_pass() const { return col_split; }
  // dQ^T = K^T dS^T, its partials in fragment-ordered blocks (backward/dq_tile.hpp): kBlockM 80.
  constexpr bool dq_transposed() const { return !col_split && block_m != 128; }
};

constexpr BwdTile bwd_tile(int head_dim_qk, int head_dim_v) {
  const int d = head_dim_qk > head_dim_v ? head_dim_qk : head_dim_v;
  if (d <= 64) return {128, 2};
  if (d <= 128) return {80, 2};
  return {64, 2, true};
}

// The dQ pass's tile: 64 query rows per consumer warpgroup (dQ 64 x Dqk fp32 in registers), KV
// blocks of block_n keys through a ring of kv_slots K / V tiles, Q and dO resident. d256: 64 KB
// each for Q and dO, 3 x 32 KB of slots (224 KB).
struct DqPassTile {
  int block_m = 0;   // query rows per CTA (64 per consumer warpgroup)
  int block_n = 0;   // keys per KV block
  int kv_slots = 0;  // K / V tiles in the ring (V_j, K_j, V_j+1, ...)
};
inline constexpr DqPassTile kDqPassTile{128, 64, 3};
static_assert(kDqPassTile.block_n == BwdTile{64, 2, true}.block_n(),
              "the dQ pass reads K and V through the main kernel's maps, whose boxes are its block_n rows");

inline constexpr int kBwdConsumerWarpgroups = 2;
inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kBwdThreads = kWarpgroupThreads * (1 + kBwdConsumerWarpgroups);
inline constexpr int kBwdProducerRegs = 24;
inline constexpr int kBwdConsumerRegs = 240;

// The dK / dV staging tile of one consumer warpgroup (kernel.cuh, store_dk_dv_staged): its 64 rows of
// the V tile, [cols/64][block_n rows][64] with 128-byte rows and the 128-byte swizzle. Byte offset,
// from the warpgroup's first row, of 16-byte unit `unit` (columns 8 unit .. 8 unit + 7) of row `row`.
FC_HOST_DEVICE constexpr int dkdv_staging_offset(int row, int unit, int block_n) {
  return (unit / 8) * block_n * 128 + row * 128 + (((unit % 8) ^ (row % 8)) * 16);
}

template <int kDqk_, int kDv_, typename Element_>
struct BwdTraits {
  using Element = Element_;
  static constexpr int kDqk = kDqk_;
  static constexpr int kDv = kDv_;
  static constexpr BwdTile kTile = bwd_tile(kDqk, kDv);
  static constexpr int kBlockM = kTile.block_m;
  static constexpr int kStages = kTile.stages;
  static constexpr bool kColSplit = kTile.col_split;
  static constexpr int kBlockN = kTile.block_n();
  static constexpr bool kDqPass = kTile.dq_pass();
  // With no dQ to compute, the column split's warpgroups divide the step by role instead of by
  // queries (mainloop.cuh, run_role_split): S^T / P^T on one, dP^T / dS^T on the other.
  static constexpr bool kRoleSplit = kDqPass;
  static constexpr int kThreads = kBwdThreads;
  static constexpr int kConsumerWarps = 4 * kBwdConsumerWarpgroups;
  // dQ's two chunks (not kDqPass): query rows (kBlockM 128: dQ = dS K) or 64-column chunks as the M
  // of dQ^T = K^T dS^T (kBlockM 80, whose queries are no whole wgmma M).
  static constexpr bool kDqSplitRows = kBlockM == 128;
  static constexpr bool kDqTransposed = kTile.dq_transposed();
  // dP^T = V dO^T runs under the P^T math when S^T and dP^T fit the registers together (kBlockM 64,
  // 80); at kBlockM 128 they do not (128 fp32 of the two plus dK, dV and P^T spilled), so dP^T
  // follows P^T.
  static constexpr bool kOverlapDp = kBlockM <= 80;
  // dK += dS^T Q issued before dS's shared-memory stores (which then run under it) rather than
  // after. H100, same-call TFLOPS (kBlockM 64): d128 fp16 S16k 510 -> 529, bf16 B4 S4k 456 -> 475;
  // but d64 bf16 S16k 485 -> 474 and causal B4 S4k 347 -> 323, so not at kBlockM 128.
  static constexpr bool kDkBeforeDsStore = kDqTransposed;
  // Consumer warps that store a step's dQ partial (the dq_full barrier's arrivals): the heavy
  // warpgroup's (mainloop.cuh).
  static constexpr int kDqWriterWarps = kWarpgroupThreads / 32;

  static constexpr int kRowBytes = 128;  // one row of a 64-column swizzled chunk
  static constexpr int kDqkPad = (kDqk + 63) / 64 * 64;
  static constexpr int kDvPad = (kDv + 63) / 64 * 64;
  // dQ's columns per chunk (the wgmma N of dQ = dS K).
  static constexpr int kDqCols = kDqSplitRows ? kDqkPad : kDqkPad / 2;
  // Queries of a step whose S^T / dP^T a warpgroup computes (the N of those GEMMs).
  static constexpr int kSQueries = kColSplit ? kBlockM / 2 : kBlockM;
  // dK's and dV's columns per consumer warpgroup (the N of their GEMMs).
  static constexpr int kDkCols = kColSplit ? kDqkPad / 2 : kDqk;
  static constexpr int kDvCols = kColSplit ? kDvPad / 2 : kDv;

  static constexpr uint32_t kKBytes = kBlockN * kDqkPad * 2;
  static constexpr uint32_t kVBytes = kBlockN * kDvPad * 2;
  static constexpr uint32_t kQBytes = kBlockM * kDqkPad * 2;   // TMA credits the whole box, zeros too
  static constexpr uint32_t kDoBytes = kBlockM * kDvPad * 2;
  static constexpr uint32_t kStatBytes = kBlockM * 4;          // lse2 or D of one step
  static constexpr int kStatStride = (kBlockM + 31) / 32 * 32;  // floats per stage: TMA writes 128-byte aligned

  // Per consumer thread.
  static constexpr int kAccDk = kDkCols / 2;
  static constexpr int kAccDv = kDvCols / 2;
  static constexpr int kAccDq = kDqTransposed ? kBlockM / 2 : kDqCols / 2;  // a chunk: 64 x kBlockM or 64 x kDqCols

  struct alignas(1024) SharedStorage {
    alignas(1024) uint16_t k[kBlockN * kDqkPad];  // [Dqk/64][kBlockN][64], swizzled
    alignas(1024) uint16_t v[kBlockN * kDvPad];
    alignas(1024) uint16_t q[kStages][kBlockM * kDqkPad];
    alignas(1024) uint16_t dout[kStages][kBlockM * kDvPad];
    // dS of a step, swizzled. kDqTransposed: [kBlockN/64][kBlockM queries][64 keys], the B operand
    // (K-major) of dQ^T = K^T dS^T. Otherwise dS^T, [kBlockM/64][kBlockN keys][64 queries]: dQ = dS K's
    // A operand (MN-major); kColSplit: then P^T the same way (the A operands, K-major, of
    // dK += dS^T Q and dV += P^T dO). Two buffers: a warpgroup writes step i's while the other may
    // still read step i - 1's.
    alignas(1024) uint16_t ds[2][kBlockN * kBlockM * (kColSplit ? 2 : 1)];
    // One step's fp32 dQ partial. kDqTransposed: the block in fragment order (backward/dq_tile.hpp),
    // added into the workspace by one bulk reduce-add. Otherwise [kDqk/32][kBlockM][32] with the
    // 128-byte swizzle: the boxes of the workspace's tensor map (launch.cu), added by TMA reduce-adds
    // (row-major, a warp's stores to 8 rows kDqk floats apart would all hit the same banks).
    // kColSplit: unused.
    alignas(1024) float dq[kColSplit ? 4 : kBlockM * (kDqTransposed ? kDqkPad : kDqk)];
    alignas(128) float lse2[kStages][kStatStride];  // TMA destinations: 128-byte aligned
    alignas(128) float row_d[kStages][kStatStride];
    // Barriers (mainloop.cuh says who arrives and who waits).
    uint64_t kv_full;
    uint64_t q_full[kStages], q_empty[kStages];
    uint64_t do_full[kStages];
    uint64_t dq_full, dq_empty;
    uint64_t ds_half[2];
  };
  // Dynamic shared memory is only guaranteed 16-byte aligned: ask for 1 KiB of slack and align.
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;

  static_assert(kDqk % 32 == 0 && kDv % 16 == 0, "head dims: whole k16 steps; dQ in 32-column boxes");
  static_assert(kColSplit ? kDqkPad == 256 && kDvPad == 256 : kDqk <= 128 && kDv <= 128,
                "dK and dV of 64 keys (kColSplit: their column halves) live in registers: head dims up to 128, "
                "or 256 split by columns (each half whole 64-column chunks)");
  static_assert(kDqTransposed ? kBlockM % 16 == 0 : kBlockM == 64 || kBlockM == 128,
                "query rows per step: whole k16 steps of dV, dK (dQ^T), or whole wgmma M halves (dQ = dS K)");
  static_assert(kBlockM <= backward::kBwdRowPad && kBlockM % backward::kRowAlign == 0,
                "a query block stays inside the workspace rows of its sequence (backward::padded_rows)");
  static_assert(kDqCols % 32 == 0, "each chunk is whole 32-column boxes of dQ");
  static_assert(!kDqTransposed || (kDqkPad == backward::kDqTileCols && kConsumerWarps * 32 == backward::kDqTileThreads),
                "the fragment-ordered dQ block: 128 columns, 256 consumer threads");
  static_assert(kDqSplitRows || kColSplit || kDqkPad == 128, "the column split gives each warpgroup one 64-column chunk");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory exceeds the 227 KiB opt-in limit");
  static_assert(kBwdProducerRegs * 128 + kBwdConsumerRegs * 128 * kBwdConsumerWarpgroups <=
                    65536 / kThreads / 8 * 8 * kThreads,
                "register split exceeds the CTA's launch allocation");
};

// Shared memory of the (Dqk, Dv) kernel, for supports() (host code, no instantiation needed).
constexpr size_t bwd_smem_bytes(int dqk, int dv) {
  const BwdTile t = bwd_tile(dqk, dv);
  const size_t dqk_pad = size_t(dqk + 63) / 64 * 64, dv_pad = size_t(dv + 63) / 64 * 64;
  const size_t block_n = size_t(t.block_n());
  const size_t tiles = 2 * (block_n * (dqk_pad + dv_pad) + t.stages * t.block_m * (dqk_pad + dv_pad) +
                            2 * block_n * t.block_m * (t.col_split ? 2 : 1));
  // col_split: a stub, then 128-byte alignment; dq_transposed: the block of the padded columns.
  const size_t dq_tile = t.col_split ? 128 : size_t(t.block_m) * (t.dq_transposed() ? dqk_pad : size_t(dqk)) * 4;
  const size_t stats = 2 * size_t(t.stages) * ((t.block_m + 31) / 32 * 32) * 4;  // lse2, row_d
  const size_t barriers = 8 * (5 + 3 * size_t(t.stages));
  return (tiles + dq_tile + stats + barriers + 1023) / 1024 * 1024 + 1024;
}

// Shared memory of the (Dqk, Dv) dQ pass, for supports() (host code).
constexpr size_t dq_pass_smem_bytes(int dqk, int dv) {
  const size_t dqk_pad = size_t(dqk + 63) / 64 * 64, dv_pad = size_t(dv + 63) / 64 * 64;
  const size_t slot_cols = dqk_pad > dv_pad ? dqk_pad : dv_pad;
  const size_t tiles = 2 * (size_t(kDqPassTile.block_m) * (dqk_pad + dv_pad) +
                            size_t(kDqPassTile.kv_slots) * kDqPassTile.block_n * slot_cols);
  const size_t barriers = 8 * (1 + 2 * size_t(kDqPassTile.kv_slots));
  return (tiles + barriers + 1023) / 1024 * 1024 + 1024;
}

}  // namespace flashcore::sm90::bwd
