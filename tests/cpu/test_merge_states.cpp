// merge_attention_states on host pointers (the CPU implementation), against an fp64 evaluation of
//   lse = log(exp(lse_a) + exp(lse_b)),  o = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b
// on the same (dtype-rounded) inputs; the empty-side rules (lse -inf or +inf), NaN propagation, in
// place (o = o_a, lse = lse_a), strided layouts, every validation rule (nothing written on error),
// the choice of 16-byte vector accesses, and the C ABI.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "flashcore/flashcore.h"
#include "flashcore/flashcore.hpp"
#include "merge/merge_states.hpp"

namespace {

using flashcore::DType;
using flashcore::MergeStatesParams;
using flashcore::Status;
using flashcore::StatusCode;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint8_t kPoison = 0xFF;  // every 16- or 32-bit element of 0xFF bytes is a NaN

// How an o tensor [B, S, H, D] sits in memory.
enum class OLayout {
  kBSHD,    // dense, flash-attn's layout
  kBHSD,    // dense, PyTorch's [B, H, S, D]
  kPadded,  // [B, S, H, D] with unused elements after each head, token and batch entry
};

struct OStrides {
  int64_t batch, seq, head, elems;  // elems: the buffer's size in elements
};

OStrides o_strides(OLayout layout, int B, int S, int H, int D) {
  switch (layout) {
    case OLayout::kBSHD: return {int64_t(S) * H * D, int64_t(H) * D, D, int64_t(B) * S * H * D};
    case OLayout::kBHSD: return {int64_t(H) * S * D, D, int64_t(S) * D, int64_t(B) * S * H * D};
    case OLayout::kPadded: {
      const int64_t head = D + 3, seq = H * head + 5, batch = S * seq + 7;
      return {batch, seq, head, B * batch};
    }
  }
  return {};
}

struct LseStrides {
  int64_t batch, head, elems;
};

LseStrides lse_strides(bool padded, int B, int S, int H) {
  if (!padded) return {int64_t(H) * S, S, int64_t(B) * H * S};
  const int64_t head = S + 2, batch = H * head + 3;
  return {batch, head, B * batch};
}

// Which lse values a problem draws.
enum class LseMix {
  kFinite,   // uniform in [-8, 8]
  kSpecial,  // rows cycle through: a empty (-inf, +inf), b empty (-inf, +inf), both empty (every
             // sign pair), far apart (|a - b| = 60, exp underflows in fp32), equal, and uniform
};

struct Case {
  int batch = 2, seqlen = 5, heads = 3, head_dim = 16;
  DType dtype = DType::kFloat32;
  OLayout layout_a = OLayout::kBSHD, layout_b = OLayout::kBSHD, layout_o = OLayout::kBSHD;
  bool lse_padded = false;
  LseMix mix = LseMix::kSpecial;
  uint64_t seed = 1;
};

// Host tensors of a Case. params points into the vectors: a Problem is never copied or moved.
struct Problem {
  Case c;
  std::vector<uint8_t> o_a, o_b, o;
  std::vector<float> lse_a, lse_b, lse;
  OStrides sa{}, sb{}, so{};
  LseStrides la{}, lb{}, lo{};
  MergeStatesParams params;

