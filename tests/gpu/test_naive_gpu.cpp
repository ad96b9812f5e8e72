// The naive GPU reference against the fp64 CPU reference, rule by rule. Once it passes here it
// serves as the reference for shapes too large for the CPU (compare_paths).
#include <gtest/gtest.h>

#include "common/gpu.hpp"
#include "common/gpu_check.hpp"

using flashcore::DType;
using flashcore::KernelPath;
using flashcore::MaskAlign;
using flashcore::testing::AlibiLayout;
using flashcore::testing::Layout;
using flashcore::testing::TestCase;

namespace {

TestCase base_case(int sq, int sk, int d = 64, DType dtype = DType::kFloat16) {
  TestCase c;
  c.batch = 2;
  c.seqlen_q = sq;
  c.seqlen_k = sk;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.head_dim_qk = c.head_dim_v = d;
  c.dtype = dtype;
  c.seed = uint64_t(sq) * 7919u + sk * 104729u + d;
  return c;
}

void expect_naive_matches(const TestCase& c) { FC_EXPECT_PATH_MATCHES_REFERENCE(c, KernelPath::kNaiveGpu); }

}  // namespace

TEST(NaiveGpu, NoMaskMatchesReferenceInEveryDtype) {
  FC_REQUIRE_GPU();
  for (DType dt : {DType::kFloat16, DType::kBFloat16, DType::kFloat32})
    for (int s : {1, 7, 65, 300}) expect_naive_matches(base_case(s, s + 3, 64, dt));
}

TEST(NaiveGpu, CausalBottomRightAndTopLeftWithSqNotEqualSk) {
  FC_REQUIRE_GPU();
  for (MaskAlign align : {MaskAlign::kBottomRight, MaskAlign::kTopLeft})
    for (auto [sq, sk] : {std::pair{63, 200}, std::pair{200, 63}, std::pair{129, 129}}) {
      TestCase c = base_case(sq, sk);
      c.causal = true;
      c.align = align;
      expect_naive_matches(c);
    }
}

TEST(NaiveGpu, SlidingWindowLeftRightAndCausalWindow) {
  FC_REQUIRE_GPU();
  for (auto [left, right] : {std::pair{16, 0}, std::pair{5, 9}, std::pair{-1, 3}, std::pair{40, -1}}) {
    TestCase c = base_case(150, 170);
    c.window_left = left;
    c.window_right = right;
    expect_naive_matches(c);
  }
  TestCase c = base_case(150, 150);
  c.causal = true;
  c.window_left = 32;
  expect_naive_matches(c);
}

TEST(NaiveGpu, SoftcapAndAlibiBothSlopeLayouts) {
  FC_REQUIRE_GPU();
  TestCase c = base_case(100, 120);
  c.softcap = 30.0f;
  c.input_scale = 10.0f;
  expect_naive_matches(c);
  for (AlibiLayout alibi : {AlibiLayout::kPerHead, AlibiLayout::kPerBatchHead}) {
    TestCase a = base_case(90, 110);
    a.alibi = alibi;
    a.causal = true;
    expect_naive_matches(a);
  }
}

TEST(NaiveGpu, GqaRatiosAndMqa) {
  FC_REQUIRE_GPU();
  for (auto [hq, hkv] : {std::pair{8, 8}, std::pair{8, 2}, std::pair{8, 1}}) {
    TestCase c = base_case(70, 90);
    c.heads_q = hq;
    c.heads_kv = hkv;
    expect_naive_matches(c);
  }
}

TEST(NaiveGpu, VarlenWithEmptySequencesAndSequsedK) {
  FC_REQUIRE_GPU();
  TestCase c = base_case(0, 0);
  c.varlen_q = {17, 0, 64, 129};
  c.varlen_k = {33, 5, 64, 100};
  c.seqused_k = {20, 0, 64, 77};
  c.causal = true;
  expect_naive_matches(c);
  c.seqused_k.clear();
  c.causal = false;
  expect_naive_matches(c);
}

TEST(NaiveGpu, HeadDimsFromTinyToLargeAndDqkNotEqualDv) {
  FC_REQUIRE_GPU();
  for (auto [dqk, dv] : {std::pair{8, 8}, std::pair{192, 128}, std::pair{128, 64}, std::pair{256, 256}, std::pair{512, 512}}) {
    TestCase c = base_case(40, 50);
    c.head_dim_qk = dqk;
    c.head_dim_v = dv;
    expect_naive_matches(c);
  }
}

TEST(NaiveGpu, StridedLayoutsAndLargeInputScale) {
  FC_REQUIRE_GPU();
  for (Layout layout : {Layout::kBHSD, Layout::kPaddedBSHD}) {
    TestCase c = base_case(77, 91, 64, DType::kBFloat16);
    c.layout = layout;
    c.input_scale = 10.0f;
    expect_naive_matches(c);
  }
}

TEST(NaiveGpu, LargeSequenceMatchesReference) {
  FC_REQUIRE_GPU();
  TestCase c = base_case(2048, 2048, 128, DType::kBFloat16);
  c.batch = 1;
  c.causal = true;
  expect_naive_matches(c);
}
