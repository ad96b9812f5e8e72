// What the sm90 forward kernel reads besides its tensor maps. Built once per call by launch.cu from
// a validated AttentionParams; trivially copyable, passed as a __grid_constant__ kernel parameter.
#pragma once

#include <cstdint>

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/fast_divmod.hpp"

namespace flashcore::sm90 {

struct KernelParams {
  void* o = nullptr;
  float* lse = nullptr;  // optional
  // Elements. Varlen: the batch strides are 0 (rows are addressed by packed token, scheduler.cuh).
  int64_t o_batch_stride = 0, o_seq_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;

  int batch = 0, seqlen_q = 0, seqlen_k = 0;  // varlen: seqlen_q/k are max_seqlen_q/k
  int heads_q = 0;
  int heads_per_kv = 1;  // Hq / Hkv: query head h reads KV head h / heads_per_kv

  int num_m_blocks = 0;  // ceil(Sq / kBlockM)
  int num_units = 0;     // units of the tile order (attention/tile_order.hpp): tiles, pairs of tiles, cluster pairs
  // Units [0, wave_units) run in the scheduler's whole-tile waves; the rest form the stream-K tail
  // (attention/stream_k.hpp; wave_units = num_units without one).
  int wave_units = 0;
  int heads_per_group = 1;  // scheduler: (batch, head)s whose tiles interleave (attention/tile_order.hpp)
  bool pair_tiles = false;  // attention/tile_order.hpp's paired order (causal one-CTA dense calls; plan.cpp decides)

  attn::VisibilityMask mask;  // the visibility rule at the dense lengths (varlen: max_seqlen_q/k)

  // Scores stay in "dot" units (q.k) inside the kernel; the softmax scale is folded into exp2:
  // p = exp2(dot * scale_log2 - max_dot * scale_log2), scale_log2 = scale * kLog2e.
  float scale = 1.0f;
  float scale_log2 = 1.0f;
  // The softcap in dot units (attn::ScoreTransform::dot_softcap), applied when has_softcap.
  bool has_softcap = false;
  bool always_rescale_o = true;  // false: rescale O only when some row's max moved (tile_config.hpp)
  attn::DotSoftcap softcap;
  // ALiBi (null: off): slope of (b, h) at alibi_slopes[b * alibi_batch_stride + h], in score units;
  // the consumers subtract slope / scale * |i + Sk - Sq - j| from the dots (after the softcap).
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;

  // Per-sequence lengths (device pointers, or null), read only by the kVarlen kernels
  // (kernel_traits.cuh): cu_seqlens_q/k pack the sequences along one token axis of the q/o and k/v
  // tensor maps; seqused_k shortens each sequence's keys. The scheduler resolves a tile's sequence
  // with attn::sequence_extent and resizes `mask` to it (attn::mask_for_lengths). Last in the struct
  // so the dense kernels read every other field at the offsets they had before varlen.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_k = nullptr;
  int64_t total_q = 0, total_k = 0;  // varlen: the packed token counts the lengths are clamped into
  MaskAlign mask_align = MaskAlign::kBottomRight;
  // kVarlen kernels: the counter of the dynamic tile handout (scheduler.cuh, TileQueue): one int of
  // device memory, 0 at launch, allocated and freed per call in stream order by the launcher.
  int* tile_counter = nullptr;

  // Stream-K tail (attention/stream_k.hpp; dense kAllKeysVisible kernels): KV blocks per tile (0: no tail), and
  // the per-call workspace: per CTA and consumer warpgroup one flag (0 at launch) and one slot of
  // fp32 partials (stream_k.cuh).
  int sk_blocks_per_unit = 0;
  int sk_first_wave = 0;  // wave_units / grid units: the scheduler's wave count where the tail starts
  int* sk_flags = nullptr;
  float* sk_partials = nullptr;

  // Kernels with Traits::kPartialBlockFirst (the long shape's masked kernel): num_m_blocks * kBlockM
  // - Sq, else 0; worked out on the host like num_m_blocks (the device would redo it at every use).
  // Block 0 holds rows [0, kBlockM - m_row_shift), block m >= 1 rows [m * kBlockM - m_row_shift,
  // (m + 1) * kBlockM - m_row_shift): the short block is the first, not the last (scheduler.cuh).
  int m_row_shift = 0;

  // A call padded to this kernel's head dims (api/built_kernels.hpp, covers): its q/k and v/o maps
  // are loaded and stored per 64-column chunk (sm90/common/tma.cuh, per_chunk_map), and the direct
  // epilogue stores the call's head_dim_v columns only.
  bool qk_per_chunk = false;
  bool v_per_chunk = false;
  int head_dim_v = 0;

  // Paged K/V (kVarlen kernels; pages.table null otherwise): the k/v maps view the page pool
  // ([num_pages][page_size][heads_kv][D], a page per map batch) with boxes of page_rows rows, the
  // largest common divisor of page_size and kBlockN (a multiple of 8, launch_kernel.cuh): a box never
  // crosses a page, and lands on a 1024-byte boundary of the block's swizzled tile. A sequence's keys
  // count from row 0 of its table row (mainloop.cuh, Producer::load_paged).
  attn::PageTable pages;
  FastDivmod page_div;  // by pages.page_size: a key row's table slot without a division per block
  int page_rows = 0;
  // page_rows == kBlockN and neither map is padded: the maps are the whole-tile 5-D shape (one box
  // per block, tma.cuh), else per chunk. (Row-group kernels: row-group maps, a box per piece.)
  bool paged_whole_blocks = false;
  // More boxes per block than kPagedHelperBoxesAbove (tile_config.hpp): a block's pieces are issued by the
  // producer warpgroup's helper warps, from a job the producer warp hands them (mainloop.cuh,
  // PagedIssuers), instead of by the producer warp's lanes.
  bool paged_helpers = false;
};

}  // namespace flashcore::sm90
