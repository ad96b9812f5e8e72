// The fp64 CPU reference of the backward (docs/semantics.md): per (batch entry, KV head) it converts
// K and V to double, then for every query head of the group and every row recomputes the scores with
// the shared ScoreTransform, P = exp(S - lse) from the forward's LSE, and accumulates
//   D = dO . O,  dS = P (dO . V - D) softcap'(S),  dV += P dO,  dK += scale dS Q,  dQ = scale dS K
// in double. One work item owns one KV head, so dK and dV (summed over the group's query heads under
// GQA) are written once, with no atomics; every result is rounded once to the dtype.
#include <cmath>
#include <vector>

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/dtype.hpp"
#include "reference/cpu_common.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore::reference {
namespace {

struct GradientSink {
  std::vector<double> dq, dk, dv;  // dense [rows, Hq, Dqk], [rows_k, Hkv, Dqk], [rows_k, Hkv, Dv]
};

double load(const void* base, int64_t index, DType dtype) { return load_as_float(base, index, dtype); }

// Gradients of one (batch entry b, KV head) into dq (its query heads' rows) and dk, dv (its keys),
// as dense double rows of the sequence: dq [Sq_b][group][Dqk], dk [Sk_b][Dqk], dv [Sk_b][Dv].
void backward_kv_head(const BackwardParams& bp, int b, int head_kv, const attn::SequenceExtent& seq,
                      std::vector<double>& dq, std::vector<double>& dk, std::vector<double>& dv) {
  const AttentionParams& p = bp.forward;
  const int dqk = p.head_dim_qk, dvd = p.head_dim_v, group = p.heads_q / p.heads_kv;
  const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
  std::vector<double> k(size_t(seq.seqlen_k) * dqk), v(size_t(seq.seqlen_k) * dvd);
  for (int j = 0; j < seq.seqlen_k; ++j) {
    const int64_t k_row = token_offset(p, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start + j, head_kv);
    const int64_t v_row = token_offset(p, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, seq.k_start + j, head_kv);
    for (int d = 0; d < dqk; ++d) k[size_t(j) * dqk + d] = load(p.k, k_row + d, p.dtype);
    for (int d = 0; d < dvd; ++d) v[size_t(j) * dvd + d] = load(p.v, v_row + d, p.dtype);
  }
  dq.assign(size_t(seq.seqlen_q) * group * dqk, 0.0);
  dk.assign(size_t(seq.seqlen_k) * dqk, 0.0);
  dv.assign(size_t(seq.seqlen_k) * dvd, 0.0);
  std::vector<double> q(dqk), o(dvd), dout(dvd);
  for (int g = 0; g < group; ++g) {
    const int h = head_kv * group + g;
    const attn::ScoreTransform transform = attn::make_score_transform(p, b, h, seq.seqlen_q, seq.seqlen_k);
    const double scale = transform.scale;
    for (int i = 0; i < seq.seqlen_q; ++i) {
      const int first = mask.first_key(i), last = mask.last_key(i);
      if (first > last) continue;  // no visible key: contributes nothing, dq row stays 0
      const int64_t q_row = token_offset(p, p.q_batch_stride, p.q_seq_stride, p.q_head_stride, b, seq.q_start + i, h);
      const int64_t o_row = token_offset(p, p.o_batch_stride, p.o_seq_stride, p.o_head_stride, b, seq.q_start + i, h);
      const int64_t do_row = token_offset(p, bp.dout_batch_stride, bp.dout_seq_stride, bp.dout_head_stride, b,
                                          seq.q_start + i, h);
      for (int d = 0; d < dqk; ++d) q[d] = load(p.q, q_row + d, p.dtype);
      for (int d = 0; d < dvd; ++d) o[d] = load(p.o, o_row + d, p.dtype);
      for (int d = 0; d < dvd; ++d) dout[d] = load(bp.dout, do_row + d, p.dtype);
      const int64_t lse_batch = p.is_varlen() ? 0 : int64_t(b) * p.lse_batch_stride;
      const double lse = p.lse[lse_batch + int64_t(h) * p.lse_head_stride + seq.q_start + i];
      const double row_d = dot(dout.data(), o.data(), dvd);
      double* dq_row = &dq[(size_t(i) * group + g) * dqk];
      for (int j = first; j <= last; ++j) {
        const double capped = transform.softcapped(dot(q.data(), &k[size_t(j) * dqk], dqk));
        const double prob = std::exp(capped - transform.alibi_bias<double>(i, j) - lse);
        const double dprob = dot(dout.data(), &v[size_t(j) * dvd], dvd);
        const double dscore = prob * (dprob - row_d) * transform.softcap_derivative(capped) * scale;
        double* dv_row = &dv[size_t(j) * dvd];
        for (int d = 0; d < dvd; ++d) dv_row[d] += prob * dout[d];
        double* dk_row = &dk[size_t(j) * dqk];
        const double* k_row = &k[size_t(j) * dqk];
        for (int d = 0; d < dqk; ++d) {
          dk_row[d] += dscore * q[d];
          dq_row[d] += dscore * k_row[d];
        }
      }
    }
  }
}

}  // namespace

