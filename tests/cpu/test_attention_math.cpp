// The shared attention math (src/attention/): the online softmax state and its merge, and the score
// transform's softcap forms, checked against direct fp64 computation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention/score_transform.hpp"
#include "attention/softmax_state.hpp"

namespace {

using flashcore::attn::kLog2e;
using flashcore::attn::ScoreTransform;
using flashcore::attn::SoftmaxState;

// Folds scores (natural units) into a state block by block, as the kernels do; returns the state
// and, in weights, each score's final weight exp2(score * log2e - max_log2) (what O accumulates).
SoftmaxState fold(const std::vector<float>& scores, int block, std::vector<double>* weights = nullptr) {
  SoftmaxState st;
  std::vector<double> w;
  for (size_t b0 = 0; b0 < scores.size(); b0 += block) {
    const size_t b1 = std::min(scores.size(), b0 + block);
    float block_max = -INFINITY;
    for (size_t j = b0; j < b1; ++j) block_max = std::fmax(block_max, scores[j] * kLog2e);
    const float factor = st.rescale_for_block(block_max);
    for (double& x : w) x *= factor;
    for (size_t j = b0; j < b1; ++j) {
      const float p = std::exp2(scores[j] * kLog2e - st.max_log2);
      st.sum += p;
      w.push_back(p);
    }
  }
  if (weights) *weights = w;
  return st;
}

double exact_lse(const std::vector<float>& scores) {
  double m = -INFINITY;
  for (float s : scores) m = std::max(m, (double)s);
  double sum = 0;
  for (float s : scores) sum += std::exp((double)s - m);
  return m + std::log(sum);
}

TEST(SoftmaxState, BlockwiseFoldGivesTheExactLseAndWeights) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float scale : {1.0f, 10.0f, 40.0f}) {
    std::vector<float> scores(1000);
    for (float& s : scores) s = normal(rng) * scale;
    std::vector<double> w;
    const SoftmaxState st = fold(scores, 64, &w);
    EXPECT_NEAR(st.lse(), exact_lse(scores), 1e-4 * std::max(1.0, std::fabs(exact_lse(scores)))) << scale;
    // The running max stays within the threshold of the true max: no weight exceeds 2^4.
    for (double x : w) EXPECT_LE(x, 16.0 * (1 + 1e-6));
    const double lse = exact_lse(scores);
    for (size_t j = 0; j < scores.size(); j += 97) {
      EXPECT_NEAR(w[j] / st.sum, std::exp(scores[j] - lse), 1e-5) << scale << " key " << j;
    }
  }
}

TEST(SoftmaxState, MergeOfDisjointKeySetsEqualsOneFold) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 5.0f);
  std::vector<float> a(300), b(500);
  for (float& s : a) s = normal(rng);
  for (float& s : b) s = normal(rng) + 20.0f;  // b's max far above a's
  std::vector<float> all(a);
  all.insert(all.end(), b.begin(), b.end());
  SoftmaxState sa = fold(a, 64), sb = fold(b, 64);
  float fa = 0, fb = 0;
  sa.merge(sb, fa, fb);
  EXPECT_NEAR(sa.lse(), exact_lse(all), 1e-4 * std::fabs(exact_lse(all)));
  EXPECT_FLOAT_EQ(sa.max_log2, std::fmax(fold(a, 64).max_log2, sb.max_log2));
  EXPECT_FLOAT_EQ(fb, 1.0f);  // the side holding the larger max keeps its scale
  EXPECT_LT(fa, 1.0f);
}

TEST(SoftmaxState, EmptySidesMergeExactly) {
  const SoftmaxState empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.inv_sum(), 0.0f);
  EXPECT_EQ(empty.lse(), -INFINITY);
  SoftmaxState full = fold({1.0f, 2.0f, 3.0f}, 2);
  const float lse = full.lse();
  float own = 0, other = 0;
  full.merge(empty, own, other);  // empty on the right: unchanged, its O weighted 0
  EXPECT_FLOAT_EQ(full.lse(), lse);
  EXPECT_EQ(own, 1.0f);
  EXPECT_EQ(other, 0.0f);
  SoftmaxState e1, e2;
  e1.merge(e2, own, other);  // both empty: still empty, no NaN
  EXPECT_TRUE(e1.empty());
  EXPECT_EQ(e1.lse(), -INFINITY);
  SoftmaxState left;
  left.merge(fold({1.0f, 2.0f, 3.0f}, 2), own, other);  // empty on the left
  EXPECT_FLOAT_EQ(left.lse(), lse);
  EXPECT_EQ(own, 0.0f);
}

TEST(SoftmaxState, AllInvisibleBlocksLeaveTheRowEmptyAndNanPropagates) {
  SoftmaxState st;
  EXPECT_EQ(st.rescale_for_block(-INFINITY), 1.0f);  // nothing visible: the max stays kNoKeyYet
  EXPECT_EQ(st.max_log2, SoftmaxState::kNoKeyYet);
  EXPECT_EQ(std::exp2(-INFINITY - st.max_log2), 0.0f);  // an invisible key's weight is 0, not NaN
  EXPECT_TRUE(st.empty());
  SoftmaxState nan_row;
  nan_row.sum = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(nan_row.empty());
  EXPECT_TRUE(std::isnan(nan_row.lse()));
  EXPECT_TRUE(std::isnan(nan_row.inv_sum()));
}

TEST(ScoreTransform, DotSoftcapIsTheSoftcapOfTheScaledDotOverScale) {
  ScoreTransform t;
  t.scale = 0.125f;
  t.softcap = 30.0f;
  const auto cap = t.dot_softcap();
  for (float dot : {-3000.0f, -20.0f, 0.0f, 1.5f, 77.0f, 5000.0f}) {
    EXPECT_NEAR(cap.apply(dot) * t.scale, t.apply(dot, 0, 0), 1e-5f * 30) << dot;
  }
  ScoreTransform plain;
  EXPECT_EQ(plain.dot_softcap().softcap_over_scale, 0.0f);
}

TEST(ScoreTransform, SoftcapDerivativeMatchesFiniteDifferences) {
  ScoreTransform t;
  t.scale = 1.0f;
  t.softcap = 5.0f;
  for (double x : {-12.0, -1.0, 0.0, 0.3, 4.0, 9.0}) {
    const double h = 1e-5;
    const double numeric = (t.apply(x + h, 0, 0) - t.apply(x - h, 0, 0)) / (2 * h);
    EXPECT_NEAR(t.softcap_derivative(t.apply(x, 0, 0)), numeric, 1e-7) << x;
  }
  ScoreTransform plain;
  EXPECT_EQ(plain.softcap_derivative(3.0), 1.0);
  EXPECT_EQ(plain.softcap_derivative(3.0f), 1.0f);
}

}  // namespace
