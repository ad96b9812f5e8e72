// Test problems, error metrics, poisoning and the naive same-dtype baseline (see tensor_util.hpp).
#include "common/tensor_util.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/dtype.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore::testing {
namespace {

// Strides of one q/k/v/o tensor: `outer` is B (dense) or 1 (varlen, where `tokens` is total).
struct TensorStrides {
  int64_t batch = 0, seq = 0, head = 0;
  int64_t elements = 0;  // buffer size, padding included
};

TensorStrides strides_for(Layout layout, int64_t outer, int64_t tokens, int64_t heads, int64_t dim) {
  TensorStrides s;
  switch (layout) {
    case Layout::kBSHD:
      s.head = dim;
      s.seq = heads * dim;
      s.batch = tokens * s.seq;
      break;
    case Layout::kBHSD:
      s.seq = dim;
      s.head = tokens * dim;
      s.batch = heads * s.head;
      break;
    case Layout::kPaddedBSHD:
      s.head = dim + kLayoutPad;
      s.seq = heads * s.head + kLayoutPad;
      s.batch = tokens * s.seq;
      break;
    case Layout::kOddBSHD:
      s.head = dim + 1;
      s.seq = heads * s.head + 1;
      s.batch = tokens * s.seq;
      break;
  }
  s.elements = outer * s.batch;
  return s;
}

const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kBSHD: return "BSHD";
    case Layout::kBHSD: return "BHSD";
    case Layout::kPaddedBSHD: return "padded-BSHD";
    case Layout::kOddBSHD: return "odd-BSHD";
  }
  return "?";
}

// Fills `bytes` with the logical tensor [outer, tokens, heads, dim] drawn from `gen` in logical order.
void fill_random(std::vector<uint8_t>& bytes, const TensorStrides& st, int64_t outer, int64_t tokens,
                 int heads, int dim, DType dtype, float scale, std::mt19937_64& gen) {
  bytes.assign(size_t(st.elements * dtype_size(dtype)), 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t b = 0; b < outer; ++b)
    for (int64_t s = 0; s < tokens; ++s)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < dim; ++d)
          store_from_float(bytes.data(), b * st.batch + s * st.seq + h * st.head + d,
                           normal(gen) * scale, dtype);
}

bool is_poison(const void* base, int64_t index, DType dtype) {
  if (dtype == DType::kFloat32) {
    uint32_t bits;
    std::memcpy(&bits, static_cast<const uint32_t*>(base) + index, 4);
    return bits == 0xFFFFFFFFu;
  }
  return static_cast<const uint16_t*>(base)[index] == 0xFFFFu;
}

bool is_poison_float(float value) { return float_to_bits(value) == 0xFFFFFFFFu; }

// Calls fn(row, o_offset, lse_offset) for every (reference row, query head) in the dense reference
// order (row-major over [rows, Hq]); the offsets locate that row and head in o and lse.
template <typename Fn>
void for_each_row_head(const HostProblem& pr, Fn&& fn) {
  const AttentionParams& p = pr.params;
  for (int64_t row = 0; row < reference::reference_rows(p); ++row) {
    const int b = p.is_varlen() ? 0 : int(row / p.seqlen_q);      // varlen offsets ignore b
    const int64_t token = p.is_varlen() ? row : row % p.seqlen_q;  // packed row or sequence row
    for (int h = 0; h < p.heads_q; ++h) fn(row * p.heads_q + h, pr.o_offset(b, token, h), pr.lse_offset(b, token, h));
  }
}

float round_to_dtype(float value, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return fp16_to_float(float_to_fp16(value));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(value));
    case DType::kFloat32: return value;
  }
  return value;
}

}  // namespace