Status cpu_reference_backward(const BackwardParams& bp) {
  const AttentionParams& p = bp.forward;
  const int group = p.heads_q / p.heads_kv;
  struct Item {
    int b, head_kv;
  };
  std::vector<Item> items;
  std::vector<attn::SequenceExtent> seqs(size_t(p.batch));
  for (int b = 0; b < p.batch; ++b) {
    seqs[b] = attn::sequence_extent(p, b);
    for (int hk = 0; hk < p.heads_kv; ++hk) items.push_back({b, hk});
  }
  parallel_for(int64_t(items.size()), [&](int64_t n, int) {
    const Item it = items[size_t(n)];
    const attn::SequenceExtent& seq = seqs[size_t(it.b)];
    std::vector<double> dq, dk, dv;
    backward_kv_head(bp, it.b, it.head_kv, seq, dq, dk, dv);
    for (int i = 0; i < seq.seqlen_q; ++i) {
      for (int g = 0; g < group; ++g) {
        const int h = it.head_kv * group + g;
        const int64_t row = token_offset(p, bp.dq_batch_stride, bp.dq_seq_stride, bp.dq_head_stride, it.b,
                                         seq.q_start + i, h);
        for (int d = 0; d < p.head_dim_qk; ++d) {
          store_rounded(bp.dq, row + d, dq[(size_t(i) * group + g) * p.head_dim_qk + d], p.dtype);
        }
      }
    }
    // Keys past seqused_k (inside the sequence's cu_seqlens_k range, or the dense Sk) get zero
    // gradients: they were never read.
    const int keys_in_tensor = p.cu_seqlens_k != nullptr
                                   ? p.cu_seqlens_k[it.b + 1] - p.cu_seqlens_k[it.b]
                                   : p.seqlen_k;
    for (int j = 0; j < keys_in_tensor; ++j) {
      const int64_t k_row = token_offset(p, bp.dk_batch_stride, bp.dk_seq_stride, bp.dk_head_stride, it.b,
                                         seq.k_start + j, it.head_kv);
      const int64_t v_row = token_offset(p, bp.dv_batch_stride, bp.dv_seq_stride, bp.dv_head_stride, it.b,
                                         seq.k_start + j, it.head_kv);
      const bool used = j < seq.seqlen_k;
      for (int d = 0; d < p.head_dim_qk; ++d) {
        store_rounded(bp.dk, k_row + d, used ? dk[size_t(j) * p.head_dim_qk + d] : 0.0, p.dtype);
      }
      for (int d = 0; d < p.head_dim_v; ++d) {
        store_rounded(bp.dv, v_row + d, used ? dv[size_t(j) * p.head_dim_v + d] : 0.0, p.dtype);
      }
    }
  });
  // Varlen rows outside every sequence (cu_seqlens[B] <= row < total) are not the call's: left as is.
  return Status::Ok();
}

}  // namespace flashcore::reference
