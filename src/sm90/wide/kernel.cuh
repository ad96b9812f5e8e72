// The sm90 forward for head dims above 256 (docs/design/large-head-dims.md): one kernel family for
// Q/K tiles of 64-column chunks (up to Dqk 1024) and O tiles of up to 512 columns per CTA; a call
// whose Dv is wider than the tile runs ceil(Dv / kDv) CTAs per query block, each computing S again
// for its part of O's columns. Dense and varlen calls (seqused_k too), one CTA of 64 query rows per
// (query block x Dv part, head, batch entry), no clusters. Built with FLASHCORE_BUILD_SM90_WIDE
// (default ON); the (Dqk, Dv) tiles are declared in cmake/KernelList.cmake.
//
//   warpgroup 0   producer: one thread loads Q once (its 64-column chunks) and streams, per KV block
//                 of 64 keys, K's chunks then the V chunks of this CTA's Dv part through a ring of
//                 kSlots 8 KiB slots
//   warpgroups 1, 2  consumers, w = 0, 1: warpgroup w owns the chunks c with c % 2 == w, of Q/K for
//                 S = Q K^T and of V / O. Each computes its partial S over its chunks, the two
//                 exchange partials through shared memory and sum them, both run the same online
//                 softmax, each multiplies P by its V chunks.
//
// Every ring slot is read by exactly one warpgroup (the owner of its chunk), whose 4 warps release it.
// The producer and both consumers walk the same chunk sequence (K 0..kQkChunks-1, V 0..kVChunks-1 per
// block), so a chunk's slot and phase follow from its position in it; owners alternate along it, so
// neither warpgroup waits for slots the other holds, whatever the ring's size.
// Columns past the call's head dims (a tile wider than the call) are TMA's zeros in Q, K and V and
// are not written to O; keys past a sequence are masked, query rows past it not written.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <type_traits>

#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "attention/quad_reduce.cuh"
#include "attention/score_transform.hpp"
#include "ptx/barrier.hpp"
#include "ptx/mbarrier.hpp"
#include "ptx/tma.hpp"
#include "ptx/wgmma.hpp"
#include "sm90/common/element.cuh"
#include "sm90/common/fragment.cuh"
#include "sm90/common/gemm.cuh"
#include "sm90/common/shared_storage.cuh"
#include "sm90/common/tma.cuh"
#include "common/cuda_check.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::sm90::wide {

struct WideParams {
  void* o = nullptr;
  float* lse = nullptr;
  int64_t o_batch_stride = 0, o_seq_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  // Varlen (packed tokens: the maps then have one batch entry) and seqused_k, as in AttentionParams.
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  const int32_t* seqused_k = nullptr;
  int64_t total_q = 0, total_k = 0;
  int seqlen_q = 0, seqlen_k = 0, heads_per_kv = 1;
  int head_dim_v = 0;            // the call's Dv: O columns past it are not written
  int dv_parts = 1;              // CTAs per query block, part z owning O's columns [z kDv, (z + 1) kDv)
  bool qk_per_chunk = false;     // the maps' forms (sm90/common/tma.cuh: encode_operand_map)
  bool v_per_chunk = false;
  attn::VisibilityMask rule;     // the window rule, resized per sequence (attn::mask_for_lengths)
  MaskAlign mask_align = MaskAlign::kBottomRight;
  float scale_log2 = 1.0f;
  bool has_softcap = false;
  attn::DotSoftcap softcap;
  // ALiBi (null: off): slope of (b, h) at alibi_slopes[b * alibi_batch_stride + h]; the consumers
  // subtract slope * inv_scale * |i + Sk - Sq - j| from the dots after the softcap.
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;
  float inv_scale = 1.0f;
};