std::string TestCase::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << " B=" << batch << " Sq=" << seqlen_q << " Sk=" << seqlen_k << " Hq=" << heads_q
     << " Hkv=" << heads_kv << " Dqk=" << head_dim_qk << " Dv=" << head_dim_v << " " << layout_name(layout);
  if (causal) os << " causal";
  os << (align == MaskAlign::kBottomRight ? " bottom-right" : " top-left");
  if (window_left >= 0 || window_right >= 0) os << " window=(" << window_left << "," << window_right << ")";
  if (softcap > 0) os << " softcap=" << softcap;
  if (softmax_scale != 0) os << " scale=" << softmax_scale;
  if (alibi != AlibiLayout::kNone) os << (alibi == AlibiLayout::kPerHead ? " alibi[Hq]" : " alibi[B,Hq]");
  if (is_varlen()) {
    os << " varlen q=[";
    for (size_t i = 0; i < varlen_q.size(); ++i) os << (i ? "," : "") << varlen_q[i];
    os << "] k=[";
    for (size_t i = 0; i < varlen_k.size(); ++i) os << (i ? "," : "") << varlen_k[i];
    os << "]";
    if (varlen_tail_q != 0 || varlen_tail_k != 0) os << " tail q+" << varlen_tail_q << " k+" << varlen_tail_k;
  }
  if (!seqused_k.empty()) {
    os << " seqused_k=[";
    for (size_t i = 0; i < seqused_k.size(); ++i) os << (i ? "," : "") << seqused_k[i];
    os << "]";
  }
  for (const auto& [position, gain] : key_gain) os << " key" << position << "*" << gain;
  if (page_size > 0) os << " paged(" << page_size << (page_gap > 0 ? ", gap " + std::to_string(page_gap) : "") << ")";
  if (kv_batch_index) os << " kv_batch_idx";
  if (!leftpad_k.empty()) {
    os << " leftpad_k=[";
    for (size_t i = 0; i < leftpad_k.size(); ++i) os << (i ? "," : "") << leftpad_k[i];
    os << "]";
  }
  if (num_splits > 0) os << " num_splits=" << num_splits;
  os << " input_scale=" << input_scale << " seed=" << seed;
  return os.str();
}

int64_t HostProblem::o_offset(int b, int64_t token, int h) const {
  const int64_t batch_part = params.is_varlen() ? 0 : int64_t(b) * params.o_batch_stride;
  return batch_part + token * params.o_seq_stride + int64_t(h) * params.o_head_stride;
}

int64_t HostProblem::lse_offset(int b, int64_t token, int h) const {
  const int64_t batch_part = params.is_varlen() ? 0 : int64_t(b) * params.lse_batch_stride;
  return batch_part + int64_t(h) * params.lse_head_stride + token;
}

namespace {

// Moves a BSHD problem's K/V into the cache layout its TestCase asks for: the same logical keys at
// the rows attn::kv_row_offset gives (paged pool, indexed batch row), every other slot NaN.
void to_kv_cache_layout(HostProblem& pr, std::mt19937_64& gen) {
  const TestCase& tc = pr.test_case;
  AttentionParams& p = pr.params;
  const int elem = dtype_size(p.dtype);
  const AttentionParams dense = p;  // addresses of the logical keys
  const std::vector<uint8_t> k_dense = pr.k, v_dense = pr.v;
  if (!tc.leftpad_k.empty()) pr.leftpad_k.assign(tc.leftpad_k.begin(), tc.leftpad_k.end());
  int cache_rows = p.seqlen_k;  // rows a cache entry holds
  if (tc.page_size > 0) {
    const int pages_per_seq = std::max(1, (cache_rows + tc.page_size - 1) / tc.page_size);
    p.page_size = tc.page_size;
    p.pages_per_seq = pages_per_seq;
    p.block_table_batch_stride = pages_per_seq + 1;  // a padded table row
    p.num_pages = p.batch * pages_per_seq + 3;
    std::vector<int32_t> pages(static_cast<size_t>(p.num_pages));
    for (int n = 0; n < p.num_pages; ++n) pages[size_t(n)] = n;
    std::shuffle(pages.begin(), pages.end(), gen);
    pr.block_table.assign(size_t(p.batch) * size_t(p.block_table_batch_stride), -1);
    for (int b = 0; b < p.batch; ++b)
      for (int s = 0; s < pages_per_seq; ++s)
        pr.block_table[size_t(b) * size_t(p.block_table_batch_stride) + size_t(s)] = pages[size_t(b * pages_per_seq + s)];
    p.k_seq_stride = int64_t(p.heads_kv) * p.head_dim_qk;
    p.v_seq_stride = int64_t(p.heads_kv) * p.head_dim_v;
    p.k_head_stride = p.head_dim_qk;
    p.v_head_stride = p.head_dim_v;
    p.k_batch_stride = (p.page_size + tc.page_gap) * p.k_seq_stride;
    p.v_batch_stride = (p.page_size + tc.page_gap) * p.v_seq_stride;
    pr.k.assign(size_t(p.num_pages * p.k_batch_stride * elem), 0xFF);
    pr.v.assign(size_t(p.num_pages * p.v_batch_stride * elem), 0xFF);
  } else if (tc.kv_batch_index) {
    p.kv_batch = p.batch + 2;
    std::vector<int32_t> rows(static_cast<size_t>(p.kv_batch));
    for (int n = 0; n < p.kv_batch; ++n) rows[size_t(n)] = n;
    std::shuffle(rows.begin(), rows.end(), gen);
    pr.kv_batch_idx.assign(rows.begin(), rows.begin() + p.batch);
    pr.k.assign(size_t(int64_t(p.kv_batch) * p.k_batch_stride * elem), 0xFF);
    pr.v.assign(size_t(int64_t(p.kv_batch) * p.v_batch_stride * elem), 0xFF);
  } else {
    std::fill(pr.k.begin(), pr.k.end(), uint8_t(0xFF));
    std::fill(pr.v.begin(), pr.v.end(), uint8_t(0xFF));
  }
  p.block_table = pr.block_table.empty() ? nullptr : pr.block_table.data();
  p.kv_batch_idx = pr.kv_batch_idx.empty() ? nullptr : pr.kv_batch_idx.data();
  p.leftpad_k = pr.leftpad_k.empty() ? nullptr : pr.leftpad_k.data();
  p.k = pr.k.data();
  p.v = pr.v.data();
  // The logical keys of entry b are cache rows [leftpad, end): copy exactly those.
  for (int b = 0; b < p.batch; ++b) {
    const attn::SequenceExtent from = attn::sequence_extent(dense, b);
    const attn::SequenceExtent to = attn::sequence_extent(p, b);
    const int pad = int(to.k_start - (p.is_paged() ? 0 : from.k_start));
    for (int j = pad; j < from.seqlen_k; ++j)
      for (int h = 0; h < p.heads_kv; ++h) {
        const int64_t k_src = attn::kv_row_offset(dense, dense.k_batch_stride, dense.k_seq_stride, dense.k_head_stride,
                                                   b, from.k_start + j, h);
        const int64_t v_src = attn::kv_row_offset(dense, dense.v_batch_stride, dense.v_seq_stride, dense.v_head_stride,
                                                   b, from.k_start + j, h);
        const int64_t row = (p.is_paged() ? 0 : from.k_start) + j;
        const int64_t k_dst = attn::kv_row_offset(p, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, row, h);
        const int64_t v_dst = attn::kv_row_offset(p, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, row, h);
        std::memcpy(&pr.k[size_t(k_dst * elem)], &k_dense[size_t(k_src * elem)], size_t(p.head_dim_qk * elem));
        std::memcpy(&pr.v[size_t(v_dst * elem)], &v_dense[size_t(v_src * elem)], size_t(p.head_dim_v * elem));
      }
  }
}

}  // namespace

