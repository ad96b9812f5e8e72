// The sm90 forward for head dims above 256 (docs/design/large-head-dims.md), first version: Dqk = Dv
// = kD (a multiple of 128, up to 512), dense calls, one CTA of 64 query rows per (query block, head,
// batch entry), no clusters. Built with FLASHCORE_BUILD_SM90_WIDE (default ON).
//
//   warpgroup 0   producer: one thread loads Q once (kD/64 chunks) and streams, per KV block of 64
//                 keys, K's chunks then V's chunks through a ring of kSlots 8 KiB slots
//   warpgroups 1, 2  consumers, w = 0, 1: warpgroup w owns Q/K chunks [w kD/128, (w+1) kD/128) for
//                 S = Q K^T and O's columns [w kD/2, (w+1) kD/2). Each computes its partial S over its
//                 chunks, the two exchange partials through shared memory and sum them, both run the
//                 same online softmax, each multiplies P by its V chunks.
//
// Every ring slot is read by exactly one warpgroup (the owner of its chunk), whose 4 warps release it.
// The producer and both consumers walk the same chunk sequence (K 0..C-1, V 0..C-1 per block), so a
// chunk's slot and phase follow from its position in it.
#pragma once

#include <cuda.h>

#include <cstdint>

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

namespace flashcore::sm90::wide {

struct WideParams {
  void* o = nullptr;
  float* lse = nullptr;
  int64_t o_batch_stride = 0, o_seq_stride = 0, o_head_stride = 0;
  int64_t lse_batch_stride = 0, lse_head_stride = 0;
  int seqlen_q = 0, seqlen_k = 0, heads_per_kv = 1;
  attn::VisibilityMask mask;
  float scale_log2 = 1.0f;
  bool has_softcap = false;
  attn::DotSoftcap softcap;
};

template <int kD_, typename Element_>
struct WideTraits {
  using Element = Element_;
  static constexpr ptx::WgmmaType kWgmmaType = ElementTraits<Element>::kWgmma;
  static constexpr int kD = kD_;
  static constexpr int kBlockM = 64, kBlockN = 64;
  static constexpr int kChunks = kD / 64;         // 64-column chunks of Q, K, V and O
  static constexpr int kOwnChunks = kChunks / 2;  // per consumer warpgroup
  static constexpr int kSlots = 12;
  static constexpr uint32_t kChunkBytes = 64 * 64 * 2;
  static constexpr int kThreads = 384;
  static constexpr int kProducerRegs = 24, kConsumerRegs = 240;
  static constexpr int kExchangeBarrier = ptx::kFirstNamedBarrier;
  static_assert(kD % 128 == 0 && kD / 2 <= 256, "kD: a multiple of 128 up to 512 (each warpgroup owns kD/2 <= 256 columns)");

  struct alignas(1024) SharedStorage {
    alignas(1024) uint16_t q[kChunks][64 * 64];
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

// The KV blocks a query block sees: [first, last], empty when last < first.
FC_DEVICE void kv_blocks(const WideParams& p, int row0, int& first, int& last) {
  const int row_last = min(row0 + 63, p.seqlen_q - 1);
  const int key_first = max(p.mask.first_key(row0), 0);
  const int key_last = min(p.mask.last_key(row_last), p.seqlen_k - 1);
  first = key_first / 64;
  last = key_last >= key_first ? key_last / 64 : first - 1;
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

template <class Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    wide_forward_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                        const __grid_constant__ CUtensorMap tm_v, const __grid_constant__ WideParams params) {
  using Element = typename Traits::Element;
  using Storage = typename Traits::SharedStorage;
  constexpr int kChunks = Traits::kChunks, kOwn = Traits::kOwnChunks, kSlots = Traits::kSlots;
  extern __shared__ uint8_t smem_raw[];
  const uint32_t misalign = ptx::smem_addr(smem_raw) & 1023u;
  Storage& smem = *reinterpret_cast<Storage*>(smem_raw + ((1024u - misalign) & 1023u));

  const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
  const int m_block = blockIdx.x, head = blockIdx.y, batch = blockIdx.z;
  const int head_kv = head / params.heads_per_kv;
  const int row0 = m_block * 64;
  int n_first, n_last;
  kv_blocks(params, row0, n_first, n_last);

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
    ptx::mbarrier_arrive_expect_tx(&smem.q_full, kChunks * Traits::kChunkBytes);
#pragma unroll 1
    for (int c = 0; c < kChunks; ++c) ptx::tma_load_5d(smem.q[c], &tm_q, &smem.q_full, 0, row0, c, head, batch);
    SlotCursor<kSlots> cursor;
#pragma unroll 1
    for (int n = n_first; n <= n_last; ++n) {
#pragma unroll 1
      for (int part = 0; part < 2; ++part) {
        const CUtensorMap* map = part == 0 ? &tm_k : &tm_v;
#pragma unroll 1
        for (int c = 0; c < kChunks; ++c, cursor.advance()) {
          ptx::mbarrier_wait(&smem.slot_empty[cursor.slot], cursor.phase ^ 1u);  // fresh: reports free
          ptx::mbarrier_arrive_expect_tx(&smem.slot_full[cursor.slot], Traits::kChunkBytes);
          ptx::tma_load_5d(smem.ring[cursor.slot], map, &smem.slot_full[cursor.slot], 0, n * 64, c, head_kv, batch);
        }
      }
    }
    return;
  }

