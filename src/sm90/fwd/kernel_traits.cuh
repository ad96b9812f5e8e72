// Compile-time facts of one sm90 forward instantiation: sizes from tile_config.hpp, the element
// type, and the shared-memory layout. Every other sm90 file reads its constants from here.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ptx/barrier.hpp"
#include "ptx/wgmma.hpp"
#include "sm90/common/element.cuh"
#include "attention/stream_k.hpp"
#include "sm90/fwd/tile_config.hpp"

namespace flashcore::sm90 {

// Named barriers of the forward kernel (ids from ptx::kFirstNamedBarrier on; barrier 0 is
// __syncthreads):
//   kPingPongBarrier + w   (ids 8, 9)    consumer warpgroup w's turn to issue its GEMMs (mainloop.cuh)
//   kWarpgroupBarrier + w  (ids 10-12)   the 128 threads of consumer warpgroup w: the epilogue's
//                                        staging tile, the stream-K partial exchange
inline constexpr int kPingPongBarrier = ptx::kFirstNamedBarrier;
inline constexpr int kWarpgroupBarrier = ptx::kFirstNamedBarrier + 2;

// One paged K or V block whose TMA boxes the helper warps issue (mainloop.cuh, PagedIssuers);
// is_v < 0 ends the kernel's jobs.
struct PagedBoxJob {
  uint32_t dst;      // shared address of the stage's tile
  uint32_t barrier;  // shared address of the barrier the boxes complete on (bytes already expected)
  int is_v;
  int rows;  // rows loaded: whole pieces of KernelParams::page_rows rows, from the block's first
  int head_kv;
  // Piece i (rows [i page_rows, + page_rows) of the block) starts at row in_page[i] of page[i]; with
  // row-group tiles page[i] is its first row group in the row-group map (in_page unused).
  int page[32];
  int in_page[32];
};

// kVarlen_: the kernel for calls with per-sequence lengths (cu_seqlens_q/k or seqused_k): tiles
// resolve their sequence, the producer warp zeroes V rows past a sequence's keys, partial row blocks
// store directly. False: the dense kernel, which reads lengths and mask from KernelParams alone and
// whose producer is one thread (launch: launch_kernel.cuh, launch_forward).
// kClusterM_: 1, or 2 for the cluster kernel (tile_config.hpp, kClusterM): two CTAs on adjacent query
// blocks of one head, each loading half of every K/V block's 64-column chunks for both.
// kAllKeysVisible_: the kernel for calls in which every query row sees every key (no causal mask, no
// window; the cluster kernel's calls too): only a tile's first KV block, the one that can hold the Sk
// tail, is masked, and the main loop has no mask code (tile_config.hpp, kDenseBlockN).
// kShape_: the tile config's shape (tile_config.hpp, TileShape); other than kDefault for dense
// (non-varlen) calls only.
// kKvRowGroups_: the varlen kernel for paged calls whose pool a row-group map views
// (sm90/common/tma.cuh): K and V tiles [kBlockN/8][chunks][8][64] instead of [chunks][kBlockN][64],
// so a page's piece, all its 64-column chunks, is one TMA box (mainloop.cuh, load_paged_blocks).
template <int kDqk_, int kDv_, typename Element_, Schedule kSchedule_, int kBlockN_, bool kVarlen_ = false,
          int kClusterM_ = 1, bool kAllKeysVisible_ = false, TileShape kShape_ = TileShape::kDefault,
          bool kAlibi_ = false, bool kKvRowGroups_ = false>
struct KernelTraits {
  using Config = TileConfig<kDqk_, kDv_, kShape_>;
  using Element = Element_;
  static constexpr ptx::WgmmaType kWgmmaType = ElementTraits<Element>::kWgmma;
  static constexpr Schedule kSchedule = kSchedule_;
  static constexpr bool kVarlen = kVarlen_;
  static constexpr int kClusterM = kClusterM_;
  static constexpr bool kAllKeysVisible = kAllKeysVisible_;
  // ALiBi calls (plan.cpp: the masked default-shape kernel and the varlen kernel are built with it).
  static constexpr bool kAlibi = kAlibi_;
  // Equal tiles: the scheduler may split the last waves' tiles along KV (attention/stream_k.hpp).
  static constexpr bool kStreamK = kAllKeysVisible && !kVarlen;
  // Masked dense calls on the long tile shape: the short query block goes first (scheduler.cuh).
  // Only there: 192-row blocks leave a short block at the standard lengths (S = 8k, 16k), and the
  // default shapes' 128-row blocks do not, yet the added code slows d128's default masked kernel and
  // makes d64's three-warpgroup kernel spill (docs/design/sm90.md).
  static constexpr bool kPartialBlockFirst =
      !kAllKeysVisible && !kVarlen && kClusterM_ == 1 && kShape_ == TileShape::kLong;

