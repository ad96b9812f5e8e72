// The CPU reference through the public API (attention_forward with host pointers), its path entry
// (supports / run), and the shared test utilities of tests/common/tensor_util.hpp that GPU tests
// rely on: metrics, poison detection and the naive same-dtype tolerance baseline.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "api/paths.hpp"
#include "common/dtype.hpp"
#include "common/tensor_util.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore::testing {
namespace {

TestCase small_case(DType dtype) {
  TestCase tc;
  tc.batch = 2;
  tc.seqlen_q = 19;
  tc.seqlen_k = 23;
  tc.heads_q = 4;
  tc.heads_kv = 2;
  tc.head_dim_qk = tc.head_dim_v = 32;
  tc.dtype = dtype;
  tc.causal = true;
  tc.seed = 7;
  return tc;
}

TEST(ReferenceApi, AttentionForwardWithHostPointersRunsTheCpuReference) {
  HostProblem pr = make_problem(small_case(DType::kFloat16));
  KernelPath chosen = KernelPath::kAuto;
  ASSERT_TRUE(select_path(pr.params, &chosen).ok());
  EXPECT_EQ(chosen, KernelPath::kCpuReference);  // host pointers: no GPU path applies
  ASSERT_TRUE(attention_forward(pr.params).ok());
  EXPECT_EQ(count_unwritten_output(pr, pr.o.data()), 0);
  EXPECT_EQ(count_unwritten_lse(pr, pr.lse.data()), 0);

  HostProblem direct = make_problem(small_case(DType::kFloat16));
  ASSERT_TRUE(reference::cpu_reference_forward(direct.params).ok());
  EXPECT_EQ(pr.o, direct.o);
  EXPECT_EQ(pr.lse, direct.lse);
}

TEST(ReferenceApi, ExplicitCpuReferencePathRunsEveryDtype) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    HostProblem pr = make_problem(small_case(dtype));
    pr.params.path = KernelPath::kCpuReference;
    const Status st = attention_forward(pr.params);
    ASSERT_TRUE(st.ok()) << st.message;
    std::vector<double> ref;
    reference::cpu_reference_forward_f64(pr.params, &ref, nullptr);
    const ErrorStats err = compare(read_output(pr, pr.o.data()), ref);
    EXPECT_TRUE(err.finite_ok()) << err.describe();
    // Only the output rounding separates them: half an ulp of the dtype, relative.
    const double half_ulp = dtype == DType::kFloat32 ? 0x1p-24 : dtype == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
    EXPECT_LE(err.rel_fro, half_ulp) << dtype_name(dtype) << " " << err.describe();
  }
}

TEST(ReferenceApi, VarlenCallThroughAttentionForwardWritesEveryRow) {
  TestCase tc = small_case(DType::kBFloat16);
  tc.varlen_q = {4, 0, 9};
  tc.varlen_k = {6, 3, 0};
  HostProblem pr = make_problem(tc);
  const Status st = attention_forward(pr.params);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(count_unwritten_output(pr, pr.o.data()), 0);
  EXPECT_EQ(count_unwritten_lse(pr, pr.lse.data()), 0);
  std::vector<double> ref_out, ref_lse;
  reference::cpu_reference_forward_f64(pr.params, &ref_out, &ref_lse);
  const ErrorStats lse_err = compare(read_lse(pr, pr.lse.data()), ref_lse);
  EXPECT_TRUE(lse_err.finite_ok()) << lse_err.describe();  // the last sequence's rows are -inf
  EXPECT_LE(lse_err.max_abs, 1e-5 * std::max(1.0, lse_err.ref_max_abs)) << lse_err.describe();
}

TEST(ReferenceApi, EmptyBatchWritesNothing) {
  TestCase tc = small_case(DType::kBFloat16);
  HostProblem pr = make_problem(tc);
  pr.params.batch = 0;
  ASSERT_TRUE(attention_forward(pr.params).ok());
  const std::vector<uint8_t> poisoned(pr.o.size(), 0xFF);
  EXPECT_EQ(pr.o, poisoned);  // every byte still the poison pattern
  for (float lse : pr.lse) EXPECT_TRUE(std::isnan(lse));
}

TEST(ReferenceApi, CpuPathSupportsHostPointersOnlyAndAnyShape) {
  const detail::PathOps ops = detail::cpu_reference_path();
  EXPECT_EQ(ops.path, KernelPath::kCpuReference);
  TestCase tc = small_case(DType::kFloat32);
  tc.head_dim_qk = 3;  // any head dim >= 1, fp32 included
  tc.head_dim_v = 1000;
  HostProblem pr = make_problem(tc);
  detail::DeviceInfo host;
  host.pointers_on_host = true;
  EXPECT_EQ(ops.supports(pr.params, host), "");
  detail::DeviceInfo device;
  device.has_device = true;
  device.pointers_on_host = false;
  EXPECT_NE(ops.supports(pr.params, device).find("host pointers"), std::string::npos);
  ASSERT_TRUE(ops.run(pr.params, host, nullptr).ok());
  EXPECT_EQ(count_unwritten_output(pr, pr.o.data()), 0);
}

// ---- the shared test utilities ---------------------------------------------------------------

TEST(TestUtil, CompareReportsRelativeFrobeniusAndMaxAbs) {
  const std::vector<double> ref = {3.0, 4.0, 0.0};
  const ErrorStats err = compare({3.0, 4.5, -0.1}, ref);
  EXPECT_NEAR(err.rel_fro, std::sqrt(0.25 + 0.01) / 5.0, 1e-15);
  EXPECT_NEAR(err.max_abs, 0.5, 1e-15);
  EXPECT_EQ(err.ref_max_abs, 4.0);
  EXPECT_TRUE(err.finite_ok());
}