  explicit Problem(const Case& cs) : c(cs) {
    const int B = c.batch, S = c.seqlen, H = c.heads, D = c.head_dim;
    const int elem = flashcore::dtype_size(c.dtype);
    sa = o_strides(c.layout_a, B, S, H, D);
    sb = o_strides(c.layout_b, B, S, H, D);
    so = o_strides(c.layout_o, B, S, H, D);
    la = lb = lo = lse_strides(c.lse_padded, B, S, H);
    o_a.assign(size_t(sa.elems * elem), 0);
    o_b.assign(size_t(sb.elems * elem), 0);
    o.assign(size_t(so.elems * elem), kPoison);
    lse_a.assign(size_t(la.elems), 0.0f);
    lse_b.assign(size_t(lb.elems), 0.0f);
    lse.assign(size_t(lo.elems), kNaN);
    std::mt19937_64 rng(c.seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < sa.elems; ++i) flashcore::store_from_float(o_a.data(), i, normal(rng), c.dtype);
    for (int64_t i = 0; i < sb.elems; ++i) flashcore::store_from_float(o_b.data(), i, normal(rng), c.dtype);
    std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
    int64_t row = 0;
    for (int b = 0; b < B; ++b)
      for (int s = 0; s < S; ++s)
        for (int h = 0; h < H; ++h, ++row) {
          float x = uniform(rng), y = uniform(rng);
          if (c.mix == LseMix::kSpecial) {
            switch (row % 12) {
              case 0: x = -kInf; break;
              case 1: x = kInf; break;
              case 2: y = -kInf; break;
              case 3: y = kInf; break;
              case 4: x = y = -kInf; break;
              case 5: x = -kInf, y = kInf; break;
              case 6: x = kInf, y = -kInf; break;
              case 7: x = y = kInf; break;
              case 8: y = x - 60.0f; break;
              case 9: x = y + 60.0f * (row % 2 ? 1.0f : -1.0f); break;
              case 10: y = x; break;
              default: break;
            }
          }
          lse_a[size_t(lse_at(la, b, s, h))] = x;
          lse_b[size_t(lse_at(lb, b, s, h))] = y;
        }
    params.o_a = o_a.data(), params.o_b = o_b.data(), params.o = o.data();
    params.lse_a = lse_a.data(), params.lse_b = lse_b.data(), params.lse = lse.data();
    params.batch = B, params.seqlen = S, params.heads = H, params.head_dim = D, params.dtype = c.dtype;
    params.o_a_batch_stride = sa.batch, params.o_a_seq_stride = sa.seq, params.o_a_head_stride = sa.head;
    params.o_b_batch_stride = sb.batch, params.o_b_seq_stride = sb.seq, params.o_b_head_stride = sb.head;
    params.o_batch_stride = so.batch, params.o_seq_stride = so.seq, params.o_head_stride = so.head;
    params.lse_a_batch_stride = la.batch, params.lse_a_head_stride = la.head;
    params.lse_b_batch_stride = lb.batch, params.lse_b_head_stride = lb.head;
    params.lse_batch_stride = lo.batch, params.lse_head_stride = lo.head;
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  static int64_t o_at(const OStrides& st, int b, int s, int h) { return b * st.batch + s * st.seq + h * st.head; }
  static int64_t lse_at(const LseStrides& st, int b, int s, int h) { return b * st.batch + h * st.head + s; }
  float a(int b, int s, int h, int d) const {
    return flashcore::load_as_float(o_a.data(), o_at(sa, b, s, h) + d, c.dtype);
  }
  float bv(int b, int s, int h, int d) const {
    return flashcore::load_as_float(o_b.data(), o_at(sb, b, s, h) + d, c.dtype);
  }
  float out(int b, int s, int h, int d) const {
    return flashcore::load_as_float(o.data(), o_at(so, b, s, h) + d, c.dtype);
  }
};

// The formula in fp64, with the empty-side rules, for one row.
struct Fp64Row {
  double w_a, w_b, lse;
};

Fp64Row fp64_row(float lse_a, float lse_b) {
  if (std::isnan(lse_a) || std::isnan(lse_b)) return {NAN, NAN, NAN};
  const bool a_empty = std::isinf(lse_a), b_empty = std::isinf(lse_b);
  if (a_empty && b_empty) return {0.0, 0.0, -INFINITY};
  if (a_empty) return {0.0, 1.0, lse_b};
  if (b_empty) return {1.0, 0.0, lse_a};
  const double m = std::max<double>(lse_a, lse_b);
  const double lse = m + std::log(std::exp(lse_a - m) + std::exp(lse_b - m));
  return {std::exp(lse_a - lse), std::exp(lse_b - lse), lse};
}

// Unit roundoff and half the smallest subnormal of the output dtype.
double unit_roundoff(DType dtype) {
  return dtype == DType::kFloat32 ? 0x1p-24 : dtype == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
}
double half_min_subnormal(DType dtype) {
  return dtype == DType::kFloat32 ? 0x1p-150 : dtype == DType::kFloat16 ? 0x1p-25 : 0x1p-134;
}

// Every output element against fp64: the fp32 blend is within 2^-21 of |w_a a| + |w_b b|, then one
// rounding to the dtype; lse within one rounding of fp32. Returns the number of mismatches.
int64_t expect_matches_fp64(const Problem& p, const std::string& what) {
  int64_t bad = 0;
  const Case& c = p.c;
  for (int b = 0; b < c.batch; ++b)
    for (int s = 0; s < c.seqlen; ++s)
      for (int h = 0; h < c.heads; ++h) {
        const Fp64Row ref = fp64_row(p.lse_a[size_t(Problem::lse_at(p.la, b, s, h))],
                                     p.lse_b[size_t(Problem::lse_at(p.lb, b, s, h))]);
        const float got_lse = p.lse[size_t(Problem::lse_at(p.lo, b, s, h))];
        const bool lse_ok = std::isinf(ref.lse) ? got_lse == ref.lse
                                                : std::fabs(got_lse - ref.lse) <= 0x1p-23 * std::fabs(ref.lse) + 1e-30;
        if (!lse_ok && bad++ < 10) {
          ADD_FAILURE() << what << ": lse at (b=" << b << ", s=" << s << ", h=" << h << ") is " << got_lse
                        << ", fp64 " << ref.lse;
        }
        for (int d = 0; d < c.head_dim; ++d) {
          const double x = p.a(b, s, h, d), y = p.bv(b, s, h, d);
          const double want = ref.w_a * x + ref.w_b * y;
          const double magnitude = std::fabs(ref.w_a * x) + std::fabs(ref.w_b * y);
          const double tol = unit_roundoff(c.dtype) * std::fabs(want) + 0x1p-21 * magnitude + half_min_subnormal(c.dtype);
          const double got = p.out(b, s, h, d);
          if (!(std::fabs(got - want) <= tol) && bad++ < 10) {
            ADD_FAILURE() << what << ": o at (b=" << b << ", s=" << s << ", h=" << h << ", d=" << d << ") is " << got
                          << ", fp64 " << want << " (tolerance " << tol << ")";
          }
        }
      }
  return bad;
}

std::string describe(const Case& c) {
  return std::string(flashcore::dtype_name(c.dtype)) + " B=" + std::to_string(c.batch) + " S=" +
         std::to_string(c.seqlen) + " H=" + std::to_string(c.heads) + " D=" + std::to_string(c.head_dim);
}

// ---------------------------------------------------------------------------------------------
// The formula
// ---------------------------------------------------------------------------------------------

TEST(MergeStates, MatchesFp64FormulaInEveryDtype) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int d : {1, 7, 64, 128, 257}) {
      Case c;
      c.dtype = dtype;
      c.head_dim = d;
      c.mix = LseMix::kFinite;
      c.seed = uint64_t(d) * 31 + int(dtype);
      Problem p(c);
      ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
      EXPECT_EQ(expect_matches_fp64(p, describe(c)), 0);
    }
}

