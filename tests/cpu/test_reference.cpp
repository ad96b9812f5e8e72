// The fp64 CPU reference against the independent brute-force statement of every rule of
// docs/semantics.md (tests/cpu/test_reference_brute_force.hpp). Each test name is the rule.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "attention/mask.hpp"
#include "common/dtype.hpp"
#include "common/tensor_util.hpp"
#include "reference/cpu_reference.hpp"
#include "test_reference_brute_force.hpp"

namespace flashcore::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// fp64 vs fp64 computed in another order: only summation-order rounding separates them.
constexpr double kF64Tolerance = 1e-12;

struct Reference {
  std::vector<double> out, lse;
};

Reference run_reference(const HostProblem& pr) {
  Reference r;
  reference::cpu_reference_forward_f64(pr.params, &r.out, &r.lse);
  return r;
}

// Reference vs brute force on out and lse, entry by entry (-inf lse must match exactly).
void expect_matches_brute_force(const TestCase& tc) {
  SCOPED_TRACE(tc.describe());
  const HostProblem pr = make_problem(tc);
  const Reference ref = run_reference(pr);
  const BruteForceResult bf = brute_force_attention(pr.params);
  const ErrorStats out_err = compare(ref.out, bf.out);
  const ErrorStats lse_err = compare(ref.lse, bf.lse);
  EXPECT_TRUE(out_err.finite_ok()) << out_err.describe();
  EXPECT_TRUE(lse_err.finite_ok()) << lse_err.describe();
  EXPECT_LE(out_err.max_abs, kF64Tolerance * std::max(1.0, out_err.ref_max_abs)) << out_err.describe();
  EXPECT_LE(lse_err.max_abs, kF64Tolerance * std::max(1.0, lse_err.ref_max_abs)) << lse_err.describe();
}

TestCase base_case(DType dtype = DType::kFloat32) {
  TestCase tc;
  tc.batch = 2;
  tc.seqlen_q = 13;
  tc.seqlen_k = 17;
  tc.heads_q = 2;
  tc.heads_kv = 2;
  tc.head_dim_qk = 16;
  tc.head_dim_v = 16;
  tc.dtype = dtype;
  return tc;
}

// True when row `row`, head `h` of the reference is an empty row: o = 0 and lse = -inf.
bool is_empty_row(const Reference& r, const AttentionParams& p, int64_t row, int h) {
  bool zero = true;
  for (int d = 0; d < p.head_dim_v; ++d) zero &= r.out[size_t((row * p.heads_q + h) * p.head_dim_v + d)] == 0.0;
  return zero && r.lse[size_t(row * p.heads_q + h)] == -kInf;
}

TEST(Reference, NoMaskMatchesBruteForceInEveryDtype) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    TestCase tc = base_case(dtype);
    tc.seed = 11;
    expect_matches_brute_force(tc);
  }
}

TEST(Reference, SqEqualsOneAndSkEqualsOneMatchBruteForce) {
  TestCase tc = base_case();
  tc.seqlen_q = 1;
  expect_matches_brute_force(tc);
  tc.seqlen_q = 9;
  tc.seqlen_k = 1;
  expect_matches_brute_force(tc);
}

TEST(Reference, DefaultScaleIsOneOverSqrtHeadDimQk) {
  TestCase tc = base_case();
  tc.head_dim_qk = 24;  // Dqk != Dv so the default must use Dqk
  const HostProblem implicit_scale = make_problem(tc);
  tc.softmax_scale = 1.0f / std::sqrt(24.0f);
  const HostProblem explicit_scale = make_problem(tc);
  EXPECT_EQ(run_reference(implicit_scale).out, run_reference(explicit_scale).out);
  tc.softmax_scale = 0.3f;  // a non-default scale is honoured
  expect_matches_brute_force(tc);
}

TEST(Reference, CausalBottomRightSqLessThanSkMatchesBruteForce) {
  TestCase tc = base_case();
  tc.causal = true;
  tc.seqlen_q = 5;
  tc.seqlen_k = 19;
  expect_matches_brute_force(tc);
}

