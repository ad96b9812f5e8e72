// The fp64 CPU reference backward (src/reference/cpu_reference_backward.cpp) against central finite
// differences of the fp64 forward, for every feature the forward has; and validate_backward's rules.
// Loss: L(q, k, v) = sum over rows, heads, d of dO * O(q, k, v), so dL/dx is what the backward
// computes for dO.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore {
namespace {

struct BackwardProblem {
  testing::HostProblem host;
  std::vector<double> dout_dense;    // [rows, Hq, Dv]
  std::vector<float> dout, dq, dk, dv;  // in the forward tensors' layouts (fp32)
  BackwardParams params;
};

// fp32 inputs, the forward run by the CPU reference (o, lse), a random dO.
BackwardProblem make_backward(const testing::TestCase& tc) {
  BackwardProblem bp{testing::make_problem(tc), {}, {}, {}, {}, {}, {}};
  AttentionParams& p = bp.host.params;
  EXPECT_TRUE(attention_forward(p).ok());
  const int64_t rows = reference::reference_rows(p);
  bp.dout_dense.resize(size_t(rows * p.heads_q * p.head_dim_v));
  std::mt19937 rng(uint32_t(tc.seed * 7 + 3));
  std::normal_distribution<double> normal;
  for (double& x : bp.dout_dense) x = normal(rng);
  bp.dout.assign(bp.host.o.size() / sizeof(float), 0.0f);
  const std::vector<int32_t>& cu = bp.host.cu_seqlens_q;
  for (int b = 0; b < p.batch; ++b) {
    const int64_t start = p.is_varlen() ? cu[b] : 0;
    const int sq = p.is_varlen() ? cu[b + 1] - cu[b] : p.seqlen_q;
    for (int i = 0; i < sq; ++i) {
      const int64_t row = p.is_varlen() ? start + i : int64_t(b) * p.seqlen_q + i;
      for (int h = 0; h < p.heads_q; ++h) {
        const int64_t off = bp.host.o_offset(b, start + i, h);
        for (int d = 0; d < p.head_dim_v; ++d) {
          bp.dout[size_t(off + d)] = float(bp.dout_dense[size_t((row * p.heads_q + h) * p.head_dim_v + d)]);
          bp.dout_dense[size_t((row * p.heads_q + h) * p.head_dim_v + d)] = bp.dout[size_t(off + d)];
        }
      }
    }
  }
  bp.dq.assign(bp.host.q.size() / sizeof(float), std::nanf(""));
  bp.dk.assign(bp.host.k.size() / sizeof(float), std::nanf(""));
  bp.dv.assign(bp.host.v.size() / sizeof(float), std::nanf(""));
  bp.params.forward = p;
  set_grad_strides_like_forward(bp.params);
  bp.params.dout = bp.dout.data();
  bp.params.dq = bp.dq.data();
  bp.params.dk = bp.dk.data();
  bp.params.dv = bp.dv.data();
  return bp;
}

double loss(const BackwardProblem& bp) {
  std::vector<double> out;
  reference::cpu_reference_forward_f64(bp.host.params, &out, nullptr);
  double l = 0;
  for (size_t n = 0; n < out.size(); ++n) l += bp.dout_dense[n] * out[n];
  return l;
}

// Central differences at `samples` elements of each of q, k, v (the sampled element's logical
// position does not matter: every element of the tensors is an input, padding excluded by only
// sampling elements the gradient wrote).
void expect_matches_finite_differences(const testing::TestCase& tc, const char* what) {
  BackwardProblem bp = make_backward(tc);
  const Status st = attention_backward(bp.params);
  ASSERT_TRUE(st.ok()) << what << ": " << st.message;
  struct Tensor {
    const char* name;
    std::vector<uint8_t>* data;
    const std::vector<float>* grad;
  } tensors[] = {{"q", &bp.host.q, &bp.dq}, {"k", &bp.host.k, &bp.dk}, {"v", &bp.host.v, &bp.dv}};
  std::mt19937 rng(uint32_t(tc.seed));
  constexpr double kStep = 1.0 / 256;  // exact in fp32 for the drawn magnitudes
  for (const Tensor& t : tensors) {
    float* x = reinterpret_cast<float*>(t.data->data());
    const size_t n = t.grad->size();
    int checked = 0;
    for (int attempt = 0; attempt < 400 && checked < 12; ++attempt) {
      const size_t e = std::uniform_int_distribution<size_t>(0, n - 1)(rng);
      const float g = (*t.grad)[e];
      if (std::isnan(g)) continue;  // padding (never written)
      ASSERT_TRUE(std::isfinite(g)) << what << " d" << t.name << "[" << e << "]";
      const float saved = x[e];
      x[e] = float(saved + kStep);
      const double up = loss(bp), h_up = double(x[e]) - saved;
      x[e] = float(saved - kStep);
      const double down = loss(bp), h_down = saved - double(x[e]);
      x[e] = saved;
      const double fd = (up - down) / (h_up + h_down);
      EXPECT_NEAR(g, fd, 2e-3 * std::max(1.0, std::fabs(fd))) << what << ": d" << t.name << "[" << e << "]";
      ++checked;
    }
    EXPECT_GT(checked, 0) << what << ": no written element of d" << t.name;
  }
}

testing::TestCase base_case() {
  testing::TestCase tc;
  tc.dtype = DType::kFloat32;
  tc.batch = 2, tc.seqlen_q = 19, tc.seqlen_k = 27;
  tc.heads_q = tc.heads_kv = 2;
  tc.head_dim_qk = tc.head_dim_v = 16;
  tc.seed = 5;
  return tc;
}

TEST(ReferenceBackward, DenseMatchesFiniteDifferences) { expect_matches_finite_differences(base_case(), "dense"); }

TEST(ReferenceBackward, CausalBothAlignmentsMatchFiniteDifferences) {
  testing::TestCase tc = base_case();
  tc.causal = true;
  expect_matches_finite_differences(tc, "causal bottom-right, Sq < Sk");
  tc.align = MaskAlign::kTopLeft;
  tc.seqlen_q = 30, tc.seqlen_k = 21;
  expect_matches_finite_differences(tc, "causal top-left, Sq > Sk");
}

TEST(ReferenceBackward, WindowSoftcapAndScaleMatchFiniteDifferences) {
  testing::TestCase tc = base_case();
  tc.window_left = 5, tc.window_right = 3;
  tc.softcap = 2.5f;
  tc.softmax_scale = 0.7f;
  tc.input_scale = 2.0f;
  expect_matches_finite_differences(tc, "window 5/3, softcap 2.5, scale 0.7");
}

TEST(ReferenceBackward, AlibiMatchesFiniteDifferences) {
  testing::TestCase tc = base_case();
  tc.causal = true;
  tc.alibi = testing::AlibiLayout::kPerBatchHead;
  expect_matches_finite_differences(tc, "causal ALiBi");
}

TEST(ReferenceBackward, GqaSumsDkDvOverTheGroupAndUnequalHeadDims) {
  testing::TestCase tc = base_case();
  tc.heads_q = 6, tc.heads_kv = 2;
  tc.head_dim_qk = 24, tc.head_dim_v = 8;
  tc.causal = true;
  expect_matches_finite_differences(tc, "GQA 6/2, Dqk 24, Dv 8");
}

TEST(ReferenceBackward, VarlenWithSequsedKMatchesFiniteDifferences) {
  testing::TestCase tc = base_case();
  tc.varlen_q = {7, 0, 12};
  tc.varlen_k = {9, 4, 15};
  tc.seqused_k = {6, 4, 15};
  tc.batch = 3;
  tc.causal = true;
  expect_matches_finite_differences(tc, "varlen + seqused_k, causal");
}

// Tokens of the packed tensors that no sequence owns do not reach the output: their gradient is 0,
// written (attention_backward zeroes them after any path), so callers may pass unzeroed buffers.
TEST(ReferenceBackward, VarlenTokensPastTheLastSequenceGetZeroGradients) {
  testing::TestCase tc = base_case();
  tc.varlen_q = {7, 12};
  tc.varlen_k = {9, 15};
  tc.varlen_tail_q = 3, tc.varlen_tail_k = 5;
  tc.batch = 2;
  BackwardProblem bp = make_backward(tc);
  ASSERT_TRUE(attention_backward(bp.params).ok());
  const AttentionParams& p = bp.params.forward;
  ASSERT_EQ(p.total_q, 19 + 3);
  ASSERT_EQ(p.total_k, 24 + 5);
  auto expect_zero_rows = [](const std::vector<float>& g, int64_t first, int64_t total, int heads, int dim,
                             int64_t seq_stride, int64_t head_stride, const char* name) {
    for (int64_t row = first; row < total; ++row)
      for (int h = 0; h < heads; ++h)
        for (int d = 0; d < dim; ++d)
          ASSERT_EQ(g[size_t(row * seq_stride + h * head_stride + d)], 0.0f) << name << " row " << row;
  };
  expect_zero_rows(bp.dq, 19, p.total_q, p.heads_q, p.head_dim_qk, p.q_seq_stride, p.q_head_stride, "dq");
  expect_zero_rows(bp.dk, 24, p.total_k, p.heads_kv, p.head_dim_qk, p.k_seq_stride, p.k_head_stride, "dk");
  expect_zero_rows(bp.dv, 24, p.total_k, p.heads_kv, p.head_dim_v, p.v_seq_stride, p.v_head_stride, "dv");
  for (const auto* g : {&bp.dq, &bp.dk, &bp.dv})
    for (float x : *g) ASSERT_FALSE(std::isnan(x)) << "every gradient element is written";
  expect_matches_finite_differences(tc, "varlen with tail tokens");
}

TEST(ReferenceBackward, RowsWithoutKeysGetZeroGradientsAndNoNan) {
  testing::TestCase tc = base_case();
  tc.causal = true;
  tc.seqlen_q = 30, tc.seqlen_k = 10;  // bottom-right: rows 0..19 see no key
  BackwardProblem bp = make_backward(tc);
  ASSERT_TRUE(attention_backward(bp.params).ok());
  const AttentionParams& p = bp.params.forward;
  for (int b = 0; b < p.batch; ++b) {
    for (int i = 0; i < p.seqlen_q; ++i) {
      for (int h = 0; h < p.heads_q; ++h) {
        for (int d = 0; d < p.head_dim_qk; ++d) {
          const float g = bp.dq[size_t(b * p.q_batch_stride + i * p.q_seq_stride + h * p.q_head_stride + d)];
          ASSERT_FALSE(std::isnan(g));
          if (i < 20) ASSERT_EQ(g, 0.0f) << "row " << i << " has no visible key";
        }
      }
    }
  }
  for (float g : bp.dk) ASSERT_FALSE(std::isnan(g));
  for (float g : bp.dv) ASSERT_FALSE(std::isnan(g));
  expect_matches_finite_differences(tc, "rows without keys");
}

TEST(ReferenceBackward, NanInputsPropagateToTheirGradients) {
  testing::TestCase tc = base_case();
  BackwardProblem bp = make_backward(tc);
  reinterpret_cast<float*>(bp.host.q.data())[3] = std::nanf("");  // row 0, head 0 of batch 0
  bp.params.forward = bp.host.params;
  ASSERT_TRUE(attention_backward(bp.params).ok());
  EXPECT_TRUE(std::isnan(bp.dq[3]));
  EXPECT_TRUE(std::isnan(bp.dk[0]));  // every key of (batch 0, head 0) saw the NaN row
}

// Host pointers: the backward's dispatch picks the CPU reference, and a pinned GPU path says why not.
TEST(BackwardDispatch, HostPointersSelectTheCpuReference) {
  BackwardProblem bp = make_backward(base_case());
  KernelPath chosen = KernelPath::kAuto;
  ASSERT_TRUE(select_backward_path(bp.params, &chosen).ok());
  EXPECT_EQ(chosen, KernelPath::kCpuReference);
  bp.params.forward.path = KernelPath::kSm80;
  const Status st = select_backward_path(bp.params, &chosen);
  EXPECT_EQ(st.code, StatusCode::kUnsupported);
  EXPECT_NE(st.message.find("sm80"), std::string::npos) << st.message;
}

TEST(BackwardValidation, NamesTheArgumentAndTheRule) {
  BackwardProblem bp = make_backward(base_case());
  auto message = [&](BackwardParams p) {
    const Status st = validate_backward(p);
    EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
    return st.message;
  };
  BackwardParams p = bp.params;
  p.forward.lse = nullptr;
  EXPECT_NE(message(p).find("lse: the backward reads the forward's LSE"), std::string::npos);
  p = bp.params;
  p.dq = nullptr;
  EXPECT_NE(message(p).find("dq: must not be null"), std::string::npos);
  p = bp.params;
  p.dout = nullptr;
  EXPECT_NE(message(p).find("dout: must not be null"), std::string::npos);
  p = bp.params;
  p.dk = const_cast<void*>(p.forward.k);
  EXPECT_NE(message(p).find("dk: must not overlap k"), std::string::npos);
  p = bp.params;
  p.dv = p.dk;
  EXPECT_NE(message(p).find("must not overlap"), std::string::npos);
  p = bp.params;
  p.dq = reinterpret_cast<uint8_t*>(p.dq) + 2;
  EXPECT_NE(message(p).find("dq: base pointer must be 4-byte aligned"), std::string::npos);
  p = bp.params;
  p.dq_seq_stride = -1;
  EXPECT_NE(message(p).find("dq_seq_stride: must be >= 0"), std::string::npos);
  p = bp.params;
  p.forward.head_dim_qk = 0;  // the forward's own rules come first
  EXPECT_NE(message(p).find("head_dim_qk"), std::string::npos);
  // A bad call writes nothing.
  p = bp.params;
  p.dout = nullptr;
  EXPECT_FALSE(attention_backward(p).ok());
  for (float g : bp.dq) ASSERT_TRUE(std::isnan(g));
}

}  // namespace
}  // namespace flashcore