TEST(MergeStates, EmptySidesAndFarApartLseMatchFp64InEveryDtype) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Case c;
    c.dtype = dtype;
    c.batch = 3, c.seqlen = 9, c.heads = 4, c.head_dim = 24;  // 108 rows: every special case several times
    Problem p(c);
    ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
    EXPECT_EQ(expect_matches_fp64(p, describe(c)), 0);
  }
}

TEST(MergeStates, AnEmptySideContributesNothingExactly) {
  // -inf and +inf both mean "no key": the other side comes through bit for bit, lse included.
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (float empty : {-kInf, kInf}) {
      Case c;
      c.dtype = dtype, c.batch = 1, c.seqlen = 4, c.heads = 2, c.head_dim = 16, c.mix = LseMix::kFinite;
      Problem p(c);
      for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s) {
          float& x = p.lse_a[size_t(Problem::lse_at(p.la, 0, s, h))];
          float& y = p.lse_b[size_t(Problem::lse_at(p.lb, 0, s, h))];
          (h == 0 ? x : y) = empty;
        }
      ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
      for (int h = 0; h < 2; ++h)
        for (int s = 0; s < 4; ++s) {
          const float kept_lse = h == 0 ? p.lse_b[size_t(Problem::lse_at(p.lb, 0, s, h))]
                                        : p.lse_a[size_t(Problem::lse_at(p.la, 0, s, h))];
          EXPECT_EQ(p.lse[size_t(Problem::lse_at(p.lo, 0, s, h))], kept_lse);
          for (int d = 0; d < 16; ++d) {
            EXPECT_EQ(p.out(0, s, h, d), h == 0 ? p.bv(0, s, h, d) : p.a(0, s, h, d))
                << describe(c) << " empty=" << empty << " s=" << s << " h=" << h << " d=" << d;
          }
        }
    }
}

TEST(MergeStates, BothSidesEmptyGiveZeroAndMinusInfinity) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (auto [x, y] : {std::pair{-kInf, -kInf}, std::pair{kInf, kInf}, std::pair{-kInf, kInf}, std::pair{kInf, -kInf}}) {
      Case c;
      c.dtype = dtype, c.batch = 1, c.seqlen = 2, c.heads = 1, c.head_dim = 8, c.mix = LseMix::kFinite;
      Problem p(c);
      for (int s = 0; s < 2; ++s) {
        p.lse_a[size_t(Problem::lse_at(p.la, 0, s, 0))] = x;
        p.lse_b[size_t(Problem::lse_at(p.lb, 0, s, 0))] = y;
      }
      ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
      for (int s = 0; s < 2; ++s) {
        EXPECT_EQ(p.lse[size_t(Problem::lse_at(p.lo, 0, s, 0))], -kInf);
        for (int d = 0; d < 8; ++d) EXPECT_EQ(p.out(0, s, 0, d), 0.0f) << describe(c) << " lse " << x << ", " << y;
      }
    }
}