HostProblem make_problem(const TestCase& tc) {
  HostProblem pr;
  pr.test_case = tc;
  AttentionParams& p = pr.params;
  const bool varlen = tc.is_varlen();
  p.batch = varlen ? int(tc.varlen_q.size()) : tc.batch;
  p.heads_q = tc.heads_q;
  p.heads_kv = tc.heads_kv;
  p.head_dim_qk = tc.head_dim_qk;
  p.head_dim_v = tc.head_dim_v;
  p.dtype = tc.dtype;
  p.causal = tc.causal;
  p.mask_align = tc.align;
  p.window_left = tc.window_left;
  p.window_right = tc.window_right;
  p.softcap = tc.softcap;
  p.softmax_scale = tc.softmax_scale;

  int64_t outer = p.batch, q_tokens = tc.seqlen_q, k_tokens = tc.seqlen_k;
  if (varlen) {
    pr.cu_seqlens_q.assign(1, 0);
    pr.cu_seqlens_k.assign(1, 0);
    int max_q = 0, max_k = 0;
    for (int b = 0; b < p.batch; ++b) {
      pr.cu_seqlens_q.push_back(pr.cu_seqlens_q.back() + tc.varlen_q[size_t(b)]);
      pr.cu_seqlens_k.push_back(pr.cu_seqlens_k.back() + tc.varlen_k[size_t(b)]);
      max_q = std::max(max_q, tc.varlen_q[size_t(b)]);
      max_k = std::max(max_k, tc.varlen_k[size_t(b)]);
    }
    outer = 1;
    q_tokens = pr.cu_seqlens_q.back() + tc.varlen_tail_q;
    k_tokens = pr.cu_seqlens_k.back() + tc.varlen_tail_k;
    p.seqlen_q = max_q;
    p.seqlen_k = max_k;
    p.total_q = q_tokens;
    p.total_k = k_tokens;
  } else {
    p.seqlen_q = tc.seqlen_q;
    p.seqlen_k = tc.seqlen_k;
  }

  const TensorStrides qs = strides_for(tc.layout, outer, q_tokens, p.heads_q, p.head_dim_qk);
  const TensorStrides ks = strides_for(tc.layout, outer, k_tokens, p.heads_kv, p.head_dim_qk);
  const TensorStrides vs = strides_for(tc.layout, outer, k_tokens, p.heads_kv, p.head_dim_v);
  const TensorStrides os = strides_for(tc.layout, outer, q_tokens, p.heads_q, p.head_dim_v);
  std::mt19937_64 gen(tc.seed);
  fill_random(pr.q, qs, outer, q_tokens, p.heads_q, p.head_dim_qk, p.dtype, tc.input_scale, gen);
  fill_random(pr.k, ks, outer, k_tokens, p.heads_kv, p.head_dim_qk, p.dtype, tc.input_scale, gen);
  fill_random(pr.v, vs, outer, k_tokens, p.heads_kv, p.head_dim_v, p.dtype, tc.input_scale, gen);
  for (const auto& [position, gain] : tc.key_gain) {
    for (int64_t b = 0; b < p.batch; ++b) {
      const int64_t keys = varlen ? pr.cu_seqlens_k[size_t(b + 1)] - pr.cu_seqlens_k[size_t(b)] : k_tokens;
      if (position < 0 || position >= keys) continue;
      const int64_t token = (varlen ? pr.cu_seqlens_k[size_t(b)] : 0) + position;  // varlen: packed
      const int64_t row = (varlen ? 0 : b * ks.batch) + token * ks.seq;
      for (int h = 0; h < p.heads_kv; ++h)
        for (int d = 0; d < p.head_dim_qk; ++d) {
          const int64_t index = row + h * ks.head + d;
          store_from_float(pr.k.data(), index, load_as_float(pr.k.data(), index, p.dtype) * gain, p.dtype);
        }
    }
  }
  pr.o.assign(size_t(os.elements * dtype_size(p.dtype)), 0);
  pr.lse.assign(size_t(p.heads_q * q_tokens * outer), 0.0f);
  poison_outputs(pr);

  const int64_t batch_or_zero = varlen ? 0 : 1;  // varlen tensors have no batch axis
  p.q_batch_stride = qs.batch * batch_or_zero; p.q_seq_stride = qs.seq; p.q_head_stride = qs.head;
  p.k_batch_stride = ks.batch * batch_or_zero; p.k_seq_stride = ks.seq; p.k_head_stride = ks.head;
  p.v_batch_stride = vs.batch * batch_or_zero; p.v_seq_stride = vs.seq; p.v_head_stride = vs.head;
  p.o_batch_stride = os.batch * batch_or_zero; p.o_seq_stride = os.seq; p.o_head_stride = os.head;
  p.lse_head_stride = q_tokens;  // lse [B, Hq, Sq] or [Hq, total_q]
  p.lse_batch_stride = varlen ? 0 : int64_t(p.heads_q) * q_tokens;

  if (tc.alibi != AlibiLayout::kNone) {
    const int slope_batches = tc.alibi == AlibiLayout::kPerBatchHead ? std::max(p.batch, 1) : 1;
    for (int b = 0; b < slope_batches; ++b)
      for (int h = 0; h < p.heads_q; ++h)  // ALiBi's geometric slopes, varied per batch entry
        pr.alibi_slopes.push_back(std::exp2(-8.0f * float(h + 1) / float(p.heads_q)) * (1.0f + 0.5f * float(b)));
    p.alibi_batch_stride = tc.alibi == AlibiLayout::kPerBatchHead ? p.heads_q : 0;
  }
  pr.seqused_k.assign(tc.seqused_k.begin(), tc.seqused_k.end());

  p.q = pr.q.data();
  p.k = pr.k.data();
  p.v = pr.v.data();
  p.o = pr.o.data();
  p.lse = pr.lse.data();
  p.alibi_slopes = pr.alibi_slopes.empty() ? nullptr : pr.alibi_slopes.data();
  p.cu_seqlens_q = varlen ? pr.cu_seqlens_q.data() : nullptr;
  p.cu_seqlens_k = varlen ? pr.cu_seqlens_k.data() : nullptr;
  p.seqused_k = pr.seqused_k.empty() ? nullptr : pr.seqused_k.data();
  p.num_splits = tc.num_splits;
  if (tc.page_size > 0 || tc.kv_batch_index || !tc.leftpad_k.empty()) to_kv_cache_layout(pr, gen);
  return pr;
}

