// Host-side conversions between fp16/bf16 bit patterns and float (round to nearest even), so the
// CPU reference and the tests need no CUDA headers to read and write 16-bit tensors.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "flashcore/flashcore.hpp"

namespace flashcore {

inline float bits_to_float(uint32_t bits) { float f; std::memcpy(&f, &bits, 4); return f; }
inline uint32_t float_to_bits(float f) { uint32_t b; std::memcpy(&b, &f, 4); return b; }

inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t b = float_to_bits(f);
  if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);  // quiet NaN
  b += 0x7fffu + ((b >> 16) & 1u);                                          // round to nearest even
  return uint16_t(b >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    const float v = std::ldexp(float(mant), -24);
    return sign ? -v : v;
  }
  if (exp == 0x1f) return bits_to_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return bits_to_float(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t b = float_to_bits(f);
  const uint16_t sign = uint16_t((b >> 16) & 0x8000u);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;               // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;              // rounds to >= 65520: inf
  if (abs < 0x38800000u) {                                    // below 2^-14: subnormal or zero
    const float a = bits_to_float(abs);
    const float scaled = a * 16777216.0f;                     // units of 2^-24
    const uint32_t m = uint32_t(std::nearbyint(scaled));      // round to nearest even
    return sign | uint16_t(m);
  }
  uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);       // round mantissa to 10 bits, RNE
  return sign | uint16_t(((rounded >> 13) - (112u << 10)) & 0x7fffu);
}

// Reads element `index` of a tensor of `dtype` as float.
inline float load_as_float(const void* base, int64_t index, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(base)[index]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(base)[index]);
    case DType::kFloat32: return static_cast<const float*>(base)[index];
  }
  return NAN;
}

// Writes `value` rounded to `dtype` at element `index`.
inline void store_from_float(void* base, int64_t index, float value, DType dtype) {
  switch (dtype) {
    case DType::kFloat16: static_cast<uint16_t*>(base)[index] = float_to_fp16(value); return;
    case DType::kBFloat16: static_cast<uint16_t*>(base)[index] = float_to_bf16(value); return;
    case DType::kFloat32: static_cast<float*>(base)[index] = value; return;
  }
}

}  // namespace flashcore
