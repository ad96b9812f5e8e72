// Declaration of the per-instantiation launcher, so launch.cu dispatches to the instantiation units
// (generated from cmake/KernelList.cmake) without compiling any kernel itself.
#pragma once

#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"

namespace flashcore::sm80 {

// Runs the sm80 forward kernel for one (Dqk, Dv, dtype); defined in kernel.cuh.
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_fwd(const AttentionParams& params, bool compact, cudaStream_t stream);

}  // namespace flashcore::sm80
