// What the sm90 backward's main kernel reads besides BackwardParams, the workspace and its tensor
// maps, and the declaration of its per-instantiation launcher, so launch.cu dispatches to the
// instantiation units (generated from cmake/KernelList.cmake) without compiling any of them.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"
#include "backward/workspace.hpp"

namespace flashcore::sm90::bwd {

struct BwdKernelArgs {
  float scale_log2 = 1.0f;    // softmax scale * log2(e): P = exp2(dot * scale_log2 - lse2)
  float scale = 1.0f;         // applied to dK here and to dQ in the postprocess
  bool qk_per_chunk = false;  // q/k maps per 64-column chunk (sm90/common/tma.cuh, per_chunk_map)
  bool v_per_chunk = false;   // v/dout maps
  // dQ added in a fixed order: KV blocks run (and add to each query block) from the last down, each
  // waiting for its turn (the workspace's counters, backward/workspace.hpp).
  bool deterministic = false;
};

// The tensor maps of one call, in the kernel's parameter order.
// kMapQDqPass / kMapDoutDqPass: q and dout with the dQ pass's row boxes (encoded for dq_pass tiles only).
enum BwdMap { kMapQ = 0, kMapK, kMapV, kMapDout, kMapDqAccum, kMapLse2, kMapRowD, kMapQDqPass, kMapDoutDqPass, kBwdMaps };

// Runs the main kernel for one (Dqk, Dv, dtype); defined in kernel.cuh.
template <int kDqk, int kDv, typename Element>
Status launch_backward(const CUtensorMap* maps, const BackwardParams& bp, const backward::BwdWorkspace& ws,
                       const BwdKernelArgs& args, cudaStream_t stream);

}  // namespace flashcore::sm90::bwd
