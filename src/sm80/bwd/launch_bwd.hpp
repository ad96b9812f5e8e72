// Declaration of the per-instantiation launcher of the sm80 backward's main kernel, so launch.cu
// dispatches to the instantiation units (generated from cmake/KernelList.cmake) without compiling
// any of them itself.
#pragma once

#include <cuda_runtime_api.h>

#include "backward/workspace.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::sm80 {

using backward::BwdWorkspace;  // the fp32 workspace shared with the sm90 backward

// Runs the main kernel for one (Dqk, Dv, dtype); defined in kernel.cuh.
template <int kHeadDimQK, int kHeadDimV, typename Element>
Status launch_bwd(const BackwardParams& params, const BwdWorkspace& ws, bool compact, cudaStream_t stream);

}  // namespace flashcore::sm80