TEST(TestUtil, NanOrInfNeverPasses) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::vector<double> ref = {1.0, 2.0, -inf};
  EXPECT_EQ(compare({nan, 2.0, -inf}, ref).non_finite, 1);
  EXPECT_EQ(compare({inf, 2.0, -inf}, ref).non_finite, 1);
  EXPECT_EQ(compare({1.0, 2.0, 0.0}, ref).inf_mismatch, 1);  // an empty row's lse must be -inf
  EXPECT_TRUE(compare({1.0, 2.0, -inf}, ref).finite_ok());
  EXPECT_FALSE(within(compare({nan, 2.0, -inf}, ref), Tolerance{1e9, 1e9}));
  EXPECT_FALSE(compare({1.0}, ref).finite_ok());  // size mismatch fails
}

TEST(TestUtil, PoisonIsNanAndUnwrittenElementsAreCounted) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    TestCase tc = small_case(dtype);
    tc.layout = Layout::kPaddedBSHD;
    HostProblem pr = make_problem(tc);  // outputs start poisoned
    const int64_t logical = int64_t(tc.batch) * tc.seqlen_q * tc.heads_q * tc.head_dim_v;
    EXPECT_EQ(count_unwritten_output(pr, pr.o.data()), logical);
    EXPECT_EQ(count_unwritten_lse(pr, pr.lse.data()), int64_t(tc.batch) * tc.heads_q * tc.seqlen_q);
    for (double x : read_output(pr, pr.o.data())) ASSERT_TRUE(std::isnan(x));
    store_from_float(pr.o.data(), pr.o_offset(1, 3, 2) + 5, 0.25f, dtype);
    EXPECT_EQ(count_unwritten_output(pr, pr.o.data()), logical - 1);
    EXPECT_EQ(count_written_padding(pr, pr.o.data()), 0);
    store_from_float(pr.o.data(), pr.o_offset(1, 3, 2) + tc.head_dim_v, 0.25f, dtype);  // into padding
    EXPECT_EQ(count_written_padding(pr, pr.o.data()), 1);
  }
}

TEST(TestUtil, SameSeedGivesSameLogicalTensorsInEveryLayout) {
  TestCase tc = small_case(DType::kBFloat16);
  const HostProblem bshd = make_problem(tc);
  tc.layout = Layout::kBHSD;
  const HostProblem bhsd = make_problem(tc);
  for (int b = 0; b < tc.batch; ++b)
    for (int s = 0; s < tc.seqlen_q; ++s)
      for (int h = 0; h < tc.heads_q; ++h)
        for (int d = 0; d < tc.head_dim_qk; ++d) {
          const auto at = [&](const AttentionParams& p) {
            return load_as_float(p.q, b * p.q_batch_stride + s * p.q_seq_stride + h * p.q_head_stride + d, p.dtype);
          };
          ASSERT_EQ(at(bshd.params), at(bhsd.params));
        }
  tc.seed += 1;  // a fresh seed gives fresh data
  EXPECT_NE(make_problem(tc).q, bhsd.q);
}

TEST(TestUtil, InputScaleScalesTheRandomNormalInputs) {
  TestCase tc = small_case(DType::kFloat32);
  tc.input_scale = 10.0f;
  const HostProblem pr = make_problem(tc);
  const float* q = reinterpret_cast<const float*>(pr.q.data());
  double sum_sq = 0;
  const size_t n = pr.q.size() / 4;
  for (size_t i = 0; i < n; ++i) sum_sq += double(q[i]) * q[i];
  EXPECT_NEAR(std::sqrt(sum_sq / double(n)), 10.0, 0.5);  // std of N(0,1) * 10
}

// The naive same-dtype baseline has a real error for 16-bit dtypes (so "2x naive" is a meaningful
// bound), and the reference's own once-rounded output meets that bound.
TEST(TestUtil, NaiveSameDtypeBaselineBoundsTheRoundedReference) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    for (float input_scale : {1.0f, 10.0f}) {
      TestCase tc = small_case(dtype);
      tc.input_scale = input_scale;
      HostProblem pr = make_problem(tc);
      std::vector<double> ref;
      reference::cpu_reference_forward_f64(pr.params, &ref, nullptr);
      const ErrorStats naive = compare(naive_same_dtype_reference(pr.params), ref);
      ASSERT_TRUE(naive.finite_ok()) << naive.describe();
      if (dtype != DType::kFloat32) {
        EXPECT_GT(naive.rel_fro, 1e-5) << dtype_name(dtype) << naive.describe();
      }
      ASSERT_TRUE(reference::cpu_reference_forward(pr.params).ok());
      const ErrorStats rounded = compare(read_output(pr, pr.o.data()), ref);
      const Tolerance tol = tolerance_from_naive(naive, default_rel_floor(dtype));
      EXPECT_TRUE(within(rounded, tol)) << dtype_name(dtype) << " x" << input_scale << " " << rounded.describe()
                                        << " vs " << tol.describe();
      // A clearly wrong output (one row's values scaled by 1.5) fails the bound.
      std::vector<double> wrong = read_output(pr, pr.o.data());
      for (int d = 0; d < tc.head_dim_v; ++d) wrong[size_t(tc.heads_q * tc.head_dim_v * 5 + d)] *= 1.5;
      EXPECT_FALSE(within(compare(wrong, ref), tol)) << dtype_name(dtype);
    }
  }
}

}  // namespace
}  // namespace flashcore::testing