std::vector<double> read_output(const HostProblem& pr, const void* o_host) {
  const int dv = pr.params.head_dim_v;
  std::vector<double> out(static_cast<size_t>(reference::reference_rows(pr.params) * pr.params.heads_q * dv));
  for_each_row_head(pr, [&](int64_t row_head, int64_t o_off, int64_t) {
    for (int d = 0; d < dv; ++d) out[size_t(row_head * dv + d)] = load_as_float(o_host, o_off + d, pr.params.dtype);
  });
  return out;
}

std::vector<double> read_lse(const HostProblem& pr, const float* lse_host) {
  std::vector<double> lse(static_cast<size_t>(reference::reference_rows(pr.params) * pr.params.heads_q));
  for_each_row_head(pr, [&](int64_t row_head, int64_t, int64_t lse_off) { lse[size_t(row_head)] = lse_host[lse_off]; });
  return lse;
}

ErrorStats compare(const std::vector<double>& got, const std::vector<double>& ref) {
  ErrorStats st;
  if (got.size() != ref.size()) {
    st.non_finite = int64_t(std::max(got.size(), ref.size()));
    return st;
  }
  double diff_sq = 0, ref_sq = 0;
  for (size_t n = 0; n < ref.size(); ++n) {
    const double r = ref[n], g = got[n];
    if (std::isnan(r)) {
      ++st.non_finite;
    } else if (std::isinf(r)) {
      if (g != r) ++st.inf_mismatch;
    } else if (!std::isfinite(g)) {
      ++st.non_finite;
    } else {
      const double diff = std::fabs(g - r);
      diff_sq += diff * diff;
      ref_sq += r * r;
      st.max_abs = std::max(st.max_abs, diff);
      st.ref_max_abs = std::max(st.ref_max_abs, std::fabs(r));
      ++st.compared;
    }
  }
  // An all-zero reference (every row empty): report the absolute norm so any difference shows.
  st.rel_fro = ref_sq > 0 ? std::sqrt(diff_sq / ref_sq) : std::sqrt(diff_sq);
  return st;
}

