// THE tuning table of the sm90 forward path: tile sizes, pipeline depth, register split and schedule
// per (QK head dim, V head dim). Nothing else in src/sm90 hard-codes these numbers.
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

// kAlwaysRescaleO: rescale O after every KV block (true) or only when some row's running max moved
// (false; a warp-uniform vote, exact either way). The max moves only by more than 2^4 (softmax.cuh,
// since session 10), so with the vote a warp rarely rescales after its first block.
// FLASHCORE_SM90_RESCALE=always|vote overrides it.
// kEpilogueTma: O leaves through a swizzled shared-memory tile and a TMA store (epilogue.cuh);
// otherwise each thread stores its fragment directly.
// kClusterM: 2 runs non-causal, window-free dense calls whose query-block count is even on clusters
// of two CTAs (adjacent query blocks of one head) that share each K/V block: each CTA loads half of
// its 64-column chunks and multicasts them to both, so L2 serves every K/V byte once per pair
// (mainloop.cuh), from kClusterMinSeqlenK keys on. Other calls, and 1, use one CTA per tile.
// FLASHCORE_SM90_CLUSTER=off disables it, =on uses it whatever the length.
// Needs head dims that are whole multiples of 128 (an even number of 64-column chunks).
// kQStages: Q buffers (1 or 2). With 2, the producer loads the next tile's Q into the other buffer
// while the current tile still reads its own, instead of after the current tile's last Q K^T.
// H200, fp16, A/B of one against two buffers (bench/results/2026-11-24-h200-session5-q-buffers):
// d128 causal S=1k 385-386 -> 394 (+2 %), other d128 rows unchanged. d64 (session 6, four rounds,
// bench/results/2026-11-24-h200-session6-d64-q-buffers): S=1k 351-355 -> 361-363, S=2k 421-424 ->
// 431-433, S=4k 453-457 -> 457-469, S=8k 470-494 -> 497-498, causal +1-2 %. (Session 5 had kept one
// for d64 on a lower S=8k, but that row jumps between two levels with any one binary.) Needs room
// for a second Q tile: 192/128 and d256 have none.
// kAltBlockN (0 = none): a second kBlockN compiled for tuning comparisons, picked at run time with
// FLASHCORE_SM90_BLOCK_N=<n> (serial schedule); the default is always kBlockN.
// kDenseBlockN: kBlockN of the kernel for calls in which every query row sees every key (no causal
// mask, no window). Its main loop has no mask code at all (the one block that can hold the Sk tail is
// each tile's first, masked in the prologue), which frees registers: d64 fits kBlockN 128 there.
// H200, fp16, same-call A/B (bench/results/2026-11-24-h200-session7-blockn176): the mask-free loop
// alone +1-1.5 % on d128 (S=16k 602-605 -> 612, S=1k 544 -> 552); d64 at 128 instead of 96 +9 %
// at S=1k (366 -> 400) and +6-14 % at S=8k (464-504 -> 531-535). d128 at 176 (fits too) is slower:
// S=16k 612 -> 602, S=1k 552 -> 501.
// kVarlenBlockN: kBlockN of the kVarlen kernel (per-sequence lengths), which keeps more state live
// (d64: 128 spills 40 bytes there, so it keeps 96).
// kClusterMinSeqlenK: the cluster kernel only from this many keys on. Below it the two CTAs' lockstep
// costs more than the L2 traffic it saves (same A/B, d128: S=1k 552 -> 565 without the cluster, S=4k
// +1 %, but S=8k -1 %, S=16k -1.5 %).
// kStreamKTail: calls whose tiles are all equally long split the last waves' tiles along KV when
// the last wave is partial (stream_k.hpp), by default; false: only with FLASHCORE_SM90_STREAM_K=on.
// H200, fp16, same binary, two rounds (bench/results/2026-11-24-h200-session9-stream-k): d64 +1 to
// +3 % (S=1k 409 -> 414, S=4k 517 -> 529, S=8k 514 -> 530 in the low-level round), d128 +0.4 to
// +1.5 % (S=2k 625 -> 635, S=16k 626 -> 629); d256 lost (S=1k 584 -> 571, S=2k -0.7 %, S=8k / 16k
// -3 % in one round of two). The H200 is power-limited: SMs idle in a partial last wave let the
// others clock higher, so the tail wins less than its idle-SM share, and the partials' 17 MB of
// fp32 traffic per d256 call cost more than that.
// kBroadcastWarpIndex: the kernel takes its warpgroup and warp index from lane 0 (__shfl_sync), so
// the compiler knows they are warp-uniform and keeps what derives from them in uniform registers:
// the Q descriptor of each Q K^T k-step becomes one uniform 64-bit add instead of a 64-bit add in
// regular registers and two register-to-uniform moves (d128 long dense kernel, SASS: IMAD 537 ->
// 160, LOP3 336 -> 179, R2UR 74 -> 55). H200, fp16, same-call A/B, three rounds
// (bench/results/2026-11-24-h200-session10, run5): d128 S=1k 590-592 -> 613-614, S=4k 682 -> 712,
// S=16k 648-651 -> 669-677, bf16 667-673 -> 690-692, causal S=1k 434-436 -> 444-447, causal S=16k
// 606-607 -> 647-649; d256 S=8k and causal within +0.6 %. d64 loses (six rounds, run6: dense
// S=2k 495-506 -> 477-489, S=4k 535-539 -> 499-512, S=8k 530-566 -> 507-531, S=16k 515-553 ->
// 488-500; causal S=8k even): its SASS moves more work to the uniform datapath (UIADD3 102 -> 252,
// UIMAD and UISETP about 110 each, absent from the top of the count before; not profiled
// further), so d64 keeps the plain index.
// kStaleMaxSoftmax: the overlap schedule's fully visible KV blocks (after a tile's first) skip the
// block max and exponentiate against the row's running max as it stands, settling the block only in
// a warp where some p went past 1024 (softmax.cuh, OnlineSoftmax steps 1-3). Exact either way; false:
// every block takes the exact update; compiling with -DFLASHCORE_SM90_STALE_MAX=0 (e.g. through
// CMAKE_CUDA_FLAGS) turns it off everywhere, for A/B builds. kStaleMaxMasked: also in the masked
// kernels' loop (causal, window, varlen), next to the exact update their partly visible blocks keep;
// d64's three-warpgroup masked kernel (160 registers, O 32 + S 64 + P 32) spilled 68 bytes with
// both, so d64 has it in its mask-free kernel only. H200, fp16 unless named, same-call A/B against
// the exact update everywhere (bench/results/2026-11-24-h200-session15, two rounds for d128, four
// for d64 / d256): d128 S=16k 695 -> 716-719, bf16 722-725 -> 742, causal 639-643 -> 664-670, bf16
// causal 668-670 -> 692-693, S=4k 701-702 -> 717, S=1k 581-582 -> 590-591, causal S=1k 405-407 ->
// 416-417; d64 S=4k 536-539 -> 547-551, S=8k 562-563 -> 563-580, S=1k 413-416 -> 422-424; d256
// S=8k 778-780 -> 769-784 (-0.4 % on average), S=4k +0.6 %, S=1k +1 %, causal even.
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

