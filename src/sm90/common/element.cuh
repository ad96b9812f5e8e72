// The 16-bit element types of the sm90 kernels: their wgmma operand type and how two fp32 values
// are rounded and packed into one 32-bit register (the lower column in the low half).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "ptx/wgmma.hpp"

namespace flashcore::sm90 {

template <typename Element> struct ElementTraits;
template <> struct ElementTraits<__half> {
  static constexpr ptx::WgmmaType kWgmma = ptx::WgmmaType::kHalf;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);  // lo -> low 16 bits (the lower column)
    return *reinterpret_cast<uint32_t*>(&h);
  }
};
template <> struct ElementTraits<__nv_bfloat16> {
  static constexpr ptx::WgmmaType kWgmma = ptx::WgmmaType::kBFloat16;
  static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&h);
  }
};

}  // namespace flashcore::sm90
