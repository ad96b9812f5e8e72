// THE tuning table of the sm90 forward path: tile sizes, pipeline depth, register split and schedule
// per (QK head dim, V head dim). Every pair that cmake/KernelList.cmake declares for sm90 needs an
// entry (the build fails otherwise). Nothing else in src/sm90 hard-codes these numbers.
//
// Fixed by the kernel's structure (not tunable here):
//   * one producer warpgroup + kConsumerWarpgroups consumer warpgroups of 64 query rows each, so
//     kBlockM = 64 * kConsumerWarpgroups;
//   * operand tiles use the 128-byte swizzle, [cols/64][rows][64]: a head dim that is not a multiple
//     of 64 (96) occupies the next multiple in shared memory (zero columns), so budget with it.
// Budgets to respect when editing:
//   * shared memory: Q (kBlockM x Dqk) + kStages x (K kBlockN x Dqk + V kBlockN x Dv), 16-bit, plus
//     1 KiB alignment slack, must fit the 227 KiB opt-in limit;
//   * consumer registers: O (Dv/2) + S (kBlockN/2) + P (kBlockN/4) fp32/b32 registers per thread, plus
//     addressing and softmax state, must fit kConsumerRegs without spills (check -Xptxas -v);
//   * kProducerRegs * 128 + kConsumerRegs * 128 * kConsumerWarpgroups <= the CTA's launch
//     allocation, (65536 / threads rounded down to a multiple of 8) * threads: 64512 for 384 threads
//     (kernel_traits.cuh; more hangs in setmaxnreg.inc).
#pragma once

