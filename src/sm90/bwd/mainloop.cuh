// The sm90 backward's roles around one CTA's walk (tile_config.hpp has the work split):
//   Producer   (warp 0 of warpgroup 0, one thread): K, V of the CTA's block once, then per step Q,
//              dO, lse2 and D (TMA) into a kStages ring
//   DqWriter   (warp 1 of warpgroup 0, one thread): per step, the dQ partial in shared memory into
//              the fp32 workspace by TMA reduce-adds, one per 32-column box (kColSplit: absent; the
//              dQ pass computes dQ, dq_pass.cuh)
//   Consumer   (warpgroups 1, 2): the GEMMs and the elementwise math of each step
//
// Barriers (mbarriers in SharedStorage; "arrivals" = expected arrive count per phase):
//   kv_full       producer -> consumers   K and V landed (1 arrival + their bytes); waited once
//   q_full[s]     producer -> consumers   Q, lse2, D of the step in stage s landed (1 + bytes)
//   do_full[s]    producer -> consumers   dO of the step landed (1 + bytes)
//   q_empty[s]    consumers -> producer   every consumer warp's GEMMs that read Q and dO of stage s
//                                         completed (kConsumerWarps arrivals)
//   dq_full       heavy warpgroup        its four warps wrote the step's dQ partial and fenced it
//                 -> writer               for the async proxy (4 arrivals)
//   dq_empty      writer -> consumers     the reduce-adds finished reading the partial (1)
//   ds_half[b]    light -> heavy          the light warpgroup of step i (b = i % 2) wrote its dS
//                 warpgroup               half and fenced it (kWarpgroupThreads arrivals)
// Heavy and light steps (not kColSplit): both warpgroups write their dS half every step; warpgroup
// i % 2 (heavy) waits for the other's half and computes the step's whole dQ partial, the other
// (light) signals and goes on. So the two alternate 6 and 4 GEMMs a step and their elementwise
// phases drift apart instead of meeting at a barrier every step. ds_half is an mbarrier rather than
// a named barrier's arrive / sync so that racecheck sees the order between the two warpgroups'
// stores to the dQ staging tile. dS has two buffers: the light warpgroup writes step i's into
// buffer i % 2 after it met step i - 1's handoff as the heavy one, which the other warpgroup sent
// after its heavy step i - 2 (the last reader of that buffer) retired.
// Named barrier kDsReady (the 256 consumer threads): rows zeroed for the wgmma reads of both
// warpgroups; kColSplit (score-mod calls), both warpgroups wrote the step's dS^T and P^T, which
// each reads whole for its column half of dK, dV (two buffers, as above).
// Producer, writer and consumers walk the same steps (BwdWalk), so their ring positions agree
// without other communication.
#pragma once

#include <cuda.h>

#include <cmath>

#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "backward/workspace.hpp"
#include "ptx/barrier.hpp"
#include "ptx/math.hpp"
#include "ptx/mbarrier.hpp"
#include "ptx/mma_sm80.hpp"
#include "ptx/tma.hpp"
#include "ptx/wgmma.hpp"
#include "sm90/common/element.cuh"
#include "sm90/common/fragment.cuh"
#include "sm90/common/gemm.cuh"
#include "sm90/common/tma.cuh"
#include "sm90/bwd/params.hpp"
#include "sm90/bwd/tile_config.hpp"

namespace flashcore::sm90::bwd {

inline constexpr int kDsReadyBarrier = ptx::kFirstNamedBarrier;
inline constexpr int kPReadyBarrier = ptx::kFirstNamedBarrier + 1;  // kRoleSplit: P^T written
inline constexpr int kDsSentBarrier = ptx::kFirstNamedBarrier + 2;  // kRoleSplit: dS^T written
inline constexpr int kEpilogueBarrier = ptx::kFirstNamedBarrier + 3;  // + warpgroup: dK, dV staging (kernel.cuh)

// One CTA's walk: its KV block and the (query head, query block) steps that see it, in order
// (every head of the group, each over the query blocks m_begin .. m_begin + m_count - 1).
template <class Traits>
struct BwdWalk {
  int n_block = 0, n0 = 0, head_kv = 0, batch = 0;
  int group = 1, m_begin = 0, m_count = 0, steps = 0;
  int keys_in_tensor = 0;   // this sequence's rows of k/v (dK, dV are written for all of them)
  int q_batch = 0, k_batch = 0;  // the batch coordinate of the q/dout and k/v maps (0 when packed)
  attn::SequenceExtent seq;
  attn::VisibilityMask mask;

