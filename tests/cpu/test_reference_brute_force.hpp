// An independent statement of the attention function for the CPU tests: plain loops over an
// explicitly built score matrix, written from docs/semantics.md without the shared functors of
// attention/mask.hpp, so a mistake in those functors (or in the reference) shows as a mismatch.
#pragma once

#include <cmath>
#include <limits>
#include <vector>

#include "common/dtype.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::testing {

struct BruteForceResult {
  std::vector<double> out;  // [rows, Hq, Dv]
  std::vector<double> lse;  // [rows, Hq]
};

inline BruteForceResult brute_force_attention(const AttentionParams& p) {
  const bool varlen = p.cu_seqlens_q != nullptr;
  const int64_t rows = varlen ? p.total_q : int64_t(p.batch) * p.seqlen_q;
  BruteForceResult r;
  r.out.assign(size_t(rows * p.heads_q * p.head_dim_v), 0.0);
  r.lse.assign(size_t(rows * p.heads_q), -std::numeric_limits<double>::infinity());
  const double scale = p.softmax_scale != 0.0f ? double(p.softmax_scale)
                                               : double(1.0f / std::sqrt(float(p.head_dim_qk)));
  for (int b = 0; b < p.batch; ++b) {
    const int64_t q0 = varlen ? p.cu_seqlens_q[b] : 0, k0 = varlen ? p.cu_seqlens_k[b] : 0;
    const int sq = varlen ? p.cu_seqlens_q[b + 1] - p.cu_seqlens_q[b] : p.seqlen_q;
    int sk = varlen ? p.cu_seqlens_k[b + 1] - p.cu_seqlens_k[b] : p.seqlen_k;
    if (p.seqused_k != nullptr) sk = p.seqused_k[b];
    const int64_t qb = varlen ? 0 : b * p.q_batch_stride, kb = varlen ? 0 : b * p.k_batch_stride;
    const int64_t vb = varlen ? 0 : b * p.v_batch_stride;
    for (int h = 0; h < p.heads_q; ++h) {
      const int hk = h / (p.heads_q / p.heads_kv);
      const double slope = p.alibi_slopes ? double(p.alibi_slopes[b * p.alibi_batch_stride + h]) : 0.0;
      // The score matrix, -inf where masked.
      std::vector<std::vector<double>> score(static_cast<size_t>(sq), std::vector<double>(static_cast<size_t>(sk)));
      for (int i = 0; i < sq; ++i) {
        for (int j = 0; j < sk; ++j) {
          const long long off = p.mask_align == MaskAlign::kBottomRight ? sk - sq : 0;
          const bool left_ok = p.window_left < 0 || j >= i + off - p.window_left;
          const long long right = p.causal ? 0 : p.window_right;
          const bool right_ok = (!p.causal && p.window_right < 0) || j <= i + off + right;
          if (!(left_ok && right_ok)) {
            score[i][j] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double dot = 0;
          for (int d = 0; d < p.head_dim_qk; ++d) {
            dot += double(load_as_float(p.q, qb + (q0 + i) * p.q_seq_stride + h * p.q_head_stride + d, p.dtype)) *
                   double(load_as_float(p.k, kb + (k0 + j) * p.k_seq_stride + hk * p.k_head_stride + d, p.dtype));
          }
          double s = scale * dot;
          if (p.softcap > 0) s = double(p.softcap) * std::tanh(s / double(p.softcap));
          s -= slope * std::fabs(double(i) + double(sk) - double(sq) - double(j));
          score[i][j] = s;
        }
      }
      for (int i = 0; i < sq; ++i) {
        const int64_t row = varlen ? q0 + i : int64_t(b) * p.seqlen_q + i;
        double m = -std::numeric_limits<double>::infinity();
        for (int j = 0; j < sk; ++j) m = std::max(m, score[i][j]);
        if (m == -std::numeric_limits<double>::infinity()) continue;  // no visible key
        double sum = 0;
        for (int j = 0; j < sk; ++j) sum += std::exp(score[i][j] - m);
        r.lse[size_t(row * p.heads_q + h)] = m + std::log(sum);
        for (int j = 0; j < sk; ++j) {
          const double prob = std::exp(score[i][j] - m) / sum;
          for (int d = 0; d < p.head_dim_v; ++d) {
            r.out[size_t((row * p.heads_q + h) * p.head_dim_v + d)] +=
                prob * double(load_as_float(p.v, vb + (k0 + j) * p.v_seq_stride + hk * p.v_head_stride + d, p.dtype));
          }
        }
      }
    }
  }
  return r;
}

}  // namespace flashcore::testing
