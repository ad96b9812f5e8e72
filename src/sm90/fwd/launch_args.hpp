// What launch.cu hands an instantiation unit (no CUDA device code here, so launch.cu stays a plain
// host translation unit of the sm90 path).
#pragma once

#include <cuda.h>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"
#include "sm90/common/tma.cuh"
#include "sm90/fwd/params.hpp"
#include "sm90/fwd/plan.hpp"
#include "sm90/fwd/tile_config.hpp"

namespace flashcore::sm90 {


struct LaunchArgs {
  const AttentionParams* call = nullptr;  // the validated call
  ForwardKernel kernel;                   // choose_forward_kernel's pick
  ForwardOverrides overrides;             // the call's, or the defaults
  OperandView q, k, v, o;
  DType dtype = DType::kFloat16;
  KernelParams params;  // the tile-independent fields; the launcher adds the plan's
  int sm_count = 1;
};

// One per built (Dqk, Dv, dtype) instantiation unit: runs args.kernel (launch_kernel.cuh).
template <int kDqk, int kDv, typename Element>
Status launch_forward(const LaunchArgs& args, cudaStream_t stream);

}  // namespace flashcore::sm90