TEST(Reference, CausalBottomRightSqGreaterThanSkLeavesLeadingRowsEmpty) {
  TestCase tc = base_case();
  tc.causal = true;
  tc.seqlen_q = 19;
  tc.seqlen_k = 7;
  expect_matches_brute_force(tc);
  // Bottom-right: query i sees j <= i + Sk - Sq, so rows i < Sq - Sk = 12 see nothing.
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  for (int b = 0; b < tc.batch; ++b)
    for (int h = 0; h < tc.heads_q; ++h)
      for (int i = 0; i < tc.seqlen_q; ++i)
        EXPECT_EQ(is_empty_row(r, pr.params, int64_t(b) * tc.seqlen_q + i, h), i < tc.seqlen_q - tc.seqlen_k)
            << "b=" << b << " h=" << h << " i=" << i;
}

TEST(Reference, CausalTopLeftSqLessThanSkMatchesBruteForce) {
  TestCase tc = base_case();
  tc.causal = true;
  tc.align = MaskAlign::kTopLeft;
  tc.seqlen_q = 5;
  tc.seqlen_k = 19;
  expect_matches_brute_force(tc);
}

TEST(Reference, CausalTopLeftSqGreaterThanSkHasNoEmptyRow) {
  TestCase tc = base_case();
  tc.causal = true;
  tc.align = MaskAlign::kTopLeft;
  tc.seqlen_q = 19;
  tc.seqlen_k = 7;
  expect_matches_brute_force(tc);
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  for (int64_t row = 0; row < reference::reference_rows(pr.params); ++row)
    for (int h = 0; h < tc.heads_q; ++h) EXPECT_FALSE(is_empty_row(r, pr.params, row, h)) << row;
  // Top-left row 0 sees only key 0: o equals v[0] exactly, lse equals the single score.
  const BruteForceResult bf = brute_force_attention(pr.params);
  EXPECT_NEAR(r.lse[0], bf.lse[0], 1e-12);
  for (int d = 0; d < tc.head_dim_v; ++d)
    EXPECT_EQ(r.out[size_t(d)], double(load_as_float(pr.params.v, d, tc.dtype)));
}

TEST(Reference, CausalAlignmentsAgreeWhenSqEqualsSk) {
  TestCase tc = base_case();
  tc.causal = true;
  tc.seqlen_q = tc.seqlen_k = 15;
  const Reference bottom_right = run_reference(make_problem(tc));
  tc.align = MaskAlign::kTopLeft;
  const Reference top_left = run_reference(make_problem(tc));
  EXPECT_EQ(bottom_right.out, top_left.out);
}

TEST(Reference, SlidingWindowLeftAndRightMatchesBruteForce) {
  for (MaskAlign align : {MaskAlign::kBottomRight, MaskAlign::kTopLeft}) {
    TestCase tc = base_case();
    tc.align = align;
    tc.window_left = 3;
    tc.window_right = 2;
    expect_matches_brute_force(tc);
    tc.seqlen_q = 23;  // Sq > Sk: with bottom-right alignment some rows fall outside the keys
    tc.seqlen_k = 6;
    expect_matches_brute_force(tc);
  }
}

TEST(Reference, WindowLeftOnlyAndRightOnlyMatchBruteForce) {
  TestCase tc = base_case();
  tc.window_left = 4;
  expect_matches_brute_force(tc);
  tc.window_left = kWindowInfinite;
  tc.window_right = 1;
  expect_matches_brute_force(tc);
  tc.window_right = 0;  // window_right 0 alone is causal
  const Reference window_zero = run_reference(make_problem(tc));
  tc.window_right = kWindowInfinite;
  tc.causal = true;
  EXPECT_EQ(window_zero.out, run_reference(make_problem(tc)).out);
}

TEST(Reference, CausalWithWindowLeftIsLocalAttention) {
  TestCase tc = base_case();
  tc.causal = true;
  tc.window_left = 2;
  tc.window_right = 5;  // causal overrides the right side to 0
  expect_matches_brute_force(tc);
  const Reference causal_window = run_reference(make_problem(tc));
  tc.causal = false;
  tc.window_right = 0;
  EXPECT_EQ(causal_window.out, run_reference(make_problem(tc)).out);
}