namespace flashcore::sm90 {

// The fields of a TileConfig (each choice's measured reason: docs/design/sm90.md):
//   kConsumerWarpgroups, kBlockN, kStages, kQStages   the tile: 64 query rows per consumer
//       warpgroup, kBlockN keys per KV block, K/V ring depth, Q buffers (2: the next tile's Q loads
//       while the current tile still reads its own; needs the shared memory of a second Q tile);
//   kDenseBlockN / kVarlenBlockN   kBlockN of the kernel for calls in which every query row sees
//       every key (its main loop has no mask code, which frees registers) / of the varlen kernel
//       (which keeps more state live);
//   kSchedule   the consumer's GEMM/softmax order (Schedule below);
//   kAltBlockN, kAltStages   a second kBlockN built for tuning comparisons only, serial schedule
//       (FLASHCORE_BUILD_TUNING_KERNELS; ForwardOverrides::block_n picks it); 0 = none;
//   kProducerRegs, kConsumerRegs   the setmaxnreg split (see the budget above);
//   kAlwaysRescaleO   rescale O after every KV block (true) or only when some row's running max
//       moved (false; a warp-uniform vote; exact either way);
//   kEpilogueTma   O leaves through a swizzled shared-memory tile and a TMA store (epilogue.cuh);
//       otherwise each thread stores its fragment directly;
//   kClusterM, kClusterMinSeqlenK   2: calls in which every row sees every key and whose query-block
//       count is even run, from kClusterMinSeqlenK keys on, on clusters of two CTAs (adjacent query
//       blocks of one head) that share each K/V block: each CTA loads half of its 64-column chunks
//       and multicasts them to both (mainloop.cuh). Needs head dims that are multiples of 128;
//   kLongMinSeqlenK, kShortMaskedBelowSeqlenK   from / below this many keys a call takes the head
//       dim's long / short tile shape (TileShape below); 0 = the head dim has none;
//   kStreamKTail   calls whose tiles are all equally long split the last waves' tiles along KV when
//       the last wave is partial (attention/stream_k.hpp); false: only when ForwardOverrides asks;
//   kBroadcastWarpIndex   the kernel takes its warpgroup and warp index from lane 0 (__shfl_sync),
//       so the compiler knows they are warp-uniform and keeps what derives from them (the Q
//       descriptor of each Q K^T k-step) in uniform registers;
//   kStaleMaxSoftmax, kStaleMaxMasked   the overlap schedule's fully visible KV blocks (after a
//       tile's first) skip the block max and exponentiate against the row's running max as it
//       stands, settling the block only in a warp where some p went past 1024 (softmax.cuh); exact
//       either way. kStaleMaxMasked: also in the masked kernels' loop (causal, window, varlen).
//       Compiling with -DFLASHCORE_SM90_STALE_MAX=0 turns it off everywhere (A/B builds).
//
// How a consumer warpgroup orders its GEMMs and softmax.
enum class Schedule : int {
  // S_j = Q K_j^T, wait, softmax, O += P_j V_j, wait: simplest, nothing overlaps inside a warpgroup.
  kSerial = 0,
  // Issue S_{j+1} = Q K_{j+1}^T and O += P_j V_j together, softmax S_{j+1} while P_j V_j runs, and,
  // with exactly two consumer warpgroups, alternate their GEMM issue (ping-pong) so one's softmax
  // hides under the other's tensor-core work.
  kOverlapPingPong = 1,
};

// Other tile shapes a head dim may have (0 in the default config's field: it has none):
//   kLong: long calls, dense or causal (no left window edge), from kLongMinSeqlenK keys on;
//   kShort: short masked calls (causal, windowed), below kShortMaskedBelowSeqlenK keys.
enum class TileShape : int {
  kDefault = 0,
  kLong = 1,
  kShort = 2,
};

#ifndef FLASHCORE_SM90_STALE_MAX
#define FLASHCORE_SM90_STALE_MAX 1
#endif
inline constexpr bool kStaleMaxBuilt = FLASHCORE_SM90_STALE_MAX != 0;

// Paged K/V (the varlen kernels): a page is read in pieces of page_rows = gcd(page_size, kBlockN)
// rows (params.hpp), a TMA box per piece (row-group tiles, kernel_traits.cuh) or per piece and
// 64-column chunk. Above this many boxes per K or V block they are issued by the producer
// warpgroup's three helper warps instead of the producer warp's lanes (mainloop.cuh, PagedIssuers).
// H100, bf16 d128 GQA 32/8 causal prefill (B4 x 4k, B8 x 512 over 8k), TFLOPS, producer warp /
// helpers, a box per chunk: 16-row pieces (16 boxes) 482-505 / 564-593 (dense 674-685); 32-row (8)
// 592-604 / 576-591; 64-row (4) 635-652 / 598-607 (docs/design/decode.md).
inline constexpr int kPagedHelperBoxesAbove = 8;

// The head-dim pairs whose paged varlen kernel is also built with row-group K/V tiles
// (kernel_traits.cuh, kKvRowGroups): whole 64-column chunks, more than one of them (with one chunk
// both layouts are the same). The plan (paged_row_groups) and the launcher read this one rule.
constexpr bool kv_row_group_tiles(int dqk, int dv) { return dqk % 64 == 0 && dv % 64 == 0 && (dqk > 64 || dv > 64); }

template <int kDqk, int kDv, TileShape kShape = TileShape::kDefault>
struct TileConfig;  // only the listed pairs are built; launch.cu's supports() names the others

// d64: three consumer warpgroups (kBlockM 192) at kBlockN 128 with the overlap schedule (no
// ping-pong: that pairs exactly two warpgroups): at d64 the softmax costs about as much issue time as
// both GEMMs, so a third warpgroup keeps the tensor cores fed. 160 registers per consumer hold O (32)
// + S, next S (64 each) + P (32) without spills only with the relative mask (softmax's apply_mask).
template <>
struct TileConfig<64, 64> {
  static constexpr int kConsumerWarpgroups = 3;
  static constexpr int kBlockN = 128;       // O 32 + S, next S 64 each + P 32 (+ the mask) fit 160
  static constexpr int kDenseBlockN = 128;
  static constexpr int kVarlenBlockN = 96;
  static constexpr int kStages = 3;
  static constexpr int kQStages = 2;  // Q 2 x 24 KiB + K/V 72 KiB (96 KiB at 128) + O staging 24 KiB
  static constexpr Schedule kSchedule = Schedule::kOverlapPingPong;
  static constexpr int kAltBlockN = 96;
  static constexpr int kAltStages = 3;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 160;
  static constexpr bool kAlwaysRescaleO = false;
  static constexpr bool kEpilogueTma = true;
  static constexpr int kClusterM = 1;
  static constexpr int kClusterMinSeqlenK = 0;
  static constexpr int kLongMinSeqlenK = 0;
  static constexpr int kShortMaskedBelowSeqlenK = 2048;
  static constexpr bool kStreamKTail = true;
  static constexpr bool kBroadcastWarpIndex = false;  // slower at d64: more work on the uniform datapath
  static constexpr bool kStaleMaxSoftmax = kStaleMaxBuilt;
  static constexpr bool kStaleMaxMasked = false;  // the masked kernel spills 68 bytes with it (160 registers)
};

// d64, short masked calls: two consumer warpgroups (kBlockM 128, ping-pong, 240 registers). A causal
// tile of 192 rows makes its lower warpgroups iterate over blocks only the top one needs; two
// warpgroups lose on every other call, hence only masked calls below 2048 keys.
template <>
struct TileConfig<64, 64, TileShape::kShort> : TileConfig<64, 64> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 3;
  static constexpr int kQStages = 2;  // Q 2 x 16 KiB + K/V 96 KiB + O staging 16 KiB
  static constexpr int kAltBlockN = 0;
  static constexpr int kConsumerRegs = 240;
  static constexpr bool kAlwaysRescaleO = true;
};