std::string ErrorStats::describe() const {
  std::ostringstream os;
  os << "rel_fro=" << rel_fro << " max_abs=" << max_abs << " (ref max " << ref_max_abs << ", " << compared
     << " compared, " << non_finite << " NaN/Inf, " << inf_mismatch << " -inf mismatches)";
  return os.str();
}

void poison_buffer(std::vector<uint8_t>& bytes) { std::memset(bytes.data(), 0xFF, bytes.size()); }

void poison_outputs(HostProblem& pr) {
  poison_buffer(pr.o);
  const float nan_pattern = bits_to_float(0xFFFFFFFFu);
  std::fill(pr.lse.begin(), pr.lse.end(), nan_pattern);
}

int64_t count_unwritten_output(const HostProblem& pr, const void* o_host) {
  int64_t unwritten = 0;
  for_each_row_head(pr, [&](int64_t, int64_t o_off, int64_t) {
    for (int d = 0; d < pr.params.head_dim_v; ++d) unwritten += is_poison(o_host, o_off + d, pr.params.dtype);
  });
  return unwritten;
}

int64_t count_unwritten_lse(const HostProblem& pr, const float* lse_host) {
  int64_t unwritten = 0;
  for_each_row_head(pr, [&](int64_t, int64_t, int64_t lse_off) { unwritten += is_poison_float(lse_host[lse_off]); });
  return unwritten;
}

int64_t count_written_padding(const HostProblem& pr, const void* o_host) {
  const int64_t elements = int64_t(pr.o.size()) / dtype_size(pr.params.dtype);
  std::vector<bool> logical(static_cast<size_t>(elements), false);
  for_each_row_head(pr, [&](int64_t, int64_t o_off, int64_t) {
    for (int d = 0; d < pr.params.head_dim_v; ++d) logical[size_t(o_off + d)] = true;
  });
  int64_t written = 0;
  for (int64_t n = 0; n < elements; ++n) written += !logical[size_t(n)] && !is_poison(o_host, n, pr.params.dtype);
  return written;
}