  static constexpr int kDqk = kDqk_;
  static constexpr int kDv = kDv_;
  static constexpr int kConsumerWarpgroups = Config::kConsumerWarpgroups;
  static constexpr int kBlockM = 64 * kConsumerWarpgroups;  // 64 query rows per consumer warpgroup
  // block_n_for(kAllKeysVisible, kVarlen) (tile_config.hpp), or Config::kAltBlockN when tuning.
  static constexpr int kBlockN = kBlockN_;
  static constexpr bool kConfiguredBlockN = kBlockN == block_n_for<Config>(kAllKeysVisible, kVarlen);
  static constexpr int kStages = kConfiguredBlockN ? Config::kStages : Config::kAltStages;
  // Q buffers (tile_config.hpp). The serial tuning variants at kAltBlockN keep one: their larger K/V
  // stages leave no room for two.
  static constexpr int kQStages = kConfiguredBlockN ? Config::kQStages : 1;
  // kVarlen: tile indices the producer may hand out ahead of the consumers (TileQueue).
  static constexpr int kTileSlots = 2;
  // kVarlen, paged K/V in small pieces (KernelParams::paged_helpers): the producer warpgroup's other
  // warps issue the boxes of the blocks the producer warp hands them (mainloop.cuh, PagedIssuers),
  // through kBoxJobSlots job slots.
  static constexpr int kHelperWarps = 3;
  // Built where it costs no spill: with three consumer warpgroups (d64) the helpers' code made the
  // 24-register producer warpgroup spill (and d64's 96-key blocks of 16-row pieces are 6 boxes,
  // where helpers gained nothing).
  static constexpr bool kPagedHelpers = kVarlen && kConsumerWarpgroups == 2;
  static constexpr int kBoxJobSlots = 4;
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;
  static constexpr bool kPingPong = kSchedule == Schedule::kOverlapPingPong && kConsumerWarpgroups == 2;

  // Swizzled operand tiles: [cols / 64][rows][64] 16-bit elements, 128 bytes per row segment. A head
  // dim that is not a multiple of 64 (96) is padded to the next one in shared memory: the tensor map
  // is then 4-D over the real head dim and loaded one 64-column chunk at a time, so the columns past
  // the head dim arrive as TMA's out-of-bounds zeros (sm90/common/tma.cuh, chunked_map).
  static constexpr int kRowBytes = 128;
  static constexpr int kDqkPad = (kDqk + 63) / 64 * 64;
  static constexpr int kDvPad = (kDv + 63) / 64 * 64;
  static constexpr uint32_t kQBytes = kBlockM * kDqkPad * 2;  // TMA credits the whole box, zeros too
  static constexpr uint32_t kKBytes = kBlockN * kDqkPad * 2;
  static constexpr uint32_t kVBytes = kBlockN * kDvPad * 2;
  // Both K/V tile layouts are made of the swizzle's 1024-byte atoms (8 rows x one 64-column chunk);
  // they differ in the strides between a tile's chunks (the same for K and V) and between its 8-row
  // groups (the wgmma descriptors' and every row address's): [chunks][kBlockN][64], or with
  // kKvRowGroups [kBlockN/8][chunks][8][64].
  static constexpr bool kKvRowGroups = kKvRowGroups_;
  static constexpr uint32_t kKvChunkBytes = kKvRowGroups ? 1024 : kBlockN * kRowBytes;
  static constexpr uint32_t kKGroupBytes = kKvRowGroups ? kDqkPad / 64 * 1024 : 8 * kRowBytes;
  static constexpr uint32_t kVGroupBytes = kKvRowGroups ? kDvPad / 64 * 1024 : 8 * kRowBytes;
  // Cluster kernel: the 64-column chunks of a K (V) block this CTA loads and multicasts.
  static constexpr int kKChunksPerCta = kDqkPad / 64 / kClusterM;
  static constexpr int kVChunksPerCta = kDvPad / 64 / kClusterM;
  // Consumer-warp arrivals that free a K/V stage: every consumer warp of every CTA that reads it.
  static constexpr int kStageReleases = kConsumerWarps * kClusterM;

  // Per consumer thread: S and O accumulators (m64nN gives N/2 floats), P as packed 16-bit pairs.
  static constexpr int kAccS = kBlockN / 2;
  static constexpr int kAccO = kDv / 2;
  static constexpr int kRegsP = kBlockN / 4;