template <>
struct TileConfig<128, 128> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 128;
  static constexpr int kDenseBlockN = 128;
  static constexpr int kVarlenBlockN = 128;
  static constexpr int kStages = 2;
  static constexpr int kQStages = 2;  // 2 x 32 KiB of Q + 128 KiB of K/V + 32 KiB of O staging: 226 KiB
  static constexpr Schedule kSchedule = Schedule::kOverlapPingPong;
  static constexpr int kAltBlockN = 176;
  static constexpr int kAltStages = 2;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr bool kAlwaysRescaleO = false;
  static constexpr bool kEpilogueTma = true;
  static constexpr int kClusterM = 2;
  static constexpr int kClusterMinSeqlenK = 8192;
  static constexpr int kLongMinSeqlenK = 8192;
  static constexpr int kShortMaskedBelowSeqlenK = 0;
  static constexpr bool kStreamKTail = true;
  static constexpr bool kBroadcastWarpIndex = true;
  static constexpr bool kStaleMaxSoftmax = kStaleMaxBuilt;
  static constexpr bool kStaleMaxMasked = true;
};

// d128, long calls (>= 8192 keys, no left window edge): three consumer warpgroups (kBlockM 192,
// overlap without ping-pong) at kBlockN 80, which fits 160 registers (O 64 + S, next S 40 each + P
// 20; 96 spills in the mask-free loop). Shared memory: Q 48 + 3 x 40 KiB of K/V + 48 KiB of O staging.
template <>
struct TileConfig<128, 128, TileShape::kLong> : TileConfig<128, 128> {
  static constexpr int kConsumerWarpgroups = 3;
  static constexpr int kBlockN = 80;
  static constexpr int kDenseBlockN = 80;
  static constexpr int kStages = 3;
  static constexpr int kQStages = 1;
  static constexpr int kAltBlockN = 0;
  static constexpr int kConsumerRegs = 160;
};

// d256: the overlap schedule at kBlockN 80 (O alone is 128 registers per consumer thread; spill-free
// because the k-step descriptors are derived where they are used, sm90/common/gemm.cuh).
template <>
struct TileConfig<256, 256> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 80;
  static constexpr int kDenseBlockN = 80;  // shared memory, not registers, limits d256
  static constexpr int kVarlenBlockN = 80;
  static constexpr int kStages = 2;
  static constexpr int kQStages = 1;  // Q 64 KiB + K/V 160 KiB: no room for a second Q
  static constexpr Schedule kSchedule = Schedule::kOverlapPingPong;
  static constexpr int kAltBlockN = 48;
  static constexpr int kAltStages = 3;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr bool kAlwaysRescaleO = false;
  static constexpr bool kEpilogueTma = false;  // no shared memory left for a 64 KiB O staging tile
  static constexpr int kClusterM = 2;
  static constexpr int kClusterMinSeqlenK = 8192;
  static constexpr int kLongMinSeqlenK = 0;
  static constexpr int kShortMaskedBelowSeqlenK = 0;
  static constexpr bool kStreamKTail = false;
  static constexpr bool kBroadcastWarpIndex = true;
  static constexpr bool kStaleMaxSoftmax = kStaleMaxBuilt;
  static constexpr bool kStaleMaxMasked = true;
};