template <int kDqk_, int kDv_, typename Element_>
struct WideTraits {
  using Element = Element_;
  static constexpr ptx::WgmmaType kWgmmaType = ElementTraits<Element>::kWgmma;
  static constexpr int kDqk = kDqk_;  // columns of the Q/K tile
  static constexpr int kDv = kDv_;    // columns of O per CTA
  static constexpr int kBlockM = 64, kBlockN = 64;
  static constexpr int kQkChunks = kDqk / 64;            // 64-column chunks of Q and K
  static constexpr int kVChunks = kDv / 64;              // of V and O
  static constexpr int kVOwnMax = (kVChunks + 1) / 2;  // warpgroup 0's V chunks (1's: one fewer when odd)
  static constexpr uint32_t kChunkBytes = 64 * 64 * 2;
  static constexpr size_t kExchangeBytes = 2 * 32 * 128 * 4;
  // As many ring slots as fit beside Q and the S exchange (and barriers, alignment), at most 16 (a
  // block's K and V at d512): with more slots the producer runs further ahead (576/512 at 15 slots
  // 341 -> 409 TFLOPS against 12, H100).
  static constexpr int kSlotsFit =
      int((227 * 1024 - 2048 - kQkChunks * size_t(kChunkBytes) - kExchangeBytes) / kChunkBytes);
  static constexpr int kSlots = kSlotsFit < 16 ? kSlotsFit : 16;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static constexpr int kExchangeBarrier = ptx::kFirstNamedBarrier;
  static_assert(kDqk % 64 == 0 && kDv % 64 == 0, "tiles of whole 64-column chunks");
  static_assert(kVOwnMax <= 4, "a warpgroup holds at most 256 columns of O (128 fp32 registers)");
  static_assert(kSlots >= 4, "the ring keeps at least 4 slots beside Q");
  // A warpgroup releases its V chunks after its last P V wgmma: a block's V chunks fit the ring.
  static_assert(kVChunks <= kSlots, "a block's V chunks fit the ring");

  struct alignas(1024) SharedStorage {
    alignas(1024) uint16_t q[kQkChunks][64 * 64];
    alignas(1024) uint16_t ring[kSlots][64 * 64];
    float s_partial[2][32][128];  // each consumer warpgroup's partial S: [accumulator][thread]
    uint64_t q_full;
    uint64_t slot_full[kSlots], slot_empty[kSlots];
  };
  static constexpr size_t kSmemBytes = sizeof(SharedStorage) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory exceeds the 227 KiB opt-in limit");
};

// The slot and phase of the chunks in sequence order.
template <int kSlots>
struct SlotCursor {
  int slot = 0;
  uint32_t phase = 0;
  FC_DEVICE void advance(int n = 1) {
    for (int i = 0; i < n; ++i) {
      if (++slot == kSlots) slot = 0, phase ^= 1u;
    }
  }
};

// The KV blocks a query block of a sequence sees: [first, last], empty when last < first.
FC_DEVICE void kv_blocks(const attn::VisibilityMask& mask, int seqlen_q, int row0, int& first, int& last) {
  const int row_last = min(row0 + 63, seqlen_q - 1);
  const int key_first = max(mask.first_key(row0), 0);
  const int key_last = min(mask.last_key(row_last), mask.seqlen_k - 1);
  first = key_first / 64;
  last = key_last >= key_first ? key_last / 64 : first - 1;
}

// Chunk c (columns col0 + 64 c ..) of token rows [row, row + 64) of (head, batch) into `dst`:
// through a per-chunk 4-D map, or a 5-D map with one-chunk boxes (col0 a multiple of 64).
FC_DEVICE void load_chunk(uint16_t* dst, const CUtensorMap* map, uint64_t* bar, bool per_chunk, int col0, int c,
                          int row, int head, int batch) {
  if (per_chunk) {
    ptx::tma_load_4d(dst, map, bar, col0 + 64 * c, row, head, batch);
  } else {
    ptx::tma_load_5d(dst, map, bar, 0, row, col0 / 64 + c, head, batch);
  }
}

// S (64 x 64) += A chunk * B chunk^T, both [64 rows][64 cols] swizzled; the first of a block overwrites.
template <ptx::WgmmaType kType>
FC_DEVICE void gemm_chunk_ss(float* s, uint32_t a_addr, uint32_t b_addr, bool accumulate) {
  uint64_t desc_a = ptx::make_smem_desc(a_addr, 16, 1024);
  uint64_t desc_b = ptx::make_smem_desc(b_addr, 16, 1024);
  ptx::opaque(desc_a);
  ptx::opaque(desc_b);
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    ptx::WgmmaSS<64, kType>::run(s, ptx::desc_advance(desc_a, kk * 32), ptx::desc_advance(desc_b, kk * 32),
                                 (accumulate || kk > 0) ? 1 : 0);
  }
}