TEST(MergeStates, EqualLseAveragesAndAddsLn2) {
  Case c;
  c.batch = 1, c.seqlen = 1, c.heads = 1, c.head_dim = 4, c.mix = LseMix::kFinite;
  Problem p(c);
  p.lse_a[0] = p.lse_b[0] = 3.0f;
  const float xa[4] = {1, 2, -4, 0.5f}, xb[4] = {3, -2, 4, 0.25f};
  for (int d = 0; d < 4; ++d) {
    reinterpret_cast<float*>(p.o_a.data())[d] = xa[d];
    reinterpret_cast<float*>(p.o_b.data())[d] = xb[d];
  }
  ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
  EXPECT_EQ(p.lse[0], float(3.0 + std::log(2.0)));
  for (int d = 0; d < 4; ++d) EXPECT_EQ(p.out(0, 0, 0, d), 0.5f * (xa[d] + xb[d]));
}

TEST(MergeStates, LargeFiniteLseDoesNotOverflow) {
  Case c;
  c.batch = 1, c.seqlen = 2, c.heads = 1, c.head_dim = 8, c.mix = LseMix::kFinite;
  Problem p(c);
  p.lse_a[0] = 1.0e4f, p.lse_b[0] = 1.0e4f - 1.0f;
  p.lse_a[1] = -3.0e4f, p.lse_b[1] = -3.0e4f + 2.0f;
  ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
  EXPECT_EQ(expect_matches_fp64(p, "large lse"), 0);
}

// ---------------------------------------------------------------------------------------------
// NaN
// ---------------------------------------------------------------------------------------------

TEST(MergeStates, NanLseMakesTheRowNan) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int side = 0; side < 2; ++side) {
      Case c;
      c.dtype = dtype, c.batch = 1, c.seqlen = 3, c.heads = 1, c.head_dim = 8, c.mix = LseMix::kFinite;
      Problem p(c);
      (side == 0 ? p.lse_a : p.lse_b)[1] = kNaN;
      (side == 0 ? p.lse_b : p.lse_a)[1] = -kInf;  // even against an empty other side
      ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
      EXPECT_TRUE(std::isnan(p.lse[1]));
      for (int d = 0; d < 8; ++d) EXPECT_TRUE(std::isnan(p.out(0, 1, 0, d))) << describe(c) << " d=" << d;
      for (int s : {0, 2}) {  // the other rows are unaffected
        EXPECT_FALSE(std::isnan(p.lse[size_t(s)]));
        for (int d = 0; d < 8; ++d) EXPECT_FALSE(std::isnan(p.out(0, s, 0, d)));
      }
    }
}

TEST(MergeStates, NanInOIsNeverDroppedEvenOnAnEmptySide) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Case c;
    c.dtype = dtype, c.batch = 1, c.seqlen = 3, c.heads = 1, c.head_dim = 8, c.mix = LseMix::kFinite;
    Problem p(c);
    const int64_t row1 = Problem::o_at(p.sa, 0, 1, 0), row2 = Problem::o_at(p.sa, 0, 2, 0);
    flashcore::store_from_float(p.o_a.data(), row1 + 3, kNaN, dtype);  // a normal row
    flashcore::store_from_float(p.o_a.data(), row2 + 5, kNaN, dtype);  // a row where a is empty
    p.lse_a[2] = -kInf;
    ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
    for (int d = 0; d < 8; ++d) {
      EXPECT_EQ(std::isnan(p.out(0, 1, 0, d)), d == 3) << describe(c) << " d=" << d;
      EXPECT_EQ(std::isnan(p.out(0, 2, 0, d)), d == 5) << describe(c) << " d=" << d;
    }
    EXPECT_FALSE(std::isnan(p.lse[1]));
    EXPECT_EQ(p.lse[2], p.lse_b[2]);
  }
}

// ---------------------------------------------------------------------------------------------
// In place, layouts, empty calls
// ---------------------------------------------------------------------------------------------

TEST(MergeStates, InPlaceIntoOaAndLseAEqualsOutOfPlace) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (OLayout layout : {OLayout::kBSHD, OLayout::kPadded}) {
      Case c;
      c.dtype = dtype, c.layout_a = c.layout_o = layout, c.layout_b = OLayout::kBHSD, c.lse_padded = true;
      c.head_dim = 40;
      Problem p(c);
      ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
      MergeStatesParams in_place = p.params;
      in_place.o = p.o_a.data();
      in_place.lse = p.lse_a.data();
      in_place.o_batch_stride = p.sa.batch, in_place.o_seq_stride = p.sa.seq, in_place.o_head_stride = p.sa.head;
      in_place.lse_batch_stride = p.la.batch, in_place.lse_head_stride = p.la.head;
      ASSERT_TRUE(flashcore::merge_attention_states(in_place).ok());
      for (int b = 0; b < c.batch; ++b)
        for (int s = 0; s < c.seqlen; ++s)
          for (int h = 0; h < c.heads; ++h) {
            const float want_lse = p.lse[size_t(Problem::lse_at(p.lo, b, s, h))];
            const float got_lse = p.lse_a[size_t(Problem::lse_at(p.la, b, s, h))];
            EXPECT_TRUE(got_lse == want_lse || (std::isnan(got_lse) && std::isnan(want_lse)));
            for (int d = 0; d < c.head_dim; ++d) EXPECT_EQ(p.a(b, s, h, d), p.out(b, s, h, d)) << describe(c);
          }
    }
}