template <int kDqk, int kDv, TileShape kShape = TileShape::kDefault>
struct TileConfig;  // only the listed pairs are built; launch.cu's supports() names the others

// Choices below were measured on an H200 (docs/perf-notes.md, sm90 section, 2026-11-22): every head
// dim runs fastest with the overlap schedule; d128 at kBlockN 128 with ping-pong, d64 with three
// consumer warpgroups, d256 at kBlockN 80 (spill-free since the k-step descriptors are derived per
// call, mainloop.cuh).
// d64: three consumer warpgroups (kBlockM = 192) with kBlockN = 96 and the overlap schedule (no
// ping-pong: that pairs exactly two warpgroups). At d64 the softmax costs about as much issue time as
// both GEMMs, so a third warpgroup and the intra-warpgroup overlap keep the tensor cores fed; 160
// registers per consumer hold O (32) + S, next S (48 each) + P (24) without spills. H200, B*S = 16k,
// H = 32: non-causal S=8k 393 -> 482 TFLOPS (fp16), S=2k 350 -> 417, causal S=2k 287 -> 353, but
// causal S=8k 356 -> 340 (the previous 2 x 64 rows, kBlockN 192 serial config kept that row higher).
// Session 7: kBlockN 128 once the mask code left the dense loop (kDenseBlockN) and took the relative
// form (softmax.cuh, apply_mask) in the masked one: dense S=1k 361 -> 405, S=8k 492-498 -> 511-515;
// causal S=4k 416 -> 427, S=8k 462 -> 480, S=16k 455-458 -> 469-504, but S=1k 246 -> 244, S=2k
// 363 -> 356 (bench/results/2026-11-24-h200-session7-*). Masked calls below 2048 keys now take the
// short shape below instead.
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
  // The vote since the rescale threshold (session 10, H200, three rounds against always rescaling
  // with the old max rule): S=1k 400-404 -> 408-410, S=8k 508-541 -> 515-553, causal S=8k 467-474 ->
  // 474-478. Before it, rescaling every block was faster (S=8k 417.3 vs 410.0, session 1).
  static constexpr bool kAlwaysRescaleO = false;
  static constexpr bool kEpilogueTma = true;
  static constexpr int kClusterM = 1;
  static constexpr int kClusterMinSeqlenK = 0;
  static constexpr int kLongMinSeqlenK = 0;
  static constexpr int kShortMaskedBelowSeqlenK = 2048;
  static constexpr bool kStreamKTail = true;
  static constexpr bool kBroadcastWarpIndex = false;
  static constexpr bool kStaleMaxSoftmax = kStaleMaxBuilt;
  static constexpr bool kStaleMaxMasked = false;
};