TEST(Reference, WindowZeroZeroSeesOnlyTheDiagonalKey) {
  TestCase tc = base_case();
  tc.window_left = 0;
  tc.window_right = 0;
  tc.seqlen_q = tc.seqlen_k = 9;
  expect_matches_brute_force(tc);
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  const int64_t v_row = pr.params.v_seq_stride * 4;  // query 4 of batch 0, head 0 sees key 4 only
  for (int d = 0; d < tc.head_dim_v; ++d)
    EXPECT_EQ(r.out[size_t((4 * tc.heads_q) * tc.head_dim_v + d)], double(load_as_float(pr.params.v, v_row + d, tc.dtype)));
}

TEST(Reference, SoftcapMatchesBruteForceAndBoundsTheScores) {
  TestCase tc = base_case();
  tc.softcap = 2.5f;
  tc.input_scale = 4.0f;  // large scores so tanh saturates
  expect_matches_brute_force(tc);
  // |score| <= softcap, so each weight is >= exp(-2c) / Sk of the row: lse - max score <= log(Sk).
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  for (double lse : r.lse) {
    EXPECT_LE(lse, tc.softcap + std::log(double(tc.seqlen_k)) + 1e-12);
    EXPECT_GE(lse, -tc.softcap + std::log(double(tc.seqlen_k)) - 1e-12);
  }
}

TEST(Reference, AlibiPerHeadSlopesMatchBruteForce) {
  TestCase tc = base_case();
  tc.alibi = AlibiLayout::kPerHead;
  tc.heads_q = tc.heads_kv = 4;
  expect_matches_brute_force(tc);
  tc.causal = true;  // ALiBi distance is bottom-right aligned even with top-left masks
  tc.align = MaskAlign::kTopLeft;
  tc.seqlen_q = 21;
  expect_matches_brute_force(tc);
}

TEST(Reference, AlibiPerBatchHeadSlopesMatchBruteForce) {
  TestCase tc = base_case();
  tc.alibi = AlibiLayout::kPerBatchHead;
  tc.batch = 3;
  expect_matches_brute_force(tc);
  // Slopes differ per batch entry: the batch stride is honoured, not ignored.
  const HostProblem per_batch = make_problem(tc);
  tc.alibi = AlibiLayout::kPerHead;
  const HostProblem per_head = make_problem(tc);
  EXPECT_NE(run_reference(per_batch).out, run_reference(per_head).out);
}

TEST(Reference, GqaQueryHeadReadsKvHeadHOverGroup) {
  for (int ratio : {1, 4, 8}) {
    TestCase tc = base_case();
    tc.heads_kv = 2;
    tc.heads_q = 2 * ratio;
    tc.causal = ratio == 4;
    expect_matches_brute_force(tc);
  }
}

TEST(Reference, MqaSharesOneKvHeadAcrossAllQueryHeads) {
  TestCase tc = base_case();
  tc.heads_q = 6;
  tc.heads_kv = 1;
  expect_matches_brute_force(tc);
}

// GQA equals MHA with each KV head repeated Hq/Hkv times (the mapping h -> h / group, checked
// without the brute force).
TEST(Reference, GqaEqualsMhaWithRepeatedKvHeads) {
  TestCase tc = base_case(DType::kBFloat16);
  tc.heads_q = 8;
  tc.heads_kv = 2;
  const HostProblem gqa = make_problem(tc);
  tc.heads_kv = 8;
  HostProblem mha = make_problem(tc);
  const int group = 4;
  const int64_t elem = dtype_size(tc.dtype);
  for (int b = 0; b < tc.batch; ++b)
    for (int j = 0; j < tc.seqlen_k; ++j)
      for (int h = 0; h < 8; ++h) {
        const int64_t dst = b * mha.params.k_batch_stride + j * mha.params.k_seq_stride + h * mha.params.k_head_stride;
        const int64_t src = b * gqa.params.k_batch_stride + j * gqa.params.k_seq_stride + (h / group) * gqa.params.k_head_stride;
        std::memcpy(&mha.k[size_t(dst * elem)], &gqa.k[size_t(src * elem)], size_t(tc.head_dim_qk * elem));
        std::memcpy(&mha.v[size_t(dst * elem)], &gqa.v[size_t(src * elem)], size_t(tc.head_dim_v * elem));
      }
  std::memcpy(mha.q.data(), gqa.q.data(), gqa.q.size());
  EXPECT_EQ(run_reference(gqa).out, run_reference(mha).out);
}