TEST(MergeStates, StridedLayoutsMatchFp64AndLeavePaddingUntouched) {
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Case c;
    c.dtype = dtype, c.layout_a = OLayout::kPadded, c.layout_b = OLayout::kBHSD, c.layout_o = OLayout::kPadded;
    c.lse_padded = true, c.head_dim = 20;
    Problem p(c);
    ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
    EXPECT_EQ(expect_matches_fp64(p, describe(c) + " strided"), 0);
    // Elements outside the logical tensor still hold the poison; lse padding is still NaN.
    const int elem = flashcore::dtype_size(dtype);
    std::vector<bool> logical(size_t(p.so.elems), false);
    std::vector<bool> logical_lse(size_t(p.lo.elems), false);
    for (int b = 0; b < c.batch; ++b)
      for (int s = 0; s < c.seqlen; ++s)
        for (int h = 0; h < c.heads; ++h) {
          logical_lse[size_t(Problem::lse_at(p.lo, b, s, h))] = true;
          for (int d = 0; d < c.head_dim; ++d) logical[size_t(Problem::o_at(p.so, b, s, h) + d)] = true;
        }
    int64_t padding_written = 0;
    for (int64_t i = 0; i < p.so.elems; ++i) {
      if (logical[size_t(i)]) continue;
      for (int k = 0; k < elem; ++k) padding_written += p.o[size_t(i * elem + k)] != kPoison;
    }
    for (int64_t i = 0; i < p.lo.elems; ++i) padding_written += !logical_lse[size_t(i)] && !std::isnan(p.lse[size_t(i)]);
    EXPECT_EQ(padding_written, 0) << describe(c);
  }
}

TEST(MergeStates, VarlenPackedLayoutIsBatchOne) {
  // o [T, H, D] and lse [H, T]: batch = 1, seqlen = T; batch strides are never used.
  Case c;
  c.batch = 1, c.seqlen = 11, c.heads = 3, c.head_dim = 32, c.dtype = DType::kBFloat16;
  Problem p(c);
  p.params.o_a_batch_stride = p.params.o_b_batch_stride = p.params.o_batch_stride = 0;
  p.params.lse_a_batch_stride = p.params.lse_b_batch_stride = p.params.lse_batch_stride = 0;
  ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
  EXPECT_EQ(expect_matches_fp64(p, "varlen"), 0);
}

TEST(MergeStates, LseOutputIsOptional) {
  Case c;
  c.dtype = DType::kFloat16;
  Problem p(c);
  p.params.lse = nullptr;
  ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
  for (float v : p.lse) EXPECT_TRUE(std::isnan(v));  // untouched
  MergeStatesParams with_lse = p.params;
  std::vector<uint8_t> o_first = p.o;
  with_lse.lse = p.lse.data();
  ASSERT_TRUE(flashcore::merge_attention_states(with_lse).ok());
  EXPECT_EQ(o_first, p.o);
}

TEST(MergeStates, ZeroSizeCallsTouchNothing) {
  for (int which = 0; which < 3; ++which) {
    MergeStatesParams p;  // every pointer null: nothing may be read or written
    p.batch = which == 0 ? 0 : 2;
    p.seqlen = which == 1 ? 0 : 3;
    p.heads = which == 2 ? 0 : 4;
    p.head_dim = 64;
    EXPECT_TRUE(flashcore::merge_attention_states(p).ok()) << "zero extent " << which;
  }
  // The size rules still hold for an empty call.
  MergeStatesParams p;
  p.head_dim = 0;
  EXPECT_EQ(flashcore::merge_attention_states(p).code, StatusCode::kInvalidArgument);
}

TEST(MergeStates, HeadDimBoundsOneAnd1024) {
  for (int d : {1, 1024}) {
    Case c;
    c.batch = 1, c.seqlen = 2, c.heads = 2, c.head_dim = d, c.dtype = DType::kFloat16;
    Problem p(c);
    ASSERT_TRUE(flashcore::merge_attention_states(p.params).ok());
    EXPECT_EQ(expect_matches_fp64(p, "head_dim " + std::to_string(d)), 0);
  }
}