// d96 and 192/128: d128's shape (kBlockN 128, overlap + ping-pong), whose fragments they fit; not
// tuned by measurement.
//   d96: Q/K/V tiles are 128 columns wide in shared memory (96 + 32 zero columns), so shared memory
//   is d128's; S = Q K^T runs 6 k-steps, O += P V is one m64n96 wgmma (O: 48 fp32 per thread).
template <>
struct TileConfig<96, 96> : TileConfig<128, 128> {
  static constexpr int kClusterM = 1;  // 96 columns: no even split of 64-column chunks
  static constexpr int kLongMinSeqlenK = 0;
};

//   192/128: Q 48 KiB + 2 stages x (K 48 + V 32 KiB) = 208 KiB leaves no room for the 32 KiB O
//   staging tiles: direct-store epilogue. Consumer fragments are d128's (O 64 + S 64 + P 32).
template <>
struct TileConfig<192, 128> : TileConfig<128, 128> {
  static constexpr int kAltBlockN = 112;  // d128's 176 would not fit two stages of 192-wide K
  static constexpr int kQStages = 1;      // Q 48 KiB + K/V 160 KiB: no room for a second Q
  static constexpr bool kEpilogueTma = false;
  static constexpr int kClusterM = 1;  // K has three 64-column chunks
  static constexpr int kLongMinSeqlenK = 0;
};

// d80 and d160: their own kernels rather than padding to d96 / d256 (api/built_kernels.hpp), which
// would spend 20% / 60% more tensor-core work on zero columns (docs/design/head-dims.md).
//   d80: d128's shape and shared memory (80 columns occupy 128 in the swizzled tiles); S = Q K^T is
//   5 k-steps, O += P V one m64n80 wgmma (O: 40 fp32 per thread).
template <>
struct TileConfig<80, 80> : TileConfig<128, 128> {
  static constexpr int kClusterM = 1;  // 80 columns: two 64-column chunks, the second mostly zeros
  static constexpr int kLongMinSeqlenK = 0;
};

//   d160: tiles 192 columns wide in shared memory. Q 48 KiB + 2 stages x (K + V) 2 x 42 KiB at
//   kBlockN 112 = 216 KiB: no room for a second Q or the O staging tiles (direct-store epilogue).
//   Registers: O 80 + S, next S 56 each + P 28 = 220 of 240.
template <>
struct TileConfig<160, 160> : TileConfig<128, 128> {
  static constexpr int kBlockN = 112;
  static constexpr int kDenseBlockN = 112;
  static constexpr int kVarlenBlockN = 96;
  static constexpr int kQStages = 1;
  static constexpr int kAltBlockN = 64;
  static constexpr int kAltStages = 2;
  static constexpr bool kEpilogueTma = false;
  static constexpr int kClusterM = 1;  // three 64-column chunks
  static constexpr int kLongMinSeqlenK = 0;
};

// The kBlockN a kernel of `Config` runs at (unless a tuning knob picks kAltBlockN): kVarlenBlockN for
// per-sequence lengths, kDenseBlockN when every query row sees every key, kBlockN otherwise.
template <class Config>
constexpr int block_n_for(bool all_keys_visible, bool varlen) {
  return varlen ? Config::kVarlenBlockN : all_keys_visible ? Config::kDenseBlockN : Config::kBlockN;
}

// Calls with uneven tiles (causal, windowed): the scheduler interleaves the tiles of as many heads
// as keep their K/V within this many bytes, so the CTAs running together share K/V in L2
// (H100/H200: 50/60 MB of L2). Equal tiles go head after head (attention/head_groups.hpp).
inline constexpr double kL2GroupBytes = 24.0 * 1024 * 1024;

}  // namespace flashcore::sm90