TEST(Reference, HeadDimQkDiffersFromHeadDimV) {
  TestCase tc = base_case();
  tc.head_dim_qk = 24;
  tc.head_dim_v = 8;
  expect_matches_brute_force(tc);
  tc.head_dim_qk = 5;  // any head dim >= 1, not only multiples of 8
  tc.head_dim_v = 33;
  tc.causal = true;
  expect_matches_brute_force(tc);
}

TEST(Reference, VarlenSequencesIncludingEmptyOnesMatchBruteForce) {
  TestCase tc = base_case();
  tc.varlen_q = {5, 0, 9, 1, 4};
  tc.varlen_k = {7, 3, 4, 0, 11};
  expect_matches_brute_force(tc);
  tc.causal = true;
  expect_matches_brute_force(tc);
  tc.align = MaskAlign::kTopLeft;
  tc.window_left = 2;
  expect_matches_brute_force(tc);
  // Sequence 3 has no keys: its query row is empty.
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  for (int h = 0; h < tc.heads_q; ++h) EXPECT_TRUE(is_empty_row(r, pr.params, 5 + 0 + 9, h));
}

TEST(Reference, VarlenSequencesAreIndependent) {
  // Sequence 1 of a varlen batch equals the same sequence computed alone (dense).
  TestCase tc = base_case();
  tc.varlen_q = {6, 4};
  tc.varlen_k = {3, 8};
  tc.causal = true;
  const HostProblem packed = make_problem(tc);
  TestCase alone = base_case();
  alone.batch = 1;
  alone.seqlen_q = 4;
  alone.seqlen_k = 8;
  alone.causal = true;
  HostProblem dense = make_problem(alone);
  const int64_t elem = dtype_size(tc.dtype);
  const size_t q_row = size_t(packed.params.q_seq_stride * elem), k_row = size_t(packed.params.k_seq_stride * elem);
  std::memcpy(dense.q.data(), &packed.q[6 * q_row], 4 * q_row);
  std::memcpy(dense.k.data(), &packed.k[3 * k_row], 8 * k_row);
  std::memcpy(dense.v.data(), &packed.v[3 * k_row], 8 * k_row);
  const Reference rp = run_reference(packed), rd = run_reference(dense);
  const size_t row_elems = size_t(tc.heads_q * tc.head_dim_v);
  EXPECT_EQ(std::vector<double>(rp.out.begin() + 6 * row_elems, rp.out.end()), rd.out);
  EXPECT_EQ(std::vector<double>(rp.lse.begin() + 6 * tc.heads_q, rp.lse.end()), rd.lse);
}

TEST(Reference, SequsedKLimitsTheKeysThatCount) {
  TestCase tc = base_case();
  tc.varlen_q = {5, 7, 3};
  tc.varlen_k = {9, 6, 4};
  tc.seqused_k = {4, 6, 0};
  expect_matches_brute_force(tc);
  tc.causal = true;  // the causal diagonal follows the used length
  expect_matches_brute_force(tc);
  // Dense with seqused_k.
  TestCase dense = base_case();
  dense.seqused_k = {10, 3};
  expect_matches_brute_force(dense);
  // Keys past seqused_k do not matter: changing them changes nothing.
  HostProblem pr = make_problem(dense);
  const Reference before = run_reference(pr);
  const int64_t elem = dtype_size(dense.dtype);
  const int64_t k_tail = (1 * pr.params.k_batch_stride + 3 * pr.params.k_seq_stride) * elem;
  std::fill(pr.k.begin() + k_tail, pr.k.begin() + (2 * pr.params.k_batch_stride) * elem, uint8_t(0x3c));
  std::fill(pr.v.begin() + k_tail, pr.v.begin() + (2 * pr.params.v_batch_stride) * elem, uint8_t(0x3c));
  EXPECT_EQ(before.out, run_reference(pr).out);
}

TEST(Reference, BhsdStridesGiveTheSameResultAsBshd) {
  for (Layout layout : {Layout::kBHSD, Layout::kPaddedBSHD}) {
    TestCase tc = base_case(DType::kFloat16);
    tc.heads_q = 4;
    tc.heads_kv = 2;
    tc.causal = true;
    const Reference bshd = run_reference(make_problem(tc));
    tc.layout = layout;
    expect_matches_brute_force(tc);
    const Reference strided = run_reference(make_problem(tc));
    EXPECT_EQ(bshd.out, strided.out);
    EXPECT_EQ(bshd.lse, strided.lse);
  }
}