// ---------------------------------------------------------------------------------------------
// Vector accesses (the device kernel's choice, a pure function of the call)
// ---------------------------------------------------------------------------------------------

TEST(MergeStates, VectorLoadsOnlyWhenHeadDimBasesAndStridesAllow) {
  Case c;
  c.dtype = DType::kFloat16, c.head_dim = 64;
  Problem p(c);
  // std::vector's buffers are 16-byte aligned (operator new's alignment on this platform).
  ASSERT_EQ(reinterpret_cast<uintptr_t>(p.o_a.data()) % 16, 0u);
  EXPECT_TRUE(flashcore::merge::can_use_vector_loads(p.params));
  MergeStatesParams q = p.params;
  q.head_dim = 60;  // 120 bytes: not whole 16-byte vectors
  q.o_a_head_stride = q.o_b_head_stride = q.o_head_stride = 60;
  EXPECT_FALSE(flashcore::merge::can_use_vector_loads(q));
  q = p.params;
  q.o_b = p.o_b.data() + 2;  // one fp16 element off
  EXPECT_FALSE(flashcore::merge::can_use_vector_loads(q));
  q = p.params;
  q.o_head_stride = 68, q.o_seq_stride = 68 * 3, q.o_batch_stride = 68 * 3 * 5;  // 68 % 8 != 0
  EXPECT_FALSE(flashcore::merge::can_use_vector_loads(q));
  q.heads = 1, q.seqlen = 1, q.batch = 1;  // strides of extent-1 dimensions do not matter
  EXPECT_TRUE(flashcore::merge::can_use_vector_loads(q));
  q = p.params;
  q.lse = p.lse.data() + 1;  // lse is accessed as scalars: its alignment is irrelevant here
  EXPECT_TRUE(flashcore::merge::can_use_vector_loads(q));
  q = p.params;
  q.dtype = DType::kFloat32, q.head_dim = 12;  // 48 bytes
  EXPECT_TRUE(flashcore::merge::can_use_vector_loads(q));
  q.head_dim = 6;
  EXPECT_FALSE(flashcore::merge::can_use_vector_loads(q));
}

// ---------------------------------------------------------------------------------------------
// Validation: each test breaks one rule; the status names the argument and nothing is written.
// ---------------------------------------------------------------------------------------------

class MergeStatesValidation : public ::testing::Test {
 protected:
  MergeStatesValidation() : problem_(small_case()) {}
  static Case small_case() {
    Case c;
    c.dtype = DType::kFloat16, c.batch = 2, c.seqlen = 3, c.heads = 2, c.head_dim = 8;
    return c;
  }
  // Expects kInvalidArgument mentioning every word, and every buffer unchanged.
  void expect_invalid(const MergeStatesParams& params, std::initializer_list<const char*> words) {
    const std::vector<uint8_t> o_a = problem_.o_a, o_b = problem_.o_b, o = problem_.o;
    const std::vector<float> lse_a = problem_.lse_a, lse_b = problem_.lse_b;
    const Status st = flashcore::merge_attention_states(params);
    EXPECT_EQ(st.code, StatusCode::kInvalidArgument) << st.message;
    for (const char* w : words) EXPECT_NE(st.message.find(w), std::string::npos) << "'" << w << "' not in: " << st.message;
    EXPECT_EQ(o_a, problem_.o_a);
    EXPECT_EQ(o_b, problem_.o_b);
    EXPECT_EQ(o, problem_.o);
    EXPECT_EQ(lse_a, problem_.lse_a);
    EXPECT_EQ(lse_b, problem_.lse_b);
    for (float v : problem_.lse) EXPECT_TRUE(std::isnan(v));
  }
  MergeStatesParams valid() const { return problem_.params; }
  Problem problem_;
};

TEST_F(MergeStatesValidation, TheUnbrokenCallIsValid) {
  EXPECT_TRUE(flashcore::merge_attention_states(valid()).ok());
}

TEST_F(MergeStatesValidation, RejectsAnUnknownDtype) {
  MergeStatesParams p = valid();
  p.dtype = static_cast<DType>(7);
  expect_invalid(p, {"dtype", "fp16", "(got 7)"});
}

TEST_F(MergeStatesValidation, RejectsNegativeSizes) {
  MergeStatesParams p = valid();
  p.batch = -1;
  expect_invalid(p, {"batch", ">= 0"});
  p = valid();
  p.seqlen = -2;
  expect_invalid(p, {"seqlen", ">= 0"});
  p = valid();
  p.heads = -3;
  expect_invalid(p, {"heads", ">= 0"});
}

TEST_F(MergeStatesValidation, RejectsHeadDimOutsideOneTo1024) {
  for (int d : {0, -5, 1025}) {
    MergeStatesParams p = valid();
    p.head_dim = d;
    expect_invalid(p, {"head_dim", "[1, 1024]", ("got " + std::to_string(d)).c_str()});
  }
}

