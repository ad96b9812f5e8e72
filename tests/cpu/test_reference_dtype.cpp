// The host fp16/bf16 conversions of src/common/dtype.hpp, which the CPU reference and every test
// use to read and write 16-bit tensors: exhaustive round trips, round-to-nearest-even ties,
// subnormals, overflow, inf and NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "common/dtype.hpp"

namespace flashcore {
namespace {

bool is_nan_fp16(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_nan_bf16(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x7fu) != 0; }

TEST(Dtype, Fp16EveryBitPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = uint16_t(bits);
    const float f = fp16_to_float(h);
    if (is_nan_fp16(h)) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_TRUE(is_nan_fp16(float_to_fp16(f))) << bits;
    } else {
      ASSERT_EQ(float_to_fp16(f), h) << "fp16 bits 0x" << std::hex << bits << " -> " << f;
    }
  }
}

TEST(Dtype, Bf16EveryBitPatternRoundTripsThroughFloat) {
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    const uint16_t h = uint16_t(bits);
    const float f = bf16_to_float(h);
    if (is_nan_bf16(h)) {
      EXPECT_TRUE(std::isnan(f)) << bits;
      EXPECT_TRUE(is_nan_bf16(float_to_bf16(f))) << bits;
    } else {
      ASSERT_EQ(float_to_bf16(f), h) << "bf16 bits 0x" << std::hex << bits;
    }
  }
}