// kAlibi: calls with ALiBi slopes (a build of its own: the bias as a runtime branch cost calls
// without it).
template <class Traits, bool kAlibi>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    wide_forward_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                        const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ WideParams params) {
  using Element = typename Traits::Element;
  using Storage = typename Traits::SharedStorage;
  constexpr int kQkChunks = Traits::kQkChunks, kVChunks = Traits::kVChunks, kSlots = Traits::kSlots;
  extern __shared__ uint8_t smem_raw[];
  Storage& smem = aligned_shared_storage<Storage>(smem_raw);

  const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int m_block = blockIdx.x / params.dv_parts, dv_part = blockIdx.x % params.dv_parts;
  const int head = blockIdx.y, batch = blockIdx.z;
  const int head_kv = head / params.heads_per_kv;
  const int row0 = m_block * 64;
  const attn::SequenceExtent seq =
      attn::sequence_extent(params.cu_seqlens_q, params.cu_seqlens_k, params.seqused_k, params.seqlen_q,
                            params.seqlen_k, params.total_q, params.total_k, batch);
  if (row0 >= seq.seqlen_q) return;  // varlen: a query block past this sequence (uniform per CTA)
  const attn::VisibilityMask mask = attn::mask_for_lengths(params.rule, params.mask_align, seq.seqlen_q, seq.seqlen_k);
  const bool packed = params.cu_seqlens_q != nullptr;
  const int map_batch = packed ? 0 : batch;               // the maps' batch coordinate
  const int q_row = int(seq.q_start) + row0;              // the maps' token rows (< 2^31: validate())
  const int k_row0 = int(seq.k_start);
  const int v_col0 = dv_part * Traits::kDv;
  int n_first, n_last;
  kv_blocks(mask, seq.seqlen_q, row0, n_first, n_last);

  if (threadIdx.x == 0) {
    ptx::mbarrier_init(&smem.q_full, 1);
#pragma unroll
    for (int s = 0; s < kSlots; ++s) {
      ptx::mbarrier_init(&smem.slot_full[s], 1);
      ptx::mbarrier_init(&smem.slot_empty[s], 4);  // the 4 warps of the warpgroup that owns the chunk
    }
    ptx::mbarrier_init_fence();
  }
  __syncthreads();

  if (warpgroup == 0) {
    ptx::setmaxnreg_dec<Traits::kProducerRegs>();
    if (threadIdx.x != 0 || n_last < n_first) return;
    ptx::mbarrier_arrive_expect_tx(&smem.q_full, kQkChunks * Traits::kChunkBytes);
#pragma unroll 1
    for (int c = 0; c < kQkChunks; ++c) {
      load_chunk(smem.q[c], &tm_q, &smem.q_full, params.qk_per_chunk, 0, c, q_row, head, map_batch);
    }
    SlotCursor<kSlots> cursor;
#pragma unroll 1
    for (int n = n_first; n <= n_last; ++n) {
#pragma unroll 1
      for (int c = 0; c < kQkChunks + kVChunks; ++c, cursor.advance()) {
        ptx::mbarrier_wait(&smem.slot_empty[cursor.slot], cursor.phase ^ 1u);  // fresh: reports free
        ptx::mbarrier_arrive_expect_tx(&smem.slot_full[cursor.slot], Traits::kChunkBytes);
        if (c < kQkChunks) {
          load_chunk(smem.ring[cursor.slot], &tm_k, &smem.slot_full[cursor.slot], params.qk_per_chunk, 0, c,
                     k_row0 + n * 64, head_kv, map_batch);
        } else {
          load_chunk(smem.ring[cursor.slot], &tm_v, &smem.slot_full[cursor.slot], params.v_per_chunk, v_col0,
                     c - kQkChunks, k_row0 + n * 64, head_kv, map_batch);
        }
      }
    }
    return;
  }

  ptx::setmaxnreg_inc<Traits::kConsumerRegs>();
  // The consumer body is compiled once per warpgroup (kWg), so its chunk counts are constants:
  // wgmma sequences under runtime conditions, or with barrier waits between their instructions,
  // are serialized by ptxas (C7520). Each group of wgmmas therefore waits for all its chunks first,
  // except the K chunks of a tile longer than the ring, which stream (a chunk's slot released one
  // wgmma group behind the issue; those do serialize).
  auto consume = [&](auto wg_constant) {
    constexpr int kWg = decltype(wg_constant)::value;  // owns the chunks c with c % 2 == kWg
    constexpr int kQkOwn = (kQkChunks + 1 - kWg) / 2, kVOwn = (kVChunks + 1 - kWg) / 2;
    constexpr bool kStreamK = kQkChunks > kSlots;
    const int thread_in_wg = threadIdx.x - 128 * (kWg + 1);
    const int g = lane / 4, t = lane % 4;
    const int my_row0 = row0 + 16 * warp + g;  // this thread's local row 0; row 1 is 8 further
    // ALiBi: the CTA's one (sequence, head) slope in dot units.
    const float alibi_slope_dot =
        kAlibi ? params.alibi_slopes[batch * params.alibi_batch_stride + head] * params.inv_scale : 0.0f;

    float o[kVOwn][32];
#pragma unroll
    for (int j = 0; j < kVOwn; ++j)
#pragma unroll
      for (int i = 0; i < 32; ++i) o[j][i] = 0.0f;
    float row_max_log2[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

    // ---- the pieces of one KV block (`at`: the cursor at the block's first chunk) --------------------
    // Partial S over this warpgroup's Q/K chunks (c = kWg, kWg + 2, ...): waits for all of them,
    // issues, waits for the GEMMs and releases the chunks.
    auto compute_s = [&](float* s, SlotCursor<kSlots> at) {
      at.advance(kWg);
      SlotCursor<kSlots> k_at = at, release_at = at;
#pragma unroll
      for (int j = 0; j < kQkOwn; ++j, at.advance(2)) ptx::mbarrier_wait(&smem.slot_full[at.slot], at.phase);
      ptx::wgmma_fence();
#pragma unroll
      for (int j = 0; j < kQkOwn; ++j, k_at.advance(2)) {
        gemm_chunk_ss<Traits::kWgmmaType>(s, ptx::smem_addr(smem.q[2 * j + kWg]), ptx::smem_addr(smem.ring[k_at.slot]),
                                          j > 0);
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers<32>(s);
#pragma unroll
      for (int j = 0; j < kQkOwn; ++j, release_at.advance(2)) {
        if (lane == 0) ptx::mbarrier_arrive(&smem.slot_empty[release_at.slot]);
      }
    };
    // The same, each chunk's slot released one wgmma group behind the issue (a K longer than the
    // ring: the 1024 tile); returns with S complete.
    auto stream_s = [&](float* s, SlotCursor<kSlots> at) {
      at.advance(kWg);
      SlotCursor<kSlots> release_at = at;
#pragma unroll
      for (int j = 0; j < kQkOwn; ++j) {
        ptx::mbarrier_wait(&smem.slot_full[at.slot], at.phase);
        ptx::wgmma_fence();
        gemm_chunk_ss<Traits::kWgmmaType>(s, ptx::smem_addr(smem.q[2 * j + kWg]), ptx::smem_addr(smem.ring[at.slot]),
                                          j > 0);
        ptx::wgmma_commit();
        at.advance(2);
        if (j > 0) {
          ptx::wgmma_wait<1>();
          if (lane == 0) ptx::mbarrier_arrive(&smem.slot_empty[release_at.slot]);
          release_at.advance(2);
        }
      }
      ptx::wgmma_wait<0>();
      ptx::fence_registers<32>(s);
      if (lane == 0) ptx::mbarrier_arrive(&smem.slot_empty[release_at.slot]);
    };
    // The two partials summed: both warpgroups hold the whole S afterwards.
    auto exchange = [&](float* s) {
#pragma unroll
      for (int i = 0; i < 32; ++i) smem.s_partial[kWg][i][thread_in_wg] = s[i];
      ptx::named_barrier_sync(Traits::kExchangeBarrier, 256);
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] += smem.s_partial[1 - kWg][i][thread_in_wg];
      ptx::named_barrier_sync(Traits::kExchangeBarrier, 256);  // both read before the next block's writes
    };
    // Score transform, mask, online softmax (O rescaled), P packed as the A operand of P V.
    auto softmax_to_p = [&](float* s, int n, uint32_t* p) {
      if (params.has_softcap) apply_softcap<32>(s, params.softcap);
      if constexpr (kAlibi) apply_alibi<32>(s, alibi_slope_dot, my_row0, n * 64 + 2 * t, seq.seqlen_k - seq.seqlen_q);
      if (!mask.tile_fully_visible(row0, row0 + 63, n * 64, n * 64 + 63)) {
        apply_mask<32>(s, mask, my_row0, n * 64 + 2 * t);
      }
      float block_max[2];
      thread_row_max<32>(s, block_max);
      float use_max[2], factor[2];
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        const float m = attn::quad_max(block_max[r]) * params.scale_log2;
        const float new_max = fmaxf(row_max_log2[r], m);
        factor[r] = row_max_log2[r] == -INFINITY ? 0.0f : ptx::exp2_approx(row_max_log2[r] - new_max);
        row_max_log2[r] = new_max;
        row_sum[r] *= factor[r];
        use_max[r] = new_max == -INFINITY ? 0.0f : new_max;  // a row with no visible key so far: p = 0
      }
#pragma unroll
      for (int j = 0; j < kVOwn; ++j) scale_rows<32>(o[j], factor);
      exp2_rows<32>(s, params.scale_log2, use_max, row_sum);
#pragma unroll
      for (int i = 0; i < 16; ++i) p[i] = ElementTraits<Element>::pack(s[2 * i], s[2 * i + 1]);
    };
    // O (this warpgroup's chunks) += P V: waits for all its V chunks (a block's V fits the ring),
    // issues, waits for the GEMMs and releases the chunks.
    auto accumulate_pv = [&](const uint32_t* p, SlotCursor<kSlots> at) {
      at.advance(kQkChunks + kWg);
      SlotCursor<kSlots> v_at = at, release_at = at;
#pragma unroll
      for (int j = 0; j < kVOwn; ++j, at.advance(2)) ptx::mbarrier_wait(&smem.slot_full[at.slot], at.phase);
      ptx::wgmma_fence();
#pragma unroll
      for (int j = 0; j < kVOwn; ++j, v_at.advance(2)) {
        gemm_rs_accumulate<64, 64, Traits::kWgmmaType>(o[j], p, ptx::smem_addr(smem.ring[v_at.slot]));
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int j = 0; j < kVOwn; ++j) ptx::fence_registers<32>(o[j]);
#pragma unroll
      for (int j = 0; j < kVOwn; ++j, release_at.advance(2)) {
        if (lane == 0) ptx::mbarrier_arrive(&smem.slot_empty[release_at.slot]);
      }
    };

    if (n_last >= n_first) {
      ptx::mbarrier_wait(&smem.q_full, 0);
      SlotCursor<kSlots> cursor;  // at the first chunk of the current block
#pragma unroll 1
      for (int n = n_first; n <= n_last; ++n) {
        float s[32];
        if constexpr (kStreamK) {
          stream_s(s, cursor);
        } else {
          compute_s(s, cursor);
        }
        exchange(s);
        uint32_t p[16];
        softmax_to_p(s, n, p);
        accumulate_pv(p, cursor);
        cursor.advance(kQkChunks + kVChunks);
      }
    }
    // ---- epilogue: O / l in the element type, LSE (natural log; -inf for a row that saw no key) -------
    float inv_sum[2], lse[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const float sum = attn::quad_sum(row_sum[r]);
      inv_sum[r] = sum > 0.0f ? 1.0f / sum : 0.0f;
      lse[r] = sum > 0.0f ? (row_max_log2[r] + __log2f(sum)) * attn::kLn2 : -INFINITY;
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = my_row0 + 8 * r;
      if (row >= seq.seqlen_q) continue;
      uint16_t* o_row = static_cast<uint16_t*>(params.o) +
                        attn::token_offset(packed, params.o_batch_stride, params.o_seq_stride, params.o_head_stride,
                                           batch, seq.q_start + row, head);
#pragma unroll
      for (int j = 0; j < kVOwn; ++j) {
        const int chunk_col = v_col0 + 64 * (2 * j + kWg);
        if (chunk_col >= params.head_dim_v) continue;
#pragma unroll
        for (int i = 2 * r; i < 32; i += 4) {
          const int col = chunk_col + acc_col(i, t);  // even; head dims are multiples of 8
          if (col < params.head_dim_v) {
            *reinterpret_cast<uint32_t*>(o_row + col) =
                ElementTraits<Element>::pack(o[j][i] * inv_sum[r], o[j][i + 1] * inv_sum[r]);
          }
        }
      }
      if (dv_part == 0 && kWg == 0 && t == 0 && params.lse != nullptr) {
        const int64_t lse_batch = packed ? 0 : int64_t(batch) * params.lse_batch_stride;
        params.lse[lse_batch + int64_t(head) * params.lse_head_stride + seq.q_start + row] = lse[r];
      }
    }
  };
  if (warpgroup == 1) {
    consume(std::integral_constant<int, 0>{});
  } else {
    consume(std::integral_constant<int, 1>{});
  }
}