TEST_F(MergeStatesValidation, RejectsNullTensorsButNotANullLse) {
  const char* names[] = {"o_a", "lse_a", "o_b", "lse_b", "o"};
  for (int i = 0; i < 5; ++i) {
    MergeStatesParams p = valid();
    switch (i) {
      case 0: p.o_a = nullptr; break;
      case 1: p.lse_a = nullptr; break;
      case 2: p.o_b = nullptr; break;
      case 3: p.lse_b = nullptr; break;
      case 4: p.o = nullptr; break;
    }
    expect_invalid(p, {names[i], "must not be null"});
  }
  MergeStatesParams p = valid();
  p.lse = nullptr;
  EXPECT_TRUE(flashcore::merge_attention_states(p).ok());
}

TEST_F(MergeStatesValidation, RejectsNegativeStrides) {
  struct Field {
    int64_t MergeStatesParams::*field;
    const char* name;
  };
  const Field fields[] = {
      {&MergeStatesParams::o_a_batch_stride, "o_a_batch_stride"}, {&MergeStatesParams::o_a_seq_stride, "o_a_seq_stride"},
      {&MergeStatesParams::o_a_head_stride, "o_a_head_stride"},   {&MergeStatesParams::o_b_batch_stride, "o_b_batch_stride"},
      {&MergeStatesParams::o_b_seq_stride, "o_b_seq_stride"},     {&MergeStatesParams::o_b_head_stride, "o_b_head_stride"},
      {&MergeStatesParams::o_batch_stride, "o_batch_stride"},     {&MergeStatesParams::o_seq_stride, "o_seq_stride"},
      {&MergeStatesParams::o_head_stride, "o_head_stride"},       {&MergeStatesParams::lse_a_batch_stride, "lse_a_batch_stride"},
      {&MergeStatesParams::lse_a_head_stride, "lse_a_head_stride"}, {&MergeStatesParams::lse_b_batch_stride, "lse_b_batch_stride"},
      {&MergeStatesParams::lse_b_head_stride, "lse_b_head_stride"}, {&MergeStatesParams::lse_batch_stride, "lse_batch_stride"},
      {&MergeStatesParams::lse_head_stride, "lse_head_stride"}};
  for (const Field& f : fields) {
    MergeStatesParams p = valid();
    p.*(f.field) = -1;
    expect_invalid(p, {f.name, ">= 0", "got -1"});
  }
}

TEST_F(MergeStatesValidation, RejectsOffsetsBeyondInt64) {
  MergeStatesParams p = valid();
  p.o_b_batch_stride = std::numeric_limits<int64_t>::max() / 2;
  expect_invalid(p, {"o_b", "int64"});
}

TEST_F(MergeStatesValidation, RejectsMisalignedTensors) {
  MergeStatesParams p = valid();
  p.o_a = problem_.o_a.data() + 1;  // fp16 at an odd address
  expect_invalid(p, {"o_a", "2-byte aligned"});
  p = valid();
  p.o = problem_.o.data() + 1;
  expect_invalid(p, {"o", "2-byte aligned"});
  p = valid();
  p.lse_b = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(problem_.lse_b.data()) + 2);
  expect_invalid(p, {"lse_b", "4-byte aligned"});
  p = valid();
  p.lse = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(problem_.lse.data()) + 1);
  expect_invalid(p, {"lse", "4-byte aligned"});
}

TEST_F(MergeStatesValidation, RejectsOutputsThatOverlapThemselves) {
  MergeStatesParams p = valid();
  p.o_head_stride = 4;  // < head_dim 8
  expect_invalid(p, {"o_head_stride", "o would overlap itself"});
  p = valid();
  p.lse_head_stride = 1;  // < seqlen 3
  expect_invalid(p, {"lse_head_stride", "lse would overlap itself"});
}

TEST_F(MergeStatesValidation, RejectsOIntoOb) {
  MergeStatesParams p = valid();
  p.o = problem_.o_b.data();  // same layout as o_b: still only o_a may be aliased
  expect_invalid(p, {"o", "must not overlap o_b"});
}

TEST_F(MergeStatesValidation, RejectsOOverlappingOaOtherThanExactly) {
  MergeStatesParams p = valid();
  p.o = problem_.o_a.data() + 2 * 8;  // shifted by 8 fp16 elements
  expect_invalid(p, {"o", "o_a", "only exactly"});
  p = valid();
  p.o = problem_.o_a.data();  // same base, other strides (BHSD instead of BSHD)
  p.o_head_stride = int64_t(3) * 8, p.o_seq_stride = 8, p.o_batch_stride = int64_t(2) * 3 * 8;
  expect_invalid(p, {"o", "o_a", "only exactly"});
}