  FC_DEVICE static BwdWalk make(const AttentionParams& p, const BwdKernelArgs& args) {
    BwdWalk w;
    // Deterministic mode launches the last KV block first (BwdDqWriter::turn_of).
    w.n_block = args.deterministic ? int(gridDim.x) - 1 - int(blockIdx.x) : int(blockIdx.x);
    w.n0 = w.n_block * Traits::kBlockN;
    w.head_kv = blockIdx.y, w.batch = blockIdx.z;
    w.seq = attn::sequence_extent(p, w.batch);
    const bool packed_k = p.cu_seqlens_k != nullptr;
    if (packed_k) {
      const int64_t end = min((int64_t)p.cu_seqlens_k[w.batch + 1], p.total_k);
      w.keys_in_tensor = int(max(end - w.seq.k_start, (int64_t)0));
    } else {
      w.keys_in_tensor = p.seqlen_k;
    }
    w.q_batch = p.is_varlen() ? 0 : w.batch;
    w.k_batch = packed_k ? 0 : w.batch;
    w.mask = attn::make_mask(p, w.seq.seqlen_q, w.seq.seqlen_k);
    w.group = p.heads_q / p.heads_kv;
    // The query rows that see keys [n0, min(n0 + kBlockN, Sk) - 1]: n0 - max_diagonal <= i <=
    // last key - min_diagonal.
    if (w.n0 < w.seq.seqlen_k && w.seq.seqlen_q > 0) {
      const long long key_last = min(w.n0 + Traits::kBlockN, w.seq.seqlen_k) - 1;
      const long long lo = max(0LL, (long long)w.n0 - w.mask.max_diagonal());
      const long long hi = min((long long)w.seq.seqlen_q - 1, key_last - w.mask.min_diagonal());
      if (lo <= hi) {
        w.m_begin = int(lo / Traits::kBlockM);
        w.m_count = int(hi / Traits::kBlockM) + 1 - w.m_begin;
      }
    }
    w.steps = w.group * w.m_count;
    return w;
  }
  FC_DEVICE int head(int step) const { return head_kv * group + step / m_count; }
  FC_DEVICE int m0(int step) const { return (m_begin + step % m_count) * Traits::kBlockM; }
  // Keys of the block inside the sequence (its rows past them are zeroed before use), and query
  // rows of step m0's block inside it (kBlockM when the block is whole).
  FC_DEVICE int keys_valid() const { return seq.seqlen_k - n0; }
  FC_DEVICE int rows_valid(int m0) const { return seq.seqlen_q - m0; }
};

template <class Traits>
struct BwdProducer {
  using Storage = typename Traits::SharedStorage;
  static __device__ void run(Storage& smem, const CUtensorMap* tm_q, const CUtensorMap* tm_k, const CUtensorMap* tm_v,
                             const CUtensorMap* tm_do, const CUtensorMap* tm_lse2, const CUtensorMap* tm_row_d,
                             const BwdKernelArgs& args, const backward::BwdWorkspace& ws,
                             const BwdWalk<Traits>& walk) {
    ptx::mbarrier_arrive_expect_tx(&smem.kv_full, Traits::kKBytes + Traits::kVBytes);
    const int key_row = int(walk.seq.k_start) + walk.n0;  // a token row of the k/v maps
    tma_load_operand<Traits::kDqk, Traits::kBlockN>(smem.k, tm_k, &smem.kv_full, key_row, walk.head_kv, walk.k_batch,
                                                    args.qk_per_chunk);
    tma_load_operand<Traits::kDv, Traits::kBlockN>(smem.v, tm_v, &smem.kv_full, key_row, walk.head_kv, walk.k_batch,
                                                   args.v_per_chunk);
    ptx::wait_for_previous_grid();  // lse2 and D come from the preprocess (kernel.cuh)
    ptx::PipelineState<Traits::kStages> stage;
    for (int step = 0; step < walk.steps; ++step, stage.advance()) {
      const int h = walk.head(step), m0 = walk.m0(step);
      // A waiter on an "empty" barrier starts at parity 1, which a fresh barrier reports complete.
      ptx::mbarrier_wait(&smem.q_empty[stage.index], stage.phase ^ 1u);
      uint64_t* q_full = &smem.q_full[stage.index];
      ptx::mbarrier_arrive_expect_tx(q_full, Traits::kQBytes + 2 * Traits::kStatBytes);
      const int query_row = int(walk.seq.q_start) + m0;  // a token row of the q/dout maps
      tma_load_operand<Traits::kDqk, Traits::kBlockM>(smem.q[stage.index], tm_q, q_full, query_row, h, walk.q_batch,
                                                      args.qk_per_chunk);
      // A query block stays inside its sequence's workspace rows (backward::padded_rows).
      const int64_t row = ws.row(h, walk.batch, walk.seq.q_start, m0);
      ptx::tma_load_1d(smem.lse2[stage.index], tm_lse2, q_full, int(row));
      ptx::tma_load_1d(smem.row_d[stage.index], tm_row_d, q_full, int(row));
      uint64_t* do_full = &smem.do_full[stage.index];
      ptx::mbarrier_arrive_expect_tx(do_full, Traits::kDoBytes);
      tma_load_operand<Traits::kDv, Traits::kBlockM>(smem.dout[stage.index], tm_do, do_full, query_row, h,
                                                     walk.q_batch, args.v_per_chunk);
    }
  }
};

template <class Traits>
struct BwdDqWriter {
  using Storage = typename Traits::SharedStorage;

  // Deterministic mode: the KV blocks that see a query block are consecutive, from the one holding
  // the last key its last row sees down; they add in that order (the grid launches higher blocks
  // first, so the wait always ends). Descending is what keeps causal calls from serializing: the
  // first adder to a query block is the KV block on its diagonal, for which it is the first step.
  static __device__ int turn_of(const BwdWalk<Traits>& walk, int m0) {
    const int last_row = min(m0 + Traits::kBlockM, walk.seq.seqlen_q) - 1;
    return walk.mask.last_key(last_row) / Traits::kBlockN - walk.n_block;
  }

