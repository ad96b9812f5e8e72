// The fp64 CPU path of softmax_forward (host pointers) and the argument validation, which runs
// before any path: each rule's error names the argument, and a refused call writes nothing.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "flashcore/softmax.h"
#include "flashcore/softmax.hpp"

namespace flashcore {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = -12345.0f;  // what a refused call must leave in y and lse

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// softmax by the textbook formula exp(x_i) / sum_j exp(x_j) in long double, for inputs small enough
// that nothing overflows: an independent check of the max-subtracted fp64 path.
std::vector<double> textbook_softmax(const std::vector<float>& row, double* lse) {
  long double sum = 0.0L;
  for (float v : row) sum += std::exp(static_cast<long double>(v));
  std::vector<double> out;
  for (float v : row) out.push_back(static_cast<double>(std::exp(static_cast<long double>(v)) / sum));
  *lse = static_cast<double>(std::log(sum));
  return out;
}

struct Fp32Run {
  Status status;
  std::vector<float> y;
  std::vector<float> lse;
};

Fp32Run run_fp32(const std::vector<float>& x, int64_t rows, int64_t cols,
                 SoftmaxVariant variant = SoftmaxVariant::kAuto) {
  Fp32Run run{Status::Ok(), std::vector<float>(x.size(), kSentinel), std::vector<float>(size_t(rows), kSentinel)};
  run.status = softmax_forward(x.data(), run.y.data(), run.lse.data(), rows, cols, DType::kFloat32, variant);
  return run;
}

TEST(SoftmaxCpu, MatchesTextbookFormulaOnRandomRows) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int64_t rows = 5, cols = 37;
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = normal(rng);
  const Fp32Run run = run_fp32(x, rows, cols);
  ASSERT_TRUE(run.status.ok()) << run.status.message;
  for (int64_t r = 0; r < rows; ++r) {
    double lse = 0.0;
    const std::vector<double> expected =
        textbook_softmax(std::vector<float>(x.begin() + r * cols, x.begin() + (r + 1) * cols), &lse);
    for (int64_t c = 0; c < cols; ++c) EXPECT_NEAR(run.y[size_t(r * cols + c)], expected[size_t(c)], 1e-7);
    EXPECT_NEAR(run.lse[size_t(r)], lse, 1e-6);
  }
}

TEST(SoftmaxCpu, EveryVariantRunsTheCpuPathForHostPointers) {
  const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f};  // cols = 7: not vector aligned
  const Fp32Run reference = run_fp32(x, 1, 7);
  for (int v = 0; v < kSoftmaxVariantCount; ++v) {
    const Fp32Run run = run_fp32(x, 1, 7, static_cast<SoftmaxVariant>(v));
    ASSERT_TRUE(run.status.ok()) << softmax_variant_name(static_cast<SoftmaxVariant>(v)) << ": " << run.status.message;
    EXPECT_EQ(run.y, reference.y);
  }
}

TEST(SoftmaxCpu, RowOfLengthOneIsOneAndLseIsTheValue) {
  const Fp32Run run = run_fp32({-3.5f, 0.0f, 1e30f}, 3, 1);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.y, (std::vector<float>{1.0f, 1.0f, 1.0f}));
  EXPECT_FLOAT_EQ(run.lse[0], -3.5f);
  EXPECT_FLOAT_EQ(run.lse[2], 1e30f);
}

TEST(SoftmaxCpu, HugeMagnitudesDoNotOverflow) {
  // Max-subtracted: exp(1e30) would overflow, exp(x - max) does not.
  const Fp32Run run = run_fp32({1e30f, 1e30f, -1e30f, 3e38f, -3e38f, 0.0f}, 2, 3);
  ASSERT_TRUE(run.status.ok());
  EXPECT_FLOAT_EQ(run.y[0], 0.5f);
  EXPECT_FLOAT_EQ(run.y[1], 0.5f);
  EXPECT_EQ(run.y[2], 0.0f);
  EXPECT_FLOAT_EQ(run.lse[0], 1e30f);
  EXPECT_FLOAT_EQ(run.y[3], 1.0f);
  EXPECT_EQ(run.y[4], 0.0f);
  EXPECT_FLOAT_EQ(run.lse[1], 3e38f);
}

TEST(SoftmaxCpu, NaNMakesItsWholeRowNaNAndLeavesOtherRowsAlone) {
  const Fp32Run run = run_fp32({0.0f, kNaN, 1.0f, 0.0f, 0.0f, 0.0f}, 2, 3);
  ASSERT_TRUE(run.status.ok());
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(std::isnan(run.y[size_t(c)])) << c;
  EXPECT_TRUE(std::isnan(run.lse[0]));
  for (int c = 3; c < 6; ++c) EXPECT_FLOAT_EQ(run.y[size_t(c)], 1.0f / 3.0f);
  EXPECT_FLOAT_EQ(run.lse[1], std::log(3.0f));
}