TEST_F(MergeStatesValidation, RejectsLseOverlappingAnythingButLseAExactly) {
  MergeStatesParams p = valid();
  p.lse = const_cast<float*>(p.lse_b);
  expect_invalid(p, {"lse", "must not overlap lse_b"});
  p = valid();
  p.lse = problem_.lse_a.data() + 1;
  expect_invalid(p, {"lse", "lse_a", "only exactly"});
  p = valid();
  p.lse = reinterpret_cast<float*>(problem_.o_a.data());
  expect_invalid(p, {"lse", "must not overlap o_a"});
  p = valid();
  p.o = const_cast<float*>(problem_.lse_a.data());  // o written over an lse input
  expect_invalid(p, {"o", "must not overlap lse_a"});
}

TEST_F(MergeStatesValidation, AcceptsInPlaceAliasing) {
  MergeStatesParams p = valid();
  p.o = problem_.o_a.data();
  p.lse = problem_.lse_a.data();
  EXPECT_TRUE(flashcore::merge_attention_states(p).ok());
}

// ---------------------------------------------------------------------------------------------
// C ABI
// ---------------------------------------------------------------------------------------------

TEST(MergeStatesCApi, InitSetsStructSizeAndDefaults) {
  fc_merge_states_params p;
  std::memset(&p, 0x5a, sizeof(p));
  ASSERT_EQ(fc_merge_states_params_init(&p), FC_STATUS_OK);
  EXPECT_EQ(p.struct_size, sizeof(fc_merge_states_params));
  EXPECT_EQ(p.dtype, FC_DTYPE_FLOAT16);
  EXPECT_EQ(p.o_a, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.batch, 0);
  EXPECT_EQ(p.lse_head_stride, 0);
  EXPECT_EQ(fc_merge_states_params_init(nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("params"), std::string::npos);
}

TEST(MergeStatesCApi, RejectsNullParamsAndAWrongStructSize) {
  EXPECT_EQ(fc_merge_attention_states(nullptr, nullptr), FC_STATUS_INVALID_ARGUMENT);
  fc_merge_states_params p;
  ASSERT_EQ(fc_merge_states_params_init(&p), FC_STATUS_OK);
  p.struct_size -= 8;
  EXPECT_EQ(fc_merge_attention_states(&p, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("struct_size"), std::string::npos);
}

TEST(MergeStatesCApi, MatchesTheCppApiAndReportsErrors) {
  Case c;
  c.dtype = DType::kBFloat16, c.layout_b = OLayout::kPadded, c.lse_padded = true;
  Problem cpp(c), cabi(c);
  ASSERT_TRUE(flashcore::merge_attention_states(cpp.params).ok());
  fc_merge_states_params p;
  ASSERT_EQ(fc_merge_states_params_init(&p), FC_STATUS_OK);
  const MergeStatesParams& q = cabi.params;
  p.o_a = q.o_a, p.lse_a = q.lse_a, p.o_b = q.o_b, p.lse_b = q.lse_b, p.o = q.o, p.lse = q.lse;
  p.batch = q.batch, p.seqlen = q.seqlen, p.heads = q.heads, p.head_dim = q.head_dim, p.dtype = FC_DTYPE_BFLOAT16;
  p.o_a_batch_stride = q.o_a_batch_stride, p.o_a_seq_stride = q.o_a_seq_stride, p.o_a_head_stride = q.o_a_head_stride;
  p.o_b_batch_stride = q.o_b_batch_stride, p.o_b_seq_stride = q.o_b_seq_stride, p.o_b_head_stride = q.o_b_head_stride;
  p.o_batch_stride = q.o_batch_stride, p.o_seq_stride = q.o_seq_stride, p.o_head_stride = q.o_head_stride;
  p.lse_a_batch_stride = q.lse_a_batch_stride, p.lse_a_head_stride = q.lse_a_head_stride;
  p.lse_b_batch_stride = q.lse_b_batch_stride, p.lse_b_head_stride = q.lse_b_head_stride;
  p.lse_batch_stride = q.lse_batch_stride, p.lse_head_stride = q.lse_head_stride;
  ASSERT_EQ(fc_merge_attention_states(&p, nullptr), FC_STATUS_OK);
  EXPECT_STREQ(fc_last_error_message(), "");
  EXPECT_EQ(cpp.o, cabi.o);
  EXPECT_EQ(0, std::memcmp(cpp.lse.data(), cabi.lse.data(), cpp.lse.size() * sizeof(float)));
  p.head_dim = 2000;
  EXPECT_EQ(fc_merge_attention_states(&p, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("head_dim"), std::string::npos);
}

}  // namespace