  // Built and tested with two (ping-pong) and three consumer warpgroups; a four-warpgroup d64 build
  // hung on the H200 (not investigated).
  static_assert(kConsumerWarpgroups == 2 || kConsumerWarpgroups == 3, "2 or 3 consumer warpgroups");
  static_assert(kDqk % 16 == 0 && kDv % 16 == 0, "head dims: multiples of 16 (wgmma k-steps of Q K^T, N of P V)");
  static_assert(kBlockN % 16 == 0 && kBlockN <= 256, "kBlockN: multiple of 16 (P.V k-steps), at most 256 (TMA box, wgmma N)");
  static_assert(kDv <= 256, "O = P V is one wgmma of N = Dv");
  static_assert(kQStages == 1 || kQStages == 2, "one or two Q buffers");
  static_assert(kClusterM == 1 || (kClusterM == 2 && !kVarlen && kAllKeysVisible && kDqk % 128 == 0 && kDv % 128 == 0),
                "cluster kernel: pairs of CTAs, calls whose rows see every key, head dims with an even number "
                "of 64-column chunks");
  static_assert(!kAllKeysVisible || !kVarlen, "the mask-free main loop is built for dense calls only");
  static_assert(kShape_ == TileShape::kDefault || !kVarlen, "the long and short tile shapes are built for dense calls only");
  static_assert(kKBytes % 1024 == 0 && kVBytes % 1024 == 0, "each stage must keep 1024-byte swizzle alignment");
  static_assert(!kKvRowGroups || (kVarlen && !kAlibi && kv_row_group_tiles(kDqk, kDv)),
                "row-group K/V tiles: the varlen kernel of paged calls, unpadded head dims");
  // setmaxnreg moves registers between the warps of a CTA, within what the CTA got at launch: the
  // per-thread launch cap (65536 / kThreads, in steps of 8) times kThreads, NOT the whole register
  // file. (24/240/240 at 384 threads is exactly 168 x 384 = 64512; 32/240/240, 65536 in total, hung
  // on the H200 with setmaxnreg.inc waiting for registers no one frees.)
  static constexpr int kLaunchRegsPerThread = 65536 / kThreads / 8 * 8;
  static_assert(Config::kProducerRegs * 128 + Config::kConsumerRegs * 128 * kConsumerWarpgroups <=
                    kLaunchRegsPerThread * kThreads,
                "register split exceeds the CTA's launch allocation");

  struct alignas(1024) SharedStorage {
    alignas(1024) uint16_t q[kQStages][kBlockM * kDqkPad];
    alignas(1024) uint16_t k[kStages][kBlockN * kDqkPad];
    alignas(1024) uint16_t v[kStages][kBlockN * kDvPad];
    // Pipeline barriers; which side waits and which arrives is documented in mainloop.cuh.
    uint64_t q_full[kQStages], q_empty[kQStages];
    uint64_t k_full[kStages], k_empty[kStages];
    uint64_t v_full[kStages], v_empty[kStages];
    uint64_t v_tail;  // kVarlen producer only: a V block whose rows past the sequence get zeroed landed
    // kVarlen only: the dynamic tile handout (scheduler.cuh, TileQueue), producer -> consumers.
    uint64_t tile_full[kTileSlots], tile_empty[kTileSlots];
    int tile_unit[kTileSlots];
    // kVarlen, paged K/V in small pieces (mainloop.cuh, PagedIssuers): the producer warp's box jobs
    // for the helper warps.
    PagedBoxJob box_job[kBoxJobSlots];
    uint64_t job_full[kBoxJobSlots], job_empty[kBoxJobSlots];
    uint32_t jobs_handed_out;  // by the producer warp (0 at start)
    // kStreamK: this CTA's items of the stream-K tail (attention/stream_k.hpp), filled by thread 0 at start.
    attn::StreamKList sk_list;
    // One 8-byte slot per consumer warp, written and never read: the store that keeps ptxas from
    // hoisting the wait for O += P V above the softmax (mainloop.cuh, Consumer::pin_before_wait).
    float2 wait_order_sink[kConsumerWarps];
    // kAlibi: per consumer warp, its tile's slope in dot units and Sk - Sq (as float bits), written
    // by lane 0 at the tile's start and read in every block's score preparation (no registers held
    // across the mainloop).
    float2 alibi[kConsumerWarps];
  };
  // O staging tiles for the TMA-store epilogue, one [Dv/64][64][64] swizzled tile per consumer
  // warpgroup, right after SharedStorage (whose size is a multiple of its 1024-byte alignment).
  // (A tuning variant with a larger kBlockN may leave no room: it then falls back to direct stores.)
  static constexpr uint32_t kOTileBytes = 64 * kDvPad * 2;
  static constexpr bool kEpilogueTma =
      Config::kEpilogueTma && sizeof(SharedStorage) + (size_t)kOTileBytes * kConsumerWarpgroups + 1024 <= 227 * 1024;
  static constexpr size_t kOStagingBytes = kEpilogueTma ? (size_t)kOTileBytes * kConsumerWarpgroups : 0;
  // Dynamic shared memory is only guaranteed 16-byte aligned: ask for 1 KiB of slack and align.
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + kOStagingBytes + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory exceeds the 227 KiB opt-in limit");
};

}  // namespace flashcore::sm90