  // tm_dq: the workspace's dQ accumulator as an fp32 matrix of dq_row_stride columns (launch.cu).
  static __device__ void run(Storage& smem, const CUtensorMap* tm_dq, const BwdKernelArgs& args,
                             const backward::BwdWorkspace& ws, const BwdWalk<Traits>& walk) {
    ptx::wait_for_previous_grid();  // the preprocess zeroed the accumulator (kernel.cuh)
    uint32_t phase = 0;
    for (int step = 0; step < walk.steps; ++step, phase ^= 1u) {
      ptx::mbarrier_wait(&smem.dq_full, phase);
      const int m0 = walk.m0(step);
      const int64_t row = ws.row(walk.head(step), walk.batch, walk.seq.q_start, m0);
      int* turn = nullptr;
      if (args.deterministic) {
        turn = ws.turn(row);
        const int mine = turn_of(walk, m0);
        while (ptx::ld_acquire_gpu(turn) < mine) {
        }
        ptx::fence_proxy_async_global();  // the previous adder's sums -> this reduce-add (async proxy)
      }
      if constexpr (Traits::kDqTransposed) {
        ptx::bulk_reduce_add_f32(ws.dq_accum + row * backward::kDqTileCols, smem.dq,
                                 Traits::kBlockM * backward::kDqTileCols * 4);
      } else {
#pragma unroll
        for (int c = 0; c < Traits::kDqk / 32; ++c) {
          ptx::tma_reduce_add_2d(tm_dq, smem.dq + c * Traits::kBlockM * 32, 32 * c, int(row));
        }
      }
      ptx::tma_store_commit();
      if (args.deterministic) {
        // The adds complete, then the next KV block's turn.
        ptx::tma_store_wait_all();
        ptx::fence_proxy_async_global();
        ptx::red_release_gpu_add(turn, 1);
      } else {
        ptx::tma_store_wait_read();
      }
      ptx::mbarrier_arrive(&smem.dq_empty);
    }
    ptx::tma_store_wait_all();  // the adds are complete before the CTA's shared memory goes away
  }
};

// kScoreMod: the instantiation for calls with softcap or ALiBi, whose scores are
// alibi(softcap(scale * dot)) and whose dS carries the softcap's derivative (attn::ScoreTransform).
template <class Traits, bool kScoreMod>
struct BwdConsumer {
  using Storage = typename Traits::SharedStorage;
  using Element = typename Traits::Element;
  static constexpr int kBlockM = Traits::kBlockM;
  static constexpr int kBlockN = Traits::kBlockN;
  // kRoleSplit (d256 with the dQ pass, no score mod): warpgroup 0 computes S^T and P^T, warpgroup 1
  // dP^T and dS^T, each for all of the step's queries (run_role_split). Otherwise (kColSplit) each
  // warpgroup computes both for its half of the queries.
  static constexpr bool kRoleSplit = Traits::kRoleSplit && !kScoreMod;
  static constexpr int kSQueries = kRoleSplit ? Traits::kBlockM : Traits::kSQueries;
  static constexpr int kAccS = kSQueries / 2;   // S^T, dP^T: 64 keys x kSQueries queries
  static constexpr int kRegsP = kSQueries / 4;  // P^T, dS^T packed
  static constexpr int kRowBytes = Traits::kRowBytes;
  static constexpr ptx::WgmmaType kType = ElementTraits<Element>::kWgmma;
  // dP^T under the P^T math (Traits::kOverlapDp), except where the softcap's derivative (kRegsP more
  // registers) would leave S^T, dP^T and it short of registers (kBlockM 80: wgmmas serialized, ptxas
  // C7512).
  static constexpr bool kOverlapDp = Traits::kOverlapDp && !(kScoreMod && Traits::kBlockM > 64);

  Storage& smem;
  const AttentionParams& params;
  const BwdKernelArgs& args;
  const BwdWalk<Traits>& walk;
  const backward::BwdWorkspace& ws;
  int warpgroup;  // 0 or 1: keys [64 warpgroup, 64 warpgroup + 64) of the block (kColSplit: column half)
  int warp, lane;
  bool packed_q;  // varlen: q/dout rows are packed tokens

  // The first of the 64 keys (accumulator rows of S^T, dP^T, dK, dV) this warpgroup owns in the block.
  FC_DEVICE int own_key0() const { return Traits::kColSplit ? 0 : 64 * warpgroup; }
  FC_DEVICE int key_of_row(int r) const { return walk.n0 + own_key0() + 16 * warp + lane / 4 + 8 * r; }
  // The first of the step's queries (accumulator columns of S^T, dP^T) this warpgroup computes.
  FC_DEVICE int own_query0() const { return Traits::kColSplit && !kRoleSplit ? kSQueries * warpgroup : 0; }
  // kColSplit: shared-memory offset of this warpgroup's first 64-column chunk in a [chunks][rows][64]
  // tile of `rows` rows whose columns it splits in halves of `half_cols`.
  FC_DEVICE uint32_t half_offset(int rows, int half_cols) const {
    return Traits::kColSplit ? uint32_t(warpgroup * (half_cols / 64) * rows * kRowBytes) : 0u;
  }

