// Device-side conversions between the storage dtypes (fp32, fp16, bf16) and fp32 math, for kernels
// that are templated on the element type (the naive reference, the softmax ladder).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/host_device.hpp"

namespace flashcore {

template <typename T> FC_DEVICE float to_float(T value);
template <> FC_DEVICE float to_float<float>(float value) { return value; }
template <> FC_DEVICE float to_float<__half>(__half value) { return __half2float(value); }
template <> FC_DEVICE float to_float<__nv_bfloat16>(__nv_bfloat16 value) { return __bfloat162float(value); }

// Round to nearest even.
template <typename T> FC_DEVICE T from_float(float value);
template <> FC_DEVICE float from_float<float>(float value) { return value; }
template <> FC_DEVICE __half from_float<__half>(float value) { return __float2half_rn(value); }
template <> FC_DEVICE __nv_bfloat16 from_float<__nv_bfloat16>(float value) { return __float2bfloat16_rn(value); }

}  // namespace flashcore
