// The fp64 CPU reference. Per (batch entry, query head, block of rows) it converts the rows' inputs
// to double, builds each row's scores over its visible keys with the shared ScoreTransform (double
// overload), and takes a max-subtracted softmax, so every rule of docs/semantics.md comes from the
// same functors (attention/mask.hpp) the GPU paths use.
#include "reference/cpu_reference.hpp"

#include <cmath>
#include <limits>

#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/dtype.hpp"
#include "reference/cpu_common.hpp"

namespace flashcore::reference {
namespace {

// Query rows per work item: enough to amortize converting one (batch, KV head) of K and V, small
// enough that a 2-core machine balances a single-head problem.
constexpr int kRowsPerItem = 32;

struct WorkItem {
  int batch_index;
  int head_q;
  int row_begin, row_end;  // query rows [row_begin, row_end) of the sequence
};

// One (batch entry, KV head) of K and V converted to dense double [Sk, D], kept per worker thread:
// consecutive work items share a KV head, so most items reuse the conversion.
struct KvScratch {
  int batch_index = -1, head_kv = -1;
  std::vector<double> k, v;
  std::vector<double> q_row, scores, o_row;
};

void load_kv(const AttentionParams& p, const attn::SequenceExtent& seq, int b, int head_kv,
             KvScratch* s) {
  if (s->batch_index == b && s->head_kv == head_kv) return;
  const int dqk = p.head_dim_qk, dv = p.head_dim_v;
  s->k.resize(size_t(seq.seqlen_k) * dqk);
  s->v.resize(size_t(seq.seqlen_k) * dv);
  for (int j = 0; j < seq.seqlen_k; ++j) {
    const int64_t k_row =
        attn::kv_row_offset(p, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start + j, head_kv);
    const int64_t v_row =
        attn::kv_row_offset(p, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, seq.k_start + j, head_kv);
    for (int d = 0; d < dqk; ++d) s->k[size_t(j) * dqk + d] = load_as_float(p.k, k_row + d, p.dtype);
    for (int d = 0; d < dv; ++d) s->v[size_t(j) * dv + d] = load_as_float(p.v, v_row + d, p.dtype);
  }
  s->batch_index = b;
  s->head_kv = head_kv;
}

// Computes every row and hands it to sink(b, h, seq, i, o_row /*Dv doubles*/, lse). The sink is
// called once per (b, h, row) of every sequence, from several threads, never twice for one row.
template <typename Sink>
void compute_rows(const AttentionParams& p, Sink&& sink) {
  std::vector<attn::SequenceExtent> seqs(size_t(p.batch));
  std::vector<WorkItem> items;
  const int group = p.heads_q / p.heads_kv;  // query heads per KV head
  for (int b = 0; b < p.batch; ++b) {
    seqs[b] = attn::sequence_extent(p, b);
    // Heads in KV-head order (h = kv * group + g) so neighbouring items share K and V.
    for (int h = 0; h < p.heads_q; ++h) {
      for (int r = 0; r < seqs[b].seqlen_q; r += kRowsPerItem) {
        items.push_back({b, h, r, std::min(seqs[b].seqlen_q, r + kRowsPerItem)});
      }
    }
  }
  std::vector<KvScratch> scratch(static_cast<size_t>(max_parallel_workers()));
  parallel_for(int64_t(items.size()), [&](int64_t n, int worker) {
    const WorkItem& item = items[size_t(n)];
    const int b = item.batch_index, h = item.head_q, head_kv = h / group;
    const attn::SequenceExtent& seq = seqs[size_t(b)];
    const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
    const attn::ScoreTransform transform = attn::make_score_transform(p, b, h, seq.seqlen_q, seq.seqlen_k);
    KvScratch& s = scratch[size_t(worker)];
    load_kv(p, seq, b, head_kv, &s);
    const int dqk = p.head_dim_qk, dv = p.head_dim_v;
    s.q_row.resize(size_t(dqk));
    s.o_row.resize(size_t(dv));
    s.scores.resize(size_t(std::max(seq.seqlen_k, 1)));
    for (int i = item.row_begin; i < item.row_end; ++i) {
      std::fill(s.o_row.begin(), s.o_row.end(), 0.0);
      const int first = mask.first_key(i), last = mask.last_key(i);
      if (first > last) {  // no visible key: o = 0, lse = -inf
        sink(b, h, seq, i, s.o_row.data(), kNegInf);
        continue;
      }
      const int64_t q_row = token_offset(p, p.q_batch_stride, p.q_seq_stride, p.q_head_stride, b,
                                         seq.q_start + i, h);
      for (int d = 0; d < dqk; ++d) s.q_row[d] = load_as_float(p.q, q_row + d, p.dtype);
      double row_max = kNegInf;
      for (int j = first; j <= last; ++j) {
        const double score = transform.apply(dot(s.q_row.data(), &s.k[size_t(j) * dqk], dqk), i, j);
        s.scores[size_t(j - first)] = score;
        row_max = std::max(row_max, score);
      }
      double row_sum = 0;
      for (int j = first; j <= last; ++j) {
        const double weight = std::exp(s.scores[size_t(j - first)] - row_max);
        row_sum += weight;
        const double* v_row = &s.v[size_t(j) * dv];
        for (int d = 0; d < dv; ++d) s.o_row[d] += weight * v_row[d];
      }
      for (int d = 0; d < dv; ++d) s.o_row[d] /= row_sum;
      sink(b, h, seq, i, s.o_row.data(), row_max + std::log(row_sum));
    }
  });
}

}  // namespace

Status cpu_reference_forward(const AttentionParams& p) {
  compute_rows(p, [&](int b, int h, const attn::SequenceExtent& seq, int i, const double* o_row,
                      double lse) {
    const int64_t o_row_offset = token_offset(p, p.o_batch_stride, p.o_seq_stride, p.o_head_stride,
                                              b, seq.q_start + i, h);
    for (int d = 0; d < p.head_dim_v; ++d) store_rounded(p.o, o_row_offset + d, o_row[d], p.dtype);
    if (p.lse != nullptr) {
      const int64_t batch_part = p.is_varlen() ? 0 : int64_t(b) * p.lse_batch_stride;
      p.lse[batch_part + int64_t(h) * p.lse_head_stride + seq.q_start + i] = float(lse);
    }
  });
  return Status::Ok();
}

void cpu_reference_forward_f64(const AttentionParams& p, std::vector<double>* out,
                               std::vector<double>* lse) {
  const int64_t rows = reference_rows(p);
  if (out != nullptr) out->assign(size_t(rows * p.heads_q * p.head_dim_v), 0.0);
  if (lse != nullptr) lse->assign(size_t(rows * p.heads_q), kNegInf);
  compute_rows(p, [&](int b, int h, const attn::SequenceExtent& seq, int i, const double* o_row,
                      double row_lse) {
    const int64_t row = p.is_varlen() ? seq.q_start + i : int64_t(b) * p.seqlen_q + i;
    if (out != nullptr) {
      double* dst = out->data() + (row * p.heads_q + h) * p.head_dim_v;
      std::copy(o_row, o_row + p.head_dim_v, dst);
    }
    if (lse != nullptr) (*lse)[size_t(row * p.heads_q + h)] = row_lse;
  });
}

}  // namespace flashcore::reference

namespace flashcore::detail {
namespace {

std::string cpu_supports(const AttentionParams&, const DeviceInfo& info) {
  if (info.pointers_on_host) return "";
  return "the CPU reference runs on host pointers; q is device memory";
}

Status cpu_run(const AttentionParams& params, const DeviceInfo&, cudaStream_t) {
  return reference::cpu_reference_forward(params);
}

}  // namespace

PathOps cpu_reference_path() { return {KernelPath::kCpuReference, &cpu_supports, &cpu_run}; }

namespace {
std::string cpu_backward_supports(const BackwardParams& params, const DeviceInfo& info) {
  return cpu_supports(params.forward, info);
}
Status cpu_backward_run(const BackwardParams& params, const DeviceInfo&, cudaStream_t) {
  return reference::cpu_reference_backward(params);
}
}  // namespace

BackwardOps cpu_reference_backward_path() {
  return {KernelPath::kCpuReference, &cpu_backward_supports, &cpu_backward_run};
}

}  // namespace flashcore::detail