  // S^T = K Q^T and dP^T = V dO^T of this warpgroup's keys and queries (A: 64 rows of the K / V
  // tile, B: kSQueries rows of the Q / dO stage).
  __device__ void issue_s(float* s, int stage) const {
    gemm_ss_overwrite<kSQueries, Traits::kDqk, kBlockN, kBlockM, kType>(
        s, ptx::smem_addr(smem.k) + own_key0() * kRowBytes, ptx::smem_addr(smem.q[stage]) + own_query0() * kRowBytes);
  }
  __device__ void issue_dp(float* dp, int stage) const {
    gemm_ss_overwrite<kSQueries, Traits::kDv, kBlockN, kBlockM, kType>(
        dp, ptx::smem_addr(smem.v) + own_key0() * kRowBytes,
        ptx::smem_addr(smem.dout[stage]) + own_query0() * kRowBytes);
  }
  // kColSplit: the step's P^T tile (after its dS^T tile in the ds buffer).
  FC_DEVICE uint32_t p_tile(int ds_buffer) const { return ptx::smem_addr(smem.ds[ds_buffer]) + kBlockN * kBlockM * 2; }
  // Chunk `chunk` (0, 1) of the step's dQ over the block's kBlockN keys; 16 keys per k-step.
  // kDqTransposed: dQ^T (dQ's 64-column chunk as rows, the step's queries as columns) = K^T dS^T,
  // A = K's chunk read MN-major (2048 bytes per k-step), B = dS read K-major from the ds buffer
  // (32 bytes per k-step inside a 64-key chunk).
  // Otherwise dQ = dS K for the chunk's 64 query rows: A = dS^T read MN-major from the ds buffer,
  // B = K read MN-major (as V in the forward's P V), 2048 bytes per k-step each.
  __device__ void issue_dq(float* dq, int ds_buffer, int chunk) const {
    if constexpr (Traits::kDqTransposed) {
      constexpr uint32_t kKChunkBytes = kBlockN * kRowBytes, kDsChunkBytes = kBlockM * kRowBytes;
      uint64_t desc_a = ptx::make_smem_desc(ptx::smem_addr(smem.k) + chunk * kKChunkBytes, kKChunkBytes, 1024);
      uint64_t desc_b = ptx::make_smem_desc(ptx::smem_addr(smem.ds[ds_buffer]), 16, 1024);
      ptx::opaque(desc_a);
      ptx::opaque(desc_b);
#pragma unroll
      for (int kk = 0; kk < kBlockN / 16; ++kk) {
        ptx::WgmmaSSTransA<kBlockM, kType>::run(dq, ptx::desc_advance(desc_a, kk * 16 * kRowBytes),
                                                ptx::desc_advance(desc_b, (kk / 4) * kDsChunkBytes + (kk % 4) * 32),
                                                kk > 0 ? 1 : 0);
      }
      return;
    }
    constexpr int kCols = Traits::kDqCols;
    constexpr uint32_t kChunkBytes = kBlockN * kRowBytes;  // one 64-column chunk of a kBlockN-row tile
    const uint32_t a = ptx::smem_addr(smem.ds[ds_buffer]) + (Traits::kDqSplitRows ? chunk * kChunkBytes : 0);
    const uint32_t b = ptx::smem_addr(smem.k) + (Traits::kDqSplitRows ? 0 : chunk) * kChunkBytes;
    uint64_t desc_a = ptx::make_smem_desc(a, kChunkBytes, 1024);
    uint64_t desc_b = ptx::make_smem_desc(b, kChunkBytes, 1024);
    ptx::opaque(desc_a);
    ptx::opaque(desc_b);
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
      ptx::WgmmaSSTrans<kCols, kType>::run(dq, ptx::desc_advance(desc_a, kk * 16 * kRowBytes),
                                                     ptx::desc_advance(desc_b, kk * 16 * kRowBytes), kk > 0 ? 1 : 0);
    }
  }

  // Whether (query, key) of accumulator element i is visible; queries past the sequence are not
  // (their rows hold zeros or padding, and a NaN there must not reach a gradient).
  __device__ bool visible(int i, int m0) const {
    const int query = m0 + own_query0() + acc_col(i, lane % 4);
    return attn::VisibilityMask::in_band(query, key_of_row(acc_row(i)), walk.mask.min_diagonal(),
                                         walk.mask.max_diagonal(), walk.mask.seqlen_k) &&
           query < walk.seq.seqlen_q;
  }

  // P^T = exp2(S^T scale_log2 - lse2), packed as the A operand of dV += P^T dO; 0 where invisible.
  // kScoreMod: P^T = exp2((alibi(softcap(scale dot))) log2 e - lse2), and the softcap's derivative
  // at each element into dcap16 (packed fp16 pairs: a factor in [0, 1] of a dS that is rounded to
  // 16 bits right after).
  template <bool kMasked>
  __device__ void probabilities(const float* s, uint32_t* p16, uint32_t* dcap16, int stage, int m0,
                                const attn::ScoreTransform& transform) const {
    const float* lse2 = smem.lse2[stage] + own_query0() + 2 * (lane % 4);
    const float scale_over_softcap = kScoreMod ? transform.dot_softcap().scale_over_softcap : 0.0f;
#pragma unroll
    for (int j = 0; j < kAccS / 4; ++j) {
      const float2 l = *reinterpret_cast<const float2*>(lse2 + 8 * j);
      float prob[4], dcap[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * j + e;
        const float row_lse2 = (e & 1) ? l.y : l.x;
        if constexpr (kScoreMod) {
          const float capped = transform.capped_score_fast(s[i], scale_over_softcap, &dcap[e]);
          const float score =
              capped - transform.alibi_bias<float>(m0 + own_query0() + acc_col(i, lane % 4), key_of_row(acc_row(i)));
          prob[e] = ptx::exp2_approx(fmaf(score, attn::kLog2e, -row_lse2));
        } else {
          prob[e] = ptx::exp2_approx(fmaf(s[i], args.scale_log2, -row_lse2));
        }
        if (kMasked && !visible(i, m0)) prob[e] = 0.0f;
      }
      p16[2 * j] = ElementTraits<Element>::pack(prob[0], prob[1]);
      p16[2 * j + 1] = ElementTraits<Element>::pack(prob[2], prob[3]);
      if constexpr (kScoreMod) {
        dcap16[2 * j] = ElementTraits<__half>::pack(dcap[0], dcap[1]);
        dcap16[2 * j + 1] = ElementTraits<__half>::pack(dcap[2], dcap[3]);
      }
    }
  }