// d64, short masked calls (session 7): two consumer warpgroups (kBlockM 128, ping-pong, 240
// registers) at kBlockN 128, O rescaled after every block. A causal tile of 192 rows makes its lower
// warpgroups iterate over blocks only the top one needs, and the last tile of S=1k holds 64 valid
// rows of 192. H200, fp16, B*S = 16k, H = 32, three rounds against three warpgroups: causal S=1k
// 243-245 -> 266 (vote: 262-264), but causal S=2k 357 -> 333 and every dense row 12-25 % slower
// (bench/results/2026-11-24-h200-session7-d64-two-wg), hence only masked calls below 2048 keys.
template <>
struct TileConfig<64, 64, TileShape::kShort> : TileConfig<64, 64> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 3;
  static constexpr int kQStages = 2;  // Q 2 x 16 KiB + K/V 96 KiB + O staging 16 KiB
  static constexpr int kAltBlockN = 0;
  static constexpr int kConsumerRegs = 240;
  static constexpr bool kAlwaysRescaleO = true;  // causal S=1k: the vote 261-263 vs 262-264 (session 10)
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

// d128, long calls (session 7): three consumer warpgroups (kBlockM 192, overlap without ping-pong,
// as d64) at kBlockN 80, which fits 160 registers (O 64 + S, next S 40 each + P 20; 96 spills 48
// bytes in the mask-free loop). More independent softmax work per scheduler than two warpgroups'
// ping-pong, at the cost of longer tiles. H200, B=4 H=32, same binary, three rounds against the
// two-warpgroup kernels: fp16 S=8k 596-602 -> 617, S=16k 613-614 -> 628-635, bf16 S=8k 619-620 ->
// 636-641, S=16k 633 -> 648-652; causal S=16k fp16 574-581 -> 591-592, bf16 599-600 -> 613-615.
// At S=4k causal -3 %, at S=2k dense -2-2.5 %, S=1k -10 %: hence the threshold
// (bench/results/2026-11-24-h200-session7-d128-three-wg, -causal-three-wg). Calls with a left window
// edge keep the default shape (not measured). Shared memory: Q 48 + 3 x 40 KiB of K/V + 48 KiB of O
// staging = 216 KiB.
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

// d256: the overlap schedule at kBlockN 80 (O alone is 128 registers; ptxas spilled 68-88 bytes
// until the k-step descriptors stopped being hoisted out of the KV loop, now 0): H200, B*S = 16k,
// H = 8, S=8k: fp16 595 -> 665 TFLOPS, bf16 631 -> 685, causal 532 -> 565 / 544 -> 575 against the
// spill-free serial schedule in the same run (then with the spill); kBlockN 64 measured 648 / 678 /
// 546 / 557. With the softmax pinned under P V and no spill (session 3): fp16 710-751, causal 621.
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

// d96 and 192/128 (2026-11-22): not tuned by measurement yet; both take d128's shape (kBlockN 128,
// overlap + ping-pong), whose fragments they fit with room to spare or exactly. Registers and
// timings: docs/perf-notes.md, sm90 section.
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

// The kBlockN a kernel of `Config` runs at (unless a tuning knob picks kAltBlockN): kVarlenBlockN for
// per-sequence lengths, kDenseBlockN when every query row sees every key, kBlockN otherwise.
template <class Config>
constexpr int block_n_for(bool all_keys_visible, bool varlen) {
  return varlen ? Config::kVarlenBlockN : all_keys_visible ? Config::kDenseBlockN : Config::kBlockN;
}

// Calls with uneven tiles (causal, windowed): the scheduler interleaves the tiles of as many heads
// as keep their K/V within this many bytes, so the CTAs running together share K/V in L2
// (H100/H200: 50/60 MB of L2). Equal tiles go head after head (head_groups.hpp).
inline constexpr double kL2GroupBytes = 24.0 * 1024 * 1024;

}  // namespace flashcore::sm90