TEST(Reference, VarlenPaddedLayoutMatchesBruteForce) {
  TestCase tc = base_case(DType::kBFloat16);
  tc.varlen_q = {3, 8};
  tc.varlen_k = {5, 2};
  tc.layout = Layout::kPaddedBSHD;
  expect_matches_brute_force(tc);
}

TEST(Reference, EmptyKeySequenceGivesZeroOutputAndMinusInfLse) {
  TestCase tc = base_case();
  tc.seqlen_k = 0;
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  for (int64_t row = 0; row < reference::reference_rows(pr.params); ++row)
    for (int h = 0; h < tc.heads_q; ++h) EXPECT_TRUE(is_empty_row(r, pr.params, row, h));
}

TEST(Reference, LargeInputScaleStaysFiniteAndMatchesBruteForce) {
  TestCase tc = base_case(DType::kFloat16);
  tc.input_scale = 10.0f;  // scores of order 100: exp() would overflow without max subtraction
  tc.head_dim_qk = tc.head_dim_v = 64;
  expect_matches_brute_force(tc);
}

// The rounded outputs equal the fp64 outputs rounded once to the dtype, checked by choosing the
// nearer of the two representable neighbours (ties to the even bit pattern).
TEST(Reference, OutputIsTheFp64ResultRoundedOnceToTheDtype) {
  for (DType dtype : {DType::kFloat16, DType::kBFloat16, DType::kFloat32}) {
    TestCase tc = base_case(dtype);
    tc.causal = true;
    tc.seqlen_q = 21;
    HostProblem pr = make_problem(tc);
    const Reference r = run_reference(pr);
    ASSERT_TRUE(reference::cpu_reference_forward(pr.params).ok());
    const std::vector<double> stored = read_output(pr, pr.o.data());
    int64_t mismatches = 0;
    for (size_t n = 0; n < r.out.size(); ++n) {
      const double exact = r.out[n];
      const float f = float(exact);  // near neighbour candidates in the dtype around `exact`
      double best = 0;
      bool found = false;
      if (dtype == DType::kFloat32) {
        const double lo = std::nextafter(f, -INFINITY), hi = std::nextafter(f, INFINITY);
        best = f;
        for (double c : {lo, hi}) if (std::fabs(c - exact) < std::fabs(best - exact)) best = c;
        found = true;
      } else {
        const uint16_t center = dtype == DType::kFloat16 ? float_to_fp16(f) : float_to_bf16(f);
        for (int delta = -1; delta <= 1; ++delta) {
          const uint16_t bits = uint16_t(center + delta);
          const double c = dtype == DType::kFloat16 ? fp16_to_float(bits) : bf16_to_float(bits);
          if (!std::isfinite(c)) continue;
          const double err = std::fabs(c - exact), best_err = std::fabs(best - exact);
          if (!found || err < best_err || (err == best_err && (bits & 1) == 0)) best = c;
          found = true;
        }
      }
      mismatches += stored[n] != best;
    }
    EXPECT_EQ(mismatches, 0) << dtype_name(dtype);
    // The stored lse is the fp64 lse rounded to float.
    const std::vector<double> stored_lse = read_lse(pr, pr.lse.data());
    for (size_t n = 0; n < r.lse.size(); ++n) EXPECT_EQ(stored_lse[n], double(float(r.lse[n])));
  }
}