  ptx::setmaxnreg_inc<Traits::kConsumerRegs>();
  const int wg = warpgroup - 1;  // 0 or 1
  const int thread_in_wg = threadIdx.x - 128 * warpgroup;
  const int g = lane / 4, t = lane % 4;
  const int my_row0 = row0 + 16 * warp + g;  // this thread's local row 0; row 1 is 8 further

  float o[kOwn][32];
#pragma unroll
  for (int c = 0; c < kOwn; ++c)
#pragma unroll
    for (int i = 0; i < 32; ++i) o[c][i] = 0.0f;
  float row_max_log2[2] = {-INFINITY, -INFINITY}, row_sum[2] = {0.0f, 0.0f};

  if (n_last >= n_first) {
    ptx::mbarrier_wait(&smem.q_full, 0);
    SlotCursor<kSlots> cursor;  // at the first chunk of the current block
#pragma unroll 1
    for (int n = n_first; n <= n_last; ++n) {
      // ---- partial S over this warpgroup's Q/K chunks --------------------------------------------
      float s[32];
      SlotCursor<kSlots> k_at = cursor;
      k_at.advance(wg * kOwn);
      ptx::wgmma_fence();
#pragma unroll
      for (int c = 0; c < kOwn; ++c) {
        ptx::mbarrier_wait(&smem.slot_full[k_at.slot], k_at.phase);
        gemm_chunk_ss<Traits::kWgmmaType>(s, ptx::smem_addr(smem.q[wg * kOwn + c]), ptx::smem_addr(smem.ring[k_at.slot]),
                                          c > 0);
        k_at.advance();
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers<32>(s);
      {
        SlotCursor<kSlots> r = cursor;
        r.advance(wg * kOwn);
#pragma unroll
        for (int c = 0; c < kOwn; ++c, r.advance()) {
          if (lane == 0) ptx::mbarrier_arrive(&smem.slot_empty[r.slot]);
        }
      }
      // ---- the two partials summed (both warpgroups hold the whole S afterwards) -------------------
#pragma unroll
      for (int i = 0; i < 32; ++i) smem.s_partial[wg][i][thread_in_wg] = s[i];
      ptx::named_barrier_sync(Traits::kExchangeBarrier, 256);
#pragma unroll
      for (int i = 0; i < 32; ++i) s[i] += smem.s_partial[1 - wg][i][thread_in_wg];
      ptx::named_barrier_sync(Traits::kExchangeBarrier, 256);  // both read before the next block's writes

      // ---- score transform, mask, online softmax ----------------------------------------------------
      if (params.has_softcap) apply_softcap<32>(s, params.softcap);
      if (!params.mask.tile_fully_visible(row0, row0 + 63, n * 64, n * 64 + 63)) {
        apply_mask<32>(s, params.mask, my_row0, n * 64 + 2 * t);
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
      for (int c = 0; c < kOwn; ++c) scale_rows<32>(o[c], factor);
      exp2_rows<32>(s, params.scale_log2, use_max, row_sum);
      uint32_t p[16];
#pragma unroll
      for (int i = 0; i < 16; ++i) p[i] = ElementTraits<Element>::pack(s[2 * i], s[2 * i + 1]);

      // ---- O (this warpgroup's columns) += P V ------------------------------------------------------
      SlotCursor<kSlots> v_at = cursor;
      v_at.advance(kChunks + wg * kOwn);
      ptx::wgmma_fence();
#pragma unroll
      for (int c = 0; c < kOwn; ++c) {
        ptx::mbarrier_wait(&smem.slot_full[v_at.slot], v_at.phase);
        gemm_rs_accumulate<64, 64, Traits::kWgmmaType>(o[c], p, ptx::smem_addr(smem.ring[v_at.slot]));
        v_at.advance();
      }
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
#pragma unroll
      for (int c = 0; c < kOwn; ++c) ptx::fence_registers<32>(o[c]);
      {
        SlotCursor<kSlots> r = cursor;
        r.advance(kChunks + wg * kOwn);
#pragma unroll
        for (int c = 0; c < kOwn; ++c, r.advance()) {
          if (lane == 0) ptx::mbarrier_arrive(&smem.slot_empty[r.slot]);
        }
      }
      cursor.advance(2 * kChunks);
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
  uint16_t* o_head = static_cast<uint16_t*>(params.o) + int64_t(batch) * params.o_batch_stride +
                     int64_t(head) * params.o_head_stride;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = my_row0 + 8 * r;
    if (row >= params.seqlen_q) continue;
    uint16_t* o_row = o_head + int64_t(row) * params.o_seq_stride + wg * (Traits::kD / 2);
#pragma unroll
    for (int c = 0; c < kOwn; ++c)
#pragma unroll
      for (int i = 2 * r; i < 32; i += 4) {
        const int col = 64 * c + acc_col(i, t);
        *reinterpret_cast<uint32_t*>(o_row + col) =
            ElementTraits<Element>::pack(o[c][i] * inv_sum[r], o[c][i + 1] * inv_sum[r]);
      }
    if (wg == 0 && t == 0 && params.lse != nullptr) {
      params.lse[int64_t(batch) * params.lse_batch_stride + int64_t(head) * params.lse_head_stride + row] = lse[r];
    }
  }
}

}  // namespace flashcore::sm90::wide