std::vector<double> naive_same_dtype_reference(const AttentionParams& p) {
  const int64_t rows = reference::reference_rows(p);
  std::vector<double> out(size_t(rows * p.heads_q * p.head_dim_v), 0.0);
  const int group = p.heads_q / p.heads_kv;
  auto offset = [&](int64_t batch_stride, int64_t seq_stride, int64_t head_stride, int b, int64_t token, int h) {
    return (p.is_varlen() ? 0 : int64_t(b) * batch_stride) + token * seq_stride + int64_t(h) * head_stride;
  };
  reference::parallel_for(int64_t(p.batch) * p.heads_q, [&](int64_t item, int) {
    const int b = int(item / p.heads_q), h = int(item % p.heads_q), head_kv = h / group;
    const attn::SequenceExtent seq = attn::sequence_extent(p, b);
    const attn::VisibilityMask mask = attn::make_mask(p, seq.seqlen_q, seq.seqlen_k);
    const attn::ScoreTransform transform = attn::make_score_transform(p, b, h, seq.seqlen_q, seq.seqlen_k);
    const int dqk = p.head_dim_qk, dv = p.head_dim_v;
    // This head's K and V as float [Sk, D] (exact: the inputs are already in the dtype).
    std::vector<float> k_rows(static_cast<size_t>(seq.seqlen_k) * dqk), v_rows(size_t(seq.seqlen_k) * dv), q_row(static_cast<size_t>(dqk));
    for (int j = 0; j < seq.seqlen_k; ++j) {
      const int64_t k_off = attn::kv_row_offset(p, p.k_batch_stride, p.k_seq_stride, p.k_head_stride, b, seq.k_start + j, head_kv);
      const int64_t v_off = attn::kv_row_offset(p, p.v_batch_stride, p.v_seq_stride, p.v_head_stride, b, seq.k_start + j, head_kv);
      for (int d = 0; d < dqk; ++d) k_rows[size_t(j) * dqk + d] = load_as_float(p.k, k_off + d, p.dtype);
      for (int d = 0; d < dv; ++d) v_rows[size_t(j) * dv + d] = load_as_float(p.v, v_off + d, p.dtype);
    }
    std::vector<float> probs(static_cast<size_t>(std::max(seq.seqlen_k, 1))), acc(static_cast<size_t>(dv));
    for (int i = 0; i < seq.seqlen_q; ++i) {
      const int64_t row = p.is_varlen() ? seq.q_start + i : int64_t(b) * p.seqlen_q + i;
      double* dst = &out[size_t((row * p.heads_q + h) * dv)];
      const int first = mask.first_key(i), last = mask.last_key(i);
      if (first > last) continue;  // o = 0
      const int64_t q_off = offset(p.q_batch_stride, p.q_seq_stride, p.q_head_stride, b, seq.q_start + i, h);
      for (int d = 0; d < dqk; ++d) q_row[size_t(d)] = load_as_float(p.q, q_off + d, p.dtype);
      float row_max = -std::numeric_limits<float>::infinity();
      for (int j = first; j <= last; ++j) {
        float dot = 0;  // fp32 accumulation, in order
        for (int d = 0; d < dqk; ++d) dot += q_row[size_t(d)] * k_rows[size_t(j) * dqk + d];
        probs[size_t(j - first)] = transform.apply(dot, i, j);
        row_max = std::max(row_max, probs[size_t(j - first)]);
      }
      float row_sum = 0;
      for (int j = first; j <= last; ++j) {
        probs[size_t(j - first)] = std::exp(probs[size_t(j - first)] - row_max);
        row_sum += probs[size_t(j - first)];
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int j = first; j <= last; ++j) {
        const float prob = round_to_dtype(probs[size_t(j - first)] / row_sum, p.dtype);  // P in the dtype
        for (int d = 0; d < dv; ++d) acc[size_t(d)] += prob * v_rows[size_t(j) * dv + d];
      }
      for (int d = 0; d < dv; ++d) dst[d] = round_to_dtype(acc[size_t(d)], p.dtype);
    }
  });
  return out;
}

double default_rel_floor(DType dtype) { return dtype == DType::kFloat32 ? 1e-5 : 1e-6; }

Tolerance tolerance_from_naive(const ErrorStats& naive, double rel_floor) {
  Tolerance tol;
  tol.rel_fro = 2.0 * naive.rel_fro + rel_floor;
  tol.max_abs = 2.0 * naive.max_abs + rel_floor * naive.ref_max_abs;
  return tol;
}

std::string Tolerance::describe() const {
  std::ostringstream os;
  os << "tolerance rel_fro<=" << rel_fro << " max_abs<=" << max_abs;
  return os.str();
}

bool within(const ErrorStats& got, const Tolerance& tol) {
  return got.finite_ok() && got.rel_fro <= tol.rel_fro && got.max_abs <= tol.max_abs;
}

}  // namespace flashcore::testing