TEST(SoftmaxCpu, NaNWinsOverInfinities) {
  const Fp32Run run = run_fp32({kInf, kNaN, -kInf, -kInf, kNaN, -kInf}, 2, 3);
  ASSERT_TRUE(run.status.ok());
  for (float v : run.y) EXPECT_TRUE(std::isnan(v));
  EXPECT_TRUE(std::isnan(run.lse[0]));
  EXPECT_TRUE(std::isnan(run.lse[1]));
}

TEST(SoftmaxCpu, AllNegativeInfinityRowIsNaNWithLseNegativeInfinity) {
  const Fp32Run run = run_fp32({-kInf, -kInf, -kInf}, 1, 3);
  ASSERT_TRUE(run.status.ok());
  for (float v : run.y) EXPECT_TRUE(std::isnan(v));  // torch.softmax: 0/0
  EXPECT_EQ(run.lse[0], -kInf);                      // torch.logsumexp: log(0)
}

TEST(SoftmaxCpu, NegativeInfinityEntriesGetZeroProbability) {
  const Fp32Run run = run_fp32({-kInf, 0.0f, -kInf, 0.0f}, 1, 4);
  ASSERT_TRUE(run.status.ok());
  EXPECT_EQ(run.y, (std::vector<float>{0.0f, 0.5f, 0.0f, 0.5f}));
  EXPECT_FLOAT_EQ(run.lse[0], std::log(2.0f));
}

TEST(SoftmaxCpu, PositiveInfinityEntryMakesRowNaNWithLsePositiveInfinity) {
  // torch.softmax: max = inf, inf - inf = NaN; torch.logsumexp gives +inf.
  const Fp32Run run = run_fp32({1.0f, kInf, 2.0f}, 1, 3);
  ASSERT_TRUE(run.status.ok());
  for (float v : run.y) EXPECT_TRUE(std::isnan(v));
  EXPECT_EQ(run.lse[0], kInf);
}

TEST(SoftmaxCpu, HalfAndBFloat16OutputsAreTheRoundedFp64Result) {
  const std::vector<float> row = {0.5f, -1.25f, 2.0f, 8192.0f, -8192.0f, 3.0f};  // exact in fp16 and bf16
  double lse = 0.0;
  std::vector<float> shifted(row);
  for (float& v : shifted) v -= 8192.0f;  // textbook formula on shifted inputs (exact in fp32)
  const std::vector<double> expected = textbook_softmax(shifted, &lse);
  for (DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    std::vector<uint16_t> x(row.size()), y(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) store_from_float(x.data(), int64_t(i), row[i], dtype);
    float row_lse = 0.0f;
    const Status st = softmax_forward(x.data(), y.data(), &row_lse, 1, int64_t(row.size()), dtype);
    ASSERT_TRUE(st.ok()) << st.message;
    for (size_t i = 0; i < row.size(); ++i) {
      const float input = load_as_float(x.data(), int64_t(i), dtype);
      ASSERT_EQ(input, row[i]) << "test inputs must be exact in " << dtype_name(dtype);
      std::vector<uint16_t> rounded(1);
      store_from_float(rounded.data(), 0, float(expected[i]), dtype);
      EXPECT_EQ(y[i], rounded[0]) << dtype_name(dtype) << " element " << i;
    }
    EXPECT_NEAR(row_lse, lse + 8192.0, 1e-3);
  }
}