TEST(Dtype, Fp16DecodesKnownValues) {
  EXPECT_EQ(fp16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(fp16_to_float(0xc000), -2.0f);
  EXPECT_EQ(fp16_to_float(0x7bff), 65504.0f);                   // largest finite
  EXPECT_EQ(fp16_to_float(0x0400), std::ldexp(1.0f, -14));      // smallest normal
  EXPECT_EQ(fp16_to_float(0x0001), std::ldexp(1.0f, -24));      // smallest subnormal
  EXPECT_EQ(fp16_to_float(0x03ff), std::ldexp(1023.0f, -24));   // largest subnormal
  EXPECT_EQ(fp16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_float(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(fp16_to_float(0x8000)));
}

// Every float halfway between two adjacent fp16 values rounds to the one with an even mantissa;
// a float just above / below the midpoint rounds up / down.
TEST(Dtype, Fp16RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t bits = 0; bits < 0x7bffu; ++bits) {  // positive finite, pairs (bits, bits + 1)
    const float lo = fp16_to_float(uint16_t(bits)), hi = fp16_to_float(uint16_t(bits + 1));
    const float mid = float((double(lo) + double(hi)) / 2);  // exact: float has spare bits
    const uint16_t even = (bits & 1u) == 0 ? uint16_t(bits) : uint16_t(bits + 1);
    ASSERT_EQ(float_to_fp16(mid), even) << "midpoint after 0x" << std::hex << bits;
    ASSERT_EQ(float_to_fp16(std::nextafter(mid, 0.0f)), uint16_t(bits)) << std::hex << bits;
    ASSERT_EQ(float_to_fp16(std::nextafter(mid, INFINITY)), uint16_t(bits + 1)) << std::hex << bits;
    ASSERT_EQ(float_to_fp16(-mid), uint16_t(0x8000u | even)) << std::hex << bits;
  }
}

TEST(Dtype, Bf16RoundsToNearestEvenAtEveryMidpoint) {
  for (uint32_t bits = 0; bits < 0x7f7fu; ++bits) {
    const uint32_t lo_bits = bits << 16;
    const float mid = bits_to_float(lo_bits | 0x8000u);  // exactly halfway to the next bf16
    const uint16_t even = (bits & 1u) == 0 ? uint16_t(bits) : uint16_t(bits + 1);
    ASSERT_EQ(float_to_bf16(mid), even) << std::hex << bits;
    ASSERT_EQ(float_to_bf16(bits_to_float(lo_bits | 0x7fffu)), uint16_t(bits)) << std::hex << bits;
    ASSERT_EQ(float_to_bf16(bits_to_float(lo_bits | 0x8001u)), uint16_t(bits + 1)) << std::hex << bits;
  }
}

TEST(Dtype, Fp16OverflowRoundsToInfAtTheMidpointAboveMax) {
  EXPECT_EQ(float_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_fp16(65519.99f), 0x7bff);  // below the midpoint to 65536
  EXPECT_EQ(float_to_fp16(65520.0f), 0x7c00);   // the midpoint ties to even: inf
  EXPECT_EQ(float_to_fp16(1e10f), 0x7c00);
  EXPECT_EQ(float_to_fp16(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(float_to_fp16(-std::numeric_limits<float>::infinity()), 0xfc00);
}

TEST(Dtype, Bf16OverflowAndInfinity) {
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(float_to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
}

TEST(Dtype, Fp16SubnormalsAndUnderflow) {
  const float tiny = std::ldexp(1.0f, -24);
  EXPECT_EQ(float_to_fp16(tiny), 0x0001);
  EXPECT_EQ(float_to_fp16(tiny / 2), 0x0000);            // tie between 0 and 2^-24: even is 0
  EXPECT_EQ(float_to_fp16(tiny * 1.5f), 0x0002);         // tie between 1 and 2 units: even is 2
  EXPECT_EQ(float_to_fp16(std::nextafter(tiny / 2, 1.0f)), 0x0001);
  EXPECT_EQ(float_to_fp16(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(float_to_fp16(-std::ldexp(1.0f, -30)), 0x8000);  // the sign survives underflow
  // The largest subnormal rounds up into the smallest normal.
  EXPECT_EQ(float_to_fp16(std::ldexp(1023.75f, -24)), 0x0400);
  EXPECT_EQ(float_to_fp16(std::numeric_limits<float>::denorm_min()), 0x0000);
}

TEST(Dtype, Bf16KeepsFloatSubnormalsAndSignedZero) {
  const float sub = bits_to_float(0x00010000u);
  EXPECT_EQ(float_to_bf16(sub), 0x0001);
  EXPECT_EQ(bf16_to_float(0x0001), sub);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
}

TEST(Dtype, NanStaysNanInBothFormats) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(is_nan_fp16(float_to_fp16(qnan)));
  EXPECT_TRUE(is_nan_bf16(float_to_bf16(qnan)));
  // A signalling NaN whose payload sits in the low 16 bits must not truncate to inf.
  const float low_payload_nan = bits_to_float(0x7f800001u);
  EXPECT_TRUE(is_nan_fp16(float_to_fp16(low_payload_nan)));
  EXPECT_TRUE(is_nan_bf16(float_to_bf16(low_payload_nan)));
  EXPECT_TRUE(std::isnan(fp16_to_float(0xFFFF)));  // the poison pattern is NaN in fp16 ...
  EXPECT_TRUE(std::isnan(bf16_to_float(0xFFFF)));  // ... and in bf16
}

TEST(Dtype, LoadAndStoreDispatchOnTheDtype) {
  uint16_t half_buffer[2] = {};
  float float_buffer[2] = {};
  store_from_float(half_buffer, 1, 1.5f, DType::kFloat16);
  EXPECT_EQ(half_buffer[1], 0x3e00);
  EXPECT_EQ(load_as_float(half_buffer, 1, DType::kFloat16), 1.5f);
  store_from_float(half_buffer, 0, 1.5f, DType::kBFloat16);
  EXPECT_EQ(half_buffer[0], 0x3fc0);
  EXPECT_EQ(load_as_float(half_buffer, 0, DType::kBFloat16), 1.5f);
  store_from_float(float_buffer, 1, 0.1f, DType::kFloat32);
  EXPECT_EQ(load_as_float(float_buffer, 1, DType::kFloat32), 0.1f);
}

}  // namespace
}  // namespace flashcore