TEST(Reference, LseIsTheNaturalLogOfTheSumOfExpScores) {
  // One key per row (window 0/0): lse is exactly that key's score; two equal keys add log(2).
  TestCase tc = base_case();
  tc.seqlen_q = tc.seqlen_k = 6;
  tc.window_left = tc.window_right = 0;
  const HostProblem pr = make_problem(tc);
  const Reference r = run_reference(pr);
  const BruteForceResult bf = brute_force_attention(pr.params);
  for (size_t n = 0; n < r.lse.size(); ++n) EXPECT_NEAR(r.lse[n], bf.lse[n], 1e-12);
  // Row 2 of head 0 vs the explicit score scale * <q_2, k_2>.
  double dot = 0;
  for (int d = 0; d < tc.head_dim_qk; ++d)
    dot += double(load_as_float(pr.params.q, 2 * pr.params.q_seq_stride + d, tc.dtype)) *
           double(load_as_float(pr.params.k, 2 * pr.params.k_seq_stride + d, tc.dtype));
  EXPECT_NEAR(r.lse[size_t(2 * tc.heads_q)], dot * double(1.0f / std::sqrt(float(tc.head_dim_qk))), 1e-12);

  TestCase dup = base_case();
  dup.batch = 1;
  dup.seqlen_q = 1;
  dup.seqlen_k = 2;
  dup.heads_q = dup.heads_kv = 1;
  HostProblem two = make_problem(dup);
  const size_t row_bytes = size_t(two.params.k_seq_stride * dtype_size(dup.dtype));
  std::memcpy(&two.k[row_bytes], two.k.data(), row_bytes);  // key 1 := key 0
  const Reference r2 = run_reference(two);
  double dot0 = 0;
  for (int d = 0; d < dup.head_dim_qk; ++d)
    dot0 += double(load_as_float(two.params.q, d, dup.dtype)) * double(load_as_float(two.params.k, d, dup.dtype));
  EXPECT_NEAR(r2.lse[0], dot0 * double(1.0f / std::sqrt(float(dup.head_dim_qk))) + std::log(2.0), 1e-12);
}

// Every rule at once, so interactions (ALiBi with seqused_k, windows with varlen, GQA with strides)
// are covered too.
TEST(Reference, AllRulesCombinedMatchBruteForce) {
  for (MaskAlign align : {MaskAlign::kBottomRight, MaskAlign::kTopLeft}) {
    TestCase tc = base_case(DType::kBFloat16);
    tc.varlen_q = {7, 0, 12, 3};
    tc.varlen_k = {9, 4, 5, 6};
    tc.seqused_k = {8, 4, 5, 2};
    tc.heads_q = 8;
    tc.heads_kv = 2;
    tc.head_dim_qk = 20;
    tc.head_dim_v = 12;
    tc.causal = true;
    tc.align = align;
    tc.window_left = 3;
    tc.softcap = 3.0f;
    tc.softmax_scale = 0.2f;
    tc.alibi = AlibiLayout::kPerBatchHead;
    tc.layout = Layout::kPaddedBSHD;
    tc.input_scale = 2.0f;
    expect_matches_brute_force(tc);
  }
}

// lse is [B, Hq, Sq] (dense) and [Hq, total_q] (varlen), indexed here by hand from those shapes.
TEST(Reference, LseLayoutIsBatchHeadSeqDenseAndHeadTokenVarlen) {
  TestCase dense = base_case();
  dense.heads_q = dense.heads_kv = 3;
  HostProblem pd = make_problem(dense);
  ASSERT_TRUE(reference::cpu_reference_forward(pd.params).ok());
  const Reference rd = run_reference(pd);
  for (int b = 0; b < dense.batch; ++b)
    for (int h = 0; h < dense.heads_q; ++h)
      for (int i = 0; i < dense.seqlen_q; ++i)
        EXPECT_EQ(pd.lse[size_t((b * dense.heads_q + h) * dense.seqlen_q + i)],
                  float(rd.lse[size_t((b * dense.seqlen_q + i) * dense.heads_q + h)]));

  TestCase varlen = base_case();
  varlen.heads_q = varlen.heads_kv = 3;
  varlen.varlen_q = {4, 0, 6};
  varlen.varlen_k = {5, 2, 3};
  HostProblem pv = make_problem(varlen);
  ASSERT_TRUE(reference::cpu_reference_forward(pv.params).ok());
  const Reference rv = run_reference(pv);
  const int total_q = 10;
  for (int h = 0; h < varlen.heads_q; ++h)
    for (int token = 0; token < total_q; ++token)
      EXPECT_EQ(pv.lse[size_t(h * total_q + token)], float(rv.lse[size_t(token * varlen.heads_q + h)]));
}

TEST(Reference, RoundedForwardWritesEveryOutputElementAndNoPadding) {
  TestCase tc = base_case(DType::kBFloat16);
  tc.layout = Layout::kPaddedBSHD;
  tc.causal = true;
  tc.seqlen_q = 20;  // rows 0..2 empty (bottom-right): they must still be written (zeros)
  HostProblem pr = make_problem(tc);
  ASSERT_TRUE(reference::cpu_reference_forward(pr.params).ok());
  EXPECT_EQ(count_unwritten_output(pr, pr.o.data()), 0);
  EXPECT_EQ(count_unwritten_lse(pr, pr.lse.data()), 0);
  EXPECT_EQ(count_written_padding(pr, pr.o.data()), 0);
}