  // dS^T = P^T (dP^T - D) [softcap'] from the rounded P^T (the operand dV used), packed as the A
  // operand of dK += dS^T Q; 0 where invisible.
  template <bool kMasked>
  __device__ void score_grads(const float* dp, const uint32_t* p16, const uint32_t* dcap16, uint32_t* ds16, int stage,
                              int m0) const {
    const float* row_d = smem.row_d[stage] + own_query0() + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kAccS / 4; ++j) {
      const float2 d = *reinterpret_cast<const float2*>(row_d + 8 * j);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 4 * j + 2 * h;
        const float2 prob = ptx::unpack2(p16[2 * j + h], Element{});
        float ds0 = prob.x * (dp[i] - d.x), ds1 = prob.y * (dp[i + 1] - d.y);
        if constexpr (kScoreMod) {
          const float2 dcap = ptx::unpack2(dcap16[2 * j + h], __half{});
          ds0 *= dcap.x, ds1 *= dcap.y;
        }
        if (kMasked) {
          if (!visible(i, m0)) ds0 = 0.0f;
          if (!visible(i + 1, m0)) ds1 = 0.0f;
        }
        ds16[2 * j + h] = ElementTraits<Element>::pack(ds0, ds1);
      }
    }
  }

  // dS^T (packed pairs: pair i holds key row 16 warp + g + 8 (i % 2) of this warpgroup's keys,
  // queries 8 (i / 2) + 2t, + 1) into the ds buffer, 128-byte swizzle (16-byte unit u of row r at
  // u ^ (r % 8)). kDqTransposed: transposed, [kBlockN/64][kBlockM queries][64 keys], by stmatrix:
  // matrix j of store m is pair 4 m + j (8 keys x 8 queries), whose query row q receives its 8 keys,
  // unit 2 warp + j % 2 of row q in this warpgroup's 64-key chunk. Otherwise as store_pairs.
  __device__ void store_ds(const uint32_t* ds16, int ds_buffer) const {
    if constexpr (Traits::kDqTransposed) {
      const int j = lane / 8, r = lane % 8;
      uint32_t chunk = ptx::smem_addr(smem.ds[ds_buffer]) + warpgroup * (kBlockM * kRowBytes);
      ptx::opaque(chunk);
      const int unit = 2 * warp + (j & 1);
#pragma unroll
      for (int m = 0; m < kRegsP / 4; ++m) {
        const int query = 8 * (2 * m + (j >> 1)) + r;
        ptx::stmatrix_x4_trans(chunk + query * kRowBytes + ((unit ^ r) * 16), ds16[4 * m], ds16[4 * m + 1],
                               ds16[4 * m + 2], ds16[4 * m + 3]);
      }
    } else {
      store_pairs(ds16, ptx::smem_addr(smem.ds[ds_buffer]));
    }
  }
  // Packed pairs of this warpgroup's keys and queries (dS^T, P^T) into a [kBlockM/64][kBlockN][64]
  // tile at `base`.
  __device__ void store_pairs(const uint32_t* pairs, uint32_t base) const {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kRegsP; ++i) {
      const int key = own_key0() + 16 * warp + g + 8 * (i & 1);
      const int query = own_query0() + 8 * (i >> 1);
      const uint32_t addr = base + (query / 64) * (kBlockN * kRowBytes) + key * kRowBytes +
                            ((((query % 64) / 8) ^ (key % 8)) * 16) + 4 * t;
      ptx::st_shared_b32(addr, pairs[i]);
    }
  }

  // The packed pairs store_pairs wrote at `base` for this thread's (warp, lane) of either warpgroup.
  __device__ void load_pairs(uint32_t* pairs, uint32_t base) const {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < kRegsP; ++i) {
      const int key = own_key0() + 16 * warp + g + 8 * (i & 1);
      const int query = own_query0() + 8 * (i >> 1);
      pairs[i] = ptx::ld_shared_b32(base + (query / 64) * (kBlockN * kRowBytes) + key * kRowBytes +
                                    ((((query % 64) / 8) ^ (key % 8)) * 16) + 4 * t);
    }
  }

  // dQ's chunk `chunk` into the fp32 staging tile, [kDqk/32][kBlockM][32] floats with the
  // 128-byte swizzle (16-byte unit u of row r at u ^ (r % 8)). A 64-bit store is served per half
  // warp; there the quads g and g ^ 1 would write the same two units of adjacent rows (2-way
  // conflict), so odd quads store column block j ^ 2 of the chunk when even ones store block j.
  // kDqTransposed: the block in fragment order (backward/dq_tile.hpp): elements 4 j .. 4 j + 3 at
  // floats 4 (256 j + tid), tid = 128 chunk + this thread's index in its warpgroup (the thread of
  // warpgroup `chunk` that held these elements when each warpgroup computed its own chunk), so each
  // 16-byte store of a warp covers 512 contiguous bytes.
  __device__ void store_dq(const float* dq, int chunk) const {
    const uint32_t base = ptx::smem_addr(smem.dq);
    if constexpr (Traits::kDqTransposed) {
      const uint32_t thread = base + 16 * (128 * chunk + 32 * warp + lane);
#pragma unroll
      for (int j = 0; j < Traits::kAccDq / 4; ++j) {
        ptx::st_shared_f32x4(thread + 16 * backward::kDqTileThreads * j, dq[4 * j], dq[4 * j + 1], dq[4 * j + 2],
                             dq[4 * j + 3]);
      }
      return;
    }
    const int g = lane / 4, t = lane % 4;
    const bool swap = g & 1;
    const int row0 = (Traits::kDqSplitRows ? 64 * chunk : 0) + 16 * warp + g;
    const int col0 = (Traits::kDqSplitRows ? 0 : 64 * chunk) + 2 * t;
#pragma unroll
    for (int i = 0; i < Traits::kAccDq; i += 2) {
      const int block = i >> 2, r = acc_row(i);
      const int other = 4 * (block ^ 2) + 2 * r;  // the accumulator pair of column block j ^ 2
      const float x = swap ? dq[other] : dq[i], y = swap ? dq[other + 1] : dq[i + 1];
      const int row = row0 + 8 * r, col = col0 + 8 * (swap ? block ^ 2 : block);
      const int unit = (col % 32) / 4;
      if (col < Traits::kDqk) {
        ptx::st_shared_f32x2(base + (col / 32) * (Traits::kBlockM * 128) + row * 128 + ((unit ^ (row % 8)) * 16) +
                                 4 * (col % 4),
                             x, y);
      }
    }
  }

  // Rows [first_row, kRows) of a [chunks][kRows][64] tile become 0, by the 256 consumer threads;
  // the caller publishes them (publish_zeroed_rows).
  template <int kChunks, int kRows>
  __device__ void zero_rows(uint16_t* tile, int first_row) const {
    zero_tile_rows<kChunks, kRows>(tile, first_row, 128 * warpgroup + 32 * warp + lane, 256);
  }
  // Zeroed tile rows -> the wgmma reads of both warpgroups.
  __device__ void publish_zeroed_rows() const {
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(kDsReadyBarrier, 256);
  }
  // Packed calls: query rows of the stage past the sequence are a neighbour's tokens; their P and dS
  // are 0, but 0 * NaN is NaN in dK += dS^T Q and dV += P^T dO, so they become 0 (dense calls get
  // TMA's zeros there). Both warpgroups call it, after q_full.
  __device__ void zero_query_tail(int stage, uint32_t phase, int m0) const {
    if (!packed_q || walk.rows_valid(m0) >= kBlockM) return;
    ptx::mbarrier_wait(&smem.do_full[stage], phase);
    zero_rows<Traits::kDqkPad / 64, kBlockM>(smem.q[stage], walk.rows_valid(m0));
    zero_rows<Traits::kDvPad / 64, kBlockM>(smem.dout[stage], walk.rows_valid(m0));
    publish_zeroed_rows();
  }

  __device__ void run(float* dk, float* dv) const {
#pragma unroll
    for (int i = 0; i < Traits::kAccDk; ++i) dk[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < Traits::kAccDv; ++i) dv[i] = 0.0f;
    if (walk.steps == 0) return;
    ptx::mbarrier_wait(&smem.kv_full, 0);
    // K rows past the sequence's keys hold a packed neighbour's keys or keys past seqused_k (dense
    // calls past Sk get TMA's zeros): their dS is 0, but 0 * NaN is NaN in dQ = dS K. (V needs no
    // zeros: dP's invisible elements are replaced, not multiplied.)
    if (walk.keys_valid() < kBlockN) {
      zero_rows<Traits::kDqkPad / 64, kBlockN>(smem.k, walk.keys_valid());
      publish_zeroed_rows();
    }
    if constexpr (kRoleSplit) {
      run_role_split(dk, dv);
      return;
    }
    ptx::PipelineState<Traits::kStages> stage;
    uint32_t dq_phase = 0;
    const int key_first = walk.n0 + own_key0();
    for (int step = 0; step < walk.steps; ++step, stage.advance(), dq_phase ^= 1u) {
      const int m0 = walk.m0(step);
      const int ds_buffer = step & 1;
      float s[kAccS], dp[kAccS];
      uint32_t p16[kRegsP], ds16[kRegsP];
      uint32_t dcap16[kScoreMod ? kRegsP : 1];
      attn::ScoreTransform transform;
      if constexpr (kScoreMod) {
        transform = attn::make_score_transform(params, walk.batch, walk.head(step), walk.seq.seqlen_q,
                                               walk.seq.seqlen_k);
      }
      ptx::mbarrier_wait(&smem.q_full[stage.index], stage.phase);
      zero_query_tail(stage.index, stage.phase, m0);
      ptx::wgmma_fence();
      issue_s(s, stage.index);
      ptx::wgmma_commit();
      if constexpr (kOverlapDp) {
        ptx::mbarrier_wait(&smem.do_full[stage.index], stage.phase);
        ptx::wgmma_fence();
        issue_dp(dp, stage.index);
        ptx::wgmma_commit();
      }
      // S^T retired (kOverlapDp: dP^T may still run): P^T, then dV += P^T dO under the dS^T math.
      ptx::wgmma_wait<kOverlapDp ? 1 : 0>();
      ptx::fence_registers<kAccS>(s);
      const bool full_tile = m0 + kBlockM <= walk.seq.seqlen_q &&
                             walk.mask.tile_fully_visible(m0, m0 + kBlockM - 1, key_first, key_first + 63);
      if (full_tile) {
        probabilities<false>(s, p16, dcap16, stage.index, m0, transform);
      } else {
        probabilities<true>(s, p16, dcap16, stage.index, m0, transform);
      }
      if constexpr (Traits::kColSplit) {
        step_tail_col_split(dk, dv, dp, p16, dcap16, ds16, stage.index, ds_buffer, m0, full_tile);
        continue;
      }
      if constexpr (!kOverlapDp) {
        ptx::mbarrier_wait(&smem.do_full[stage.index], stage.phase);
        ptx::wgmma_fence();
        issue_dp(dp, stage.index);
        ptx::wgmma_commit();
      }
      ptx::wgmma_fence();
      gemm_rs_accumulate<Traits::kDvCols, kBlockM, kType>(
          dv, p16, ptx::smem_addr(smem.dout[stage.index]) + half_offset(kBlockM, Traits::kDvCols));
      ptx::wgmma_commit();
      ptx::wgmma_wait<1>();  // dP^T retired (dV may still run)
      ptx::fence_registers<kAccS>(dp);
      if (full_tile) {
        score_grads<false>(dp, p16, dcap16, ds16, stage.index, m0);
      } else {
        score_grads<true>(dp, p16, dcap16, ds16, stage.index, m0);
      }
      // dK += dS^T Q (A from registers, B read MN-major from the stage), and (kDkBeforeDsStore)
      // while dS^T goes to shared memory.
      if constexpr (!Traits::kDkBeforeDsStore) store_ds(ds16, ds_buffer);
      ptx::wgmma_fence();
      gemm_rs_accumulate<Traits::kDkCols, kBlockM, kType>(
          dk, ds16, ptx::smem_addr(smem.q[stage.index]) + half_offset(kBlockM, Traits::kDkCols));
      ptx::wgmma_commit();
      if constexpr (Traits::kDkBeforeDsStore) store_ds(ds16, ds_buffer);
      // This warpgroup's dS^T written (generic stores, read by wgmma through the async proxy).
      ptx::fence_proxy_async_smem();
      // A light step hands its dS half over and goes on; the heavy one (warpgroup step % 2) computes
      // the step's whole dQ partial below. dV and dK retire first either way: Q and dO are then
      // read for the last time (dQ reads K and dS), and on a heavy step dQ's two chunks take the
      // registers P^T and dS^T held (ptxas serializes the wgmmas if dK and the second chunk are in
      // flight together).
      const bool heavy = (step & 1) == warpgroup;
      if (!heavy) ptx::mbarrier_arrive(&smem.ds_half[step & 1]);
      ptx::wgmma_wait<0>();
      ptx::fence_registers<Traits::kAccDv>(dv);
      ptx::fence_registers<Traits::kAccDk>(dk);
      ptx::fence_registers<kRegsP>(p16);
      ptx::fence_registers<kRegsP>(ds16);
      if (lane == 0) ptx::mbarrier_arrive(&smem.q_empty[stage.index]);
      if (!heavy) continue;
      ptx::mbarrier_wait(&smem.ds_half[step & 1], (step >> 1) & 1);  // the other dS half
      float dq[2 * Traits::kAccDq];
      ptx::wgmma_fence();
      issue_dq(dq, ds_buffer, 0);
      issue_dq(dq + Traits::kAccDq, ds_buffer, 1);
      ptx::wgmma_commit();
      ptx::wgmma_wait<0>();
      ptx::fence_registers<2 * Traits::kAccDq>(dq);
      send_dq(dq, dq_phase);
    }
  }

  // kRoleSplit: per step, warpgroup 0 computes S^T = K Q^T and P^T for all kBlockM queries (m64n64:
  // half the shared-memory reads per FLOP of the m64n32 halves), writes P^T to shared memory and
  // signals kPReady, then dV += P^T dO for its column half from registers; warpgroup 1 computes
  // dP^T = V dO^T, waits for P^T, forms dS^T, writes it and signals kDsSent, then dK += dS^T Q (from
  // registers) and dV += P^T dO (P^T from shared memory) for its column half; warpgroup 0 waits for
  // dS^T and adds dK for its half. Each warpgroup retires its GEMMs before its next step, so the two
  // P^T / dS^T buffers are never overwritten while read (a warpgroup at step i + 2 has met the
  // other's signal of step i + 1, sent after its step i retired).
  __device__ void run_role_split(float* dk, float* dv) const {
    ptx::PipelineState<Traits::kStages> stage;
    for (int step = 0; step < walk.steps; ++step, stage.advance()) {
      const int m0 = walk.m0(step);
      const uint32_t p_addr = p_tile(step & 1), ds_addr = ptx::smem_addr(smem.ds[step & 1]);
      const uint32_t q_addr = ptx::smem_addr(smem.q[stage.index]);
      const uint32_t do_addr = ptx::smem_addr(smem.dout[stage.index]);
      const attn::ScoreTransform transform;  // no score mod on this path
      uint32_t p16[kRegsP], unused_dcap[1];
      ptx::mbarrier_wait(&smem.q_full[stage.index], stage.phase);
      zero_query_tail(stage.index, stage.phase, m0);
      const bool full_tile = m0 + kBlockM <= walk.seq.seqlen_q &&
                             walk.mask.tile_fully_visible(m0, m0 + kBlockM - 1, walk.n0, walk.n0 + kBlockN - 1);
      if (warpgroup == 0) {
        float s[kAccS];
        ptx::wgmma_fence();
        issue_s(s, stage.index);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_registers<kAccS>(s);
        if (full_tile) {
          probabilities<false>(s, p16, unused_dcap, stage.index, m0, transform);
        } else {
          probabilities<true>(s, p16, unused_dcap, stage.index, m0, transform);
        }
        store_pairs(p16, p_addr);
        ptx::fence_proxy_async_smem();  // P^T (generic stores) -> warpgroup 1's wgmma reads
        ptx::named_barrier_arrive(kPReadyBarrier, 256);
        ptx::mbarrier_wait(&smem.do_full[stage.index], stage.phase);
        ptx::wgmma_fence();
        gemm_rs_accumulate<Traits::kDvCols, kBlockM, kType>(dv, p16, do_addr + half_offset(kBlockM, Traits::kDvCols));
        ptx::wgmma_commit();
        ptx::named_barrier_sync(kDsSentBarrier, 256);  // warpgroup 1's dS^T is in shared memory
        ptx::wgmma_fence();
        gemm_ss_transb_accumulate<Traits::kDkCols, kBlockM, kType>(dk, ds_addr,
                                                                   q_addr + half_offset(kBlockM, Traits::kDkCols));
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_registers<kRegsP>(p16);
      } else {
        float dp[kAccS];
        uint32_t ds16[kRegsP];
        ptx::mbarrier_wait(&smem.do_full[stage.index], stage.phase);
        ptx::wgmma_fence();
        issue_dp(dp, stage.index);
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_registers<kAccS>(dp);
        ptx::named_barrier_sync(kPReadyBarrier, 256);  // warpgroup 0's P^T is in shared memory
        load_pairs(p16, p_addr);
        if (full_tile) {
          score_grads<false>(dp, p16, unused_dcap, ds16, stage.index, m0);
        } else {
          score_grads<true>(dp, p16, unused_dcap, ds16, stage.index, m0);
        }
        store_pairs(ds16, ds_addr);
        ptx::fence_proxy_async_smem();  // dS^T (generic stores) -> warpgroup 0's wgmma reads
        ptx::named_barrier_arrive(kDsSentBarrier, 256);
        ptx::wgmma_fence();
        gemm_rs_accumulate<Traits::kDkCols, kBlockM, kType>(dk, ds16, q_addr + half_offset(kBlockM, Traits::kDkCols));
        gemm_ss_transb_accumulate<Traits::kDvCols, kBlockM, kType>(dv, p_addr,
                                                                   do_addr + half_offset(kBlockM, Traits::kDvCols));
        ptx::wgmma_commit();
        ptx::wgmma_wait<0>();
        ptx::fence_registers<kRegsP>(p16);
        ptx::fence_registers<kRegsP>(ds16);
      }
      ptx::fence_registers<Traits::kAccDk>(dk);
      ptx::fence_registers<Traits::kAccDv>(dv);
      // Q and dO of this stage are read for the last time.
      if (lane == 0) ptx::mbarrier_arrive(&smem.q_empty[stage.index]);
    }
  }

  // kColSplit (score-mod calls), after P^T: P^T and dS^T of this warpgroup's queries to shared
  // memory; once both warpgroups' are there, dV += P^T dO and dK += dS^T Q over all the step's
  // queries for this warpgroup's column half (no dQ: the dQ pass computes it).
  __device__ void step_tail_col_split(float* dk, float* dv, float* dp, uint32_t* p16, const uint32_t* dcap16,
                                      uint32_t* ds16, int stage, int ds_buffer, int m0, bool full_tile) const {
    store_pairs(p16, p_tile(ds_buffer));
    ptx::wgmma_wait<0>();  // dP^T
    ptx::fence_registers<kAccS>(dp);
    if (full_tile) {
      score_grads<false>(dp, p16, dcap16, ds16, stage, m0);
    } else {
      score_grads<true>(dp, p16, dcap16, ds16, stage, m0);
    }
    store_ds(ds16, ds_buffer);
    // Both warpgroups' P^T and dS^T written (generic stores, read by wgmma through the async proxy).
    ptx::fence_proxy_async_smem();
    ptx::named_barrier_sync(kDsReadyBarrier, 256);
    ptx::wgmma_fence();
    gemm_ss_transb_accumulate<Traits::kDvCols, kBlockM, kType>(
        dv, p_tile(ds_buffer), ptx::smem_addr(smem.dout[stage]) + half_offset(kBlockM, Traits::kDvCols));
    gemm_ss_transb_accumulate<Traits::kDkCols, kBlockM, kType>(
        dk, ptx::smem_addr(smem.ds[ds_buffer]), ptx::smem_addr(smem.q[stage]) + half_offset(kBlockM, Traits::kDkCols));
    ptx::wgmma_commit();
    ptx::wgmma_wait<0>();
    ptx::fence_registers<Traits::kAccDk>(dk);
    ptx::fence_registers<Traits::kAccDv>(dv);
    ptx::fence_registers<kRegsP>(p16);
    ptx::fence_registers<kRegsP>(ds16);
    // Q and dO of this stage are read for the last time.
    if (lane == 0) ptx::mbarrier_arrive(&smem.q_empty[stage]);
  }

  // A heavy step's dQ partial (both chunks) into the staging tile, free once the previous step's
  // reduce-adds read it, then to the writer.
  __device__ void send_dq(const float* dq, uint32_t dq_phase) const {
    ptx::mbarrier_wait(&smem.dq_empty, dq_phase ^ 1u);
    store_dq(dq, 0);
    store_dq(dq + Traits::kAccDq, 1);
    ptx::fence_proxy_async_smem();  // these stores -> the reduce-adds (async proxy)
    __syncwarp();
    if (lane == 0) ptx::mbarrier_arrive(&smem.dq_full);
  }
};

}  // namespace flashcore::sm90::bwd
