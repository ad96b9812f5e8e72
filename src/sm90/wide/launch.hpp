// The sm90 wide forward (head dims above 256; kernel.cuh), as the sm90 path's launch.cu sees it.
// Built with FLASHCORE_BUILD_SM90_WIDE (default ON; FLASHCORE_HAS_SM90_WIDE).
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "flashcore/flashcore.hpp"

namespace flashcore::sm90::wide {

inline constexpr int kMinHeadDim = 257;  // calls with a head dim from here on are the wide kernels'

// Empty when a wide kernel of this build computes the call (the sm90 path's other rules, device,
// dtype, scale, strides, are checked by its supports()); otherwise why not.
std::string why_not(const AttentionParams& params);
Status run(const AttentionParams& params, cudaStream_t stream);

}  // namespace flashcore::sm90::wide