// The diagonal form the sm80 kernel masks with (min_diagonal <= j - i <= max_diagonal, j < Sk) is
// the same rule as first_key / last_key, for both alignments, windows and "infinite" sides, also
// where the diagonal bounds leave the int range.
// TestCase::key_gain (the GPU tests' mid-row jumps of the running max) scales exactly the K rows
// at its positions, in every sequence and head, dense and varlen, and nothing else.
TEST(TestProblem, KeyGainScalesOnlyTheKRowsAtItsPositions) {
  for (const bool varlen : {false, true}) {
    TestCase tc = base_case(DType::kFloat32);
    tc.heads_q = 4, tc.heads_kv = 2;
    if (varlen) tc.varlen_q = {5, 9}, tc.varlen_k = {4, 17};
    const HostProblem plain = make_problem(tc);
    tc.key_gain = {{3, 8.0f}, {10, -2.0f}};
    const HostProblem gained = make_problem(tc);
    SCOPED_TRACE(tc.describe());
    const AttentionParams& p = gained.params;
    const float* k0 = reinterpret_cast<const float*>(plain.k.data());
    const float* k1 = reinterpret_cast<const float*>(gained.k.data());
    int scaled = 0;
    for (int b = 0; b < p.batch; ++b) {
      const int keys = varlen ? tc.varlen_k[size_t(b)] : tc.seqlen_k;
      for (int j = 0; j < keys; ++j) {
        const int64_t row = varlen ? int64_t(gained.cu_seqlens_k[size_t(b)] + j) * p.k_seq_stride
                                   : b * p.k_batch_stride + j * p.k_seq_stride;
        const float gain = j == 3 ? 8.0f : j == 10 ? -2.0f : 1.0f;
        for (int h = 0; h < p.heads_kv; ++h)
          for (int d = 0; d < p.head_dim_qk; ++d) {
            const int64_t i = row + h * p.k_head_stride + d;
            ASSERT_EQ(k1[i], k0[i] * gain) << "b=" << b << " key=" << j << " h=" << h << " d=" << d;
          }
        scaled += gain != 1.0f;
      }
    }
    EXPECT_EQ(scaled, varlen ? 3 : 4);  // varlen: sequence 0 has 4 keys, so only key 3 there
    EXPECT_EQ(plain.q, gained.q);
    EXPECT_EQ(plain.v, gained.v);
  }
}

TEST(VisibilityMask, DiagonalBandIsTheSameRuleAsFirstAndLastKey) {
  const int inf = attn::VisibilityMask{}.window_left;
  for (int sq : {1, 7, 65}) {
    for (int sk : {1, 9, 64}) {
      for (int wl : {0, 3, inf}) {
        for (int wr : {0, 5, inf}) {
          for (MaskAlign align : {MaskAlign::kBottomRight, MaskAlign::kTopLeft}) {
            attn::VisibilityMask rule;
            rule.window_left = wl;
            rule.window_right = wr;
            const attn::VisibilityMask m = attn::mask_for_lengths(rule, align, sq, sk);
            for (int i = 0; i < sq; ++i)
              for (int j = 0; j < sk + 8; ++j) {
                const bool band = j - i >= m.min_diagonal() && j - i <= m.max_diagonal() && j < sk;
                ASSERT_EQ(band, m.visible(i, j)) << "Sq=" << sq << " Sk=" << sk << " wl=" << wl
                                                 << " wr=" << wr << " i=" << i << " j=" << j;
              }
          }
        }
      }
    }
  }
  attn::VisibilityMask far;  // bounds beyond the int range clamp to it
  far.diag_offset = -2000000000;
  far.window_left = 2000000000;
  far.window_right = 2000000000;
  EXPECT_EQ(far.min_diagonal(), INT_MIN);
  far.diag_offset = 2000000000;
  EXPECT_EQ(far.max_diagonal(), INT_MAX);
}

}  // namespace
}  // namespace flashcore::testing