// Launches the (kDqk, kDv) tile for a call whose head dims it covers (launch.cu: wide_tile):
// Dqk <= kDqk, and Dv in ceil(Dv / kDv) parts of kDv columns.
template <int kDqk, int kDv, typename Element>
Status launch_wide(const AttentionParams& p, cudaStream_t stream) {
  using Traits = WideTraits<kDqk, kDv, Element>;
  const int dv_parts = (p.head_dim_v + kDv - 1) / kDv;
  // Varlen: the maps span the packed tokens as one batch entry.
  const bool packed = p.is_varlen();
  const int rows_q = packed ? int(p.total_q) : p.seqlen_q, rows_k = packed ? int(p.total_k) : p.seqlen_k;
  const int map_batch = packed ? 1 : p.batch;
  const OperandView q{p.q, p.head_dim_qk, rows_q, p.heads_q, map_batch, p.q_seq_stride, p.q_head_stride, p.q_batch_stride};
  const OperandView k{p.k, p.head_dim_qk, rows_k, p.heads_kv, map_batch, p.k_seq_stride, p.k_head_stride, p.k_batch_stride};
  const OperandView v{p.v, p.head_dim_v, rows_k, p.heads_kv, map_batch, p.v_seq_stride, p.v_head_stride, p.v_batch_stride};
  const int v_tile_dim = dv_parts * kDv;  // every part's chunks inside the map's tile
  CUtensorMap tm_q, tm_k, tm_v;
  FC_RETURN_IF_ERROR(encode_operand_map(&tm_q, q, p.dtype, kDqk, 64, 1));
  if (p.k != nullptr && p.v != nullptr && rows_k > 0) {
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_k, k, p.dtype, kDqk, 64, 1));
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_v, v, p.dtype, v_tile_dim, 64, 1));
  } else {
    tm_k = tm_v = tm_q;  // no keys (k/v may be null): never loaded, every query block's KV range is empty
  }
  WideParams w;
  w.o = p.o;
  w.lse = p.lse;
  w.o_batch_stride = p.o_batch_stride, w.o_seq_stride = p.o_seq_stride, w.o_head_stride = p.o_head_stride;
  w.lse_batch_stride = p.lse_batch_stride, w.lse_head_stride = p.lse_head_stride;
  w.cu_seqlens_q = p.cu_seqlens_q, w.cu_seqlens_k = p.cu_seqlens_k, w.seqused_k = p.seqused_k;
  w.total_q = p.total_q, w.total_k = p.total_k;
  w.seqlen_q = p.seqlen_q, w.seqlen_k = p.seqlen_k, w.heads_per_kv = p.heads_q / p.heads_kv;
  w.head_dim_v = p.head_dim_v;
  w.dv_parts = dv_parts;
  w.qk_per_chunk = per_chunk_map(p.head_dim_qk, kDqk);
  w.v_per_chunk = per_chunk_map(p.head_dim_v, v_tile_dim);
  w.rule = attn::make_mask(p, p.seqlen_q, p.seqlen_k);
  w.mask_align = p.mask_align;
  // The scale and softcap (the kernel reads the ALiBi slopes).
  const attn::ScoreTransform transform = attn::shared_score_transform(p);
  w.scale_log2 = transform.scale * attn::kLog2e;
  w.has_softcap = transform.softcap > 0.0f;
  w.softcap = transform.dot_softcap();
  w.alibi_slopes = p.alibi_slopes;
  w.alibi_batch_stride = p.alibi_batch_stride;
  w.inv_scale = 1.0f / transform.scale;
  auto kernel = p.alibi_slopes != nullptr ? &wide_forward_kernel<Traits, true> : &wide_forward_kernel<Traits, false>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Traits::kSmemBytes)));
  const dim3 grid(unsigned((p.seqlen_q + 63) / 64 * dv_parts), unsigned(p.heads_q), unsigned(p.batch));
  if (grid.x == 0) return Status::Ok();
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, w);
  return cuda_status(cudaGetLastError(), "sm90 wide_forward_kernel");
}

}  // namespace flashcore::sm90::wide

// One line per generated instantiation unit (cmake/FlashcoreKernels.cmake).
#define FLASHCORE_SM90_WIDE_INSTANTIATE(DQK, DV, ELEMENT)                                              \
  template flashcore::Status flashcore::sm90::wide::launch_wide<DQK, DV, ELEMENT>(const flashcore::AttentionParams&, \
                                                                                 cudaStream_t);