TEST(SoftmaxCpu, InPlaceAndWithoutLse) {
  std::vector<float> x = {1.0f, 1.0f, 2.0f, 2.0f};
  ASSERT_TRUE(softmax_forward(x.data(), x.data(), nullptr, 2, 2, DType::kFloat32).ok());
  EXPECT_EQ(x, (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
}

TEST(SoftmaxCpu, ZeroRowsIsANoOpEvenWithNullPointers) {
  EXPECT_TRUE(softmax_forward(nullptr, nullptr, nullptr, 0, 0, DType::kFloat32).ok());
  EXPECT_TRUE(softmax_forward(nullptr, nullptr, nullptr, 0, 17, DType::kBFloat16).ok());
}

// ---- validation: error names the argument, nothing written ------------------------------------
struct Refusal {
  const char* what;
  Status status;
  std::string expected_prefix;
  StatusCode expected_code;
};

TEST(SoftmaxValidation, EachRuleNamesItsArgumentAndWritesNothing) {
  std::vector<float> x(64, 1.0f), y(64, kSentinel), lse(8, kSentinel);
  const auto call = [&](const void* xp, void* yp, float* lp, int64_t rows, int64_t cols, DType dtype,
                        SoftmaxVariant variant = SoftmaxVariant::kAuto) {
    return softmax_forward(xp, yp, lp, rows, cols, dtype, variant);
  };
  const std::vector<Refusal> refusals = {
      {"negative rows", call(x.data(), y.data(), lse.data(), -1, 8, DType::kFloat32), "rows:", StatusCode::kInvalidArgument},
      {"negative cols", call(x.data(), y.data(), lse.data(), 8, -8, DType::kFloat32), "cols:", StatusCode::kInvalidArgument},
      {"zero cols", call(x.data(), y.data(), lse.data(), 8, 0, DType::kFloat32), "cols:", StatusCode::kInvalidArgument},
      {"null x", call(nullptr, y.data(), lse.data(), 8, 8, DType::kFloat32), "x:", StatusCode::kInvalidArgument},
      {"null y", call(x.data(), nullptr, lse.data(), 8, 8, DType::kFloat32), "y:", StatusCode::kInvalidArgument},
      {"unknown dtype", call(x.data(), y.data(), lse.data(), 8, 8, static_cast<DType>(7)), "dtype:", StatusCode::kInvalidArgument},
      {"unknown variant", call(x.data(), y.data(), lse.data(), 8, 8, DType::kFloat32, static_cast<SoftmaxVariant>(42)), "variant:", StatusCode::kInvalidArgument},
      {"byte count overflow", call(x.data(), y.data(), lse.data(), int64_t(1) << 40, int64_t(1) << 30, DType::kFloat32), "rows * cols:", StatusCode::kInvalidArgument},
      {"y overlaps x", call(x.data(), x.data() + 1, lse.data(), 7, 8, DType::kFloat32), "y:", StatusCode::kInvalidArgument},
      {"lse overlaps y", call(x.data(), y.data(), y.data() + 60, 8, 8, DType::kFloat32), "lse:", StatusCode::kInvalidArgument},
  };
  for (const Refusal& r : refusals) {
    EXPECT_EQ(r.status.code, r.expected_code) << r.what << ": " << r.status.message;
    EXPECT_TRUE(starts_with(r.status.message, r.expected_prefix)) << r.what << ": " << r.status.message;
  }
  for (float v : y) ASSERT_EQ(v, kSentinel) << "a refused call wrote y";
  for (float v : lse) ASSERT_EQ(v, kSentinel) << "a refused call wrote lse";
  for (float v : x) ASSERT_EQ(v, 1.0f) << "a refused call wrote x";
}

TEST(SoftmaxValidation, VariantNamesAreDistinct) {
  std::set<std::string> names;
  for (int v = 0; v < kSoftmaxVariantCount; ++v) names.insert(softmax_variant_name(static_cast<SoftmaxVariant>(v)));
  EXPECT_EQ(names.size(), size_t(kSoftmaxVariantCount));
  EXPECT_EQ(names.count("unknown"), 0u);
}

TEST(SoftmaxValidation, SelectVariantOnHostPointersIsTheCpuPath) {
  std::vector<float> x(8), y(8);
  SoftmaxVariant chosen = SoftmaxVariant::kOnline;
  ASSERT_TRUE(softmax_select_variant(x.data(), y.data(), 1, 8, DType::kFloat32, SoftmaxVariant::kVectorized, &chosen).ok());
  EXPECT_EQ(chosen, SoftmaxVariant::kAuto);
  EXPECT_EQ(softmax_select_variant(x.data(), y.data(), -1, 8, DType::kFloat32, SoftmaxVariant::kAuto, &chosen).code,
            StatusCode::kInvalidArgument);
}

// ---- C ABI -----------------------------------------------------------------------------------
TEST(SoftmaxCApi, ReturnsCodesAndAThreadLocalMessage) {
  std::vector<float> x = {0.0f, 0.0f}, y(2, kSentinel);
  EXPECT_EQ(fc_softmax_forward(x.data(), y.data(), nullptr, -2, 2, FC_SOFTMAX_DTYPE_FLOAT32, FC_SOFTMAX_VARIANT_AUTO, nullptr),
            FC_SOFTMAX_INVALID_ARGUMENT);
  EXPECT_TRUE(starts_with(fc_softmax_last_error(), "rows:")) << fc_softmax_last_error();
  EXPECT_EQ(fc_softmax_forward(x.data(), y.data(), nullptr, 1, 2, 99, FC_SOFTMAX_VARIANT_AUTO, nullptr),
            FC_SOFTMAX_INVALID_ARGUMENT);
  EXPECT_TRUE(starts_with(fc_softmax_last_error(), "dtype:")) << fc_softmax_last_error();
  EXPECT_EQ(y, (std::vector<float>{kSentinel, kSentinel}));
  EXPECT_EQ(fc_softmax_forward(x.data(), y.data(), nullptr, 1, 2, FC_SOFTMAX_DTYPE_FLOAT32, FC_SOFTMAX_VARIANT_ONLINE, nullptr),
            FC_SOFTMAX_OK);
  EXPECT_STREQ(fc_softmax_last_error(), "");
  EXPECT_EQ(y, (std::vector<float>{0.5f, 0.5f}));
}

}  // namespace
}  // namespace flashcore
