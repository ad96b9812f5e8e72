// The sm80 backward's entry in the backward dispatch table: supports() says exactly why a call
// cannot run here; run() runs the (Dqk, Dv, dtype) instantiation's main kernel inside the shared
// backward sequence (backward/run.cuh: workspace, preprocess, main kernel, postprocess).
#include <cstdint>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "backward/run.cuh"
#include "backward/workspace.hpp"
#include "common/cuda_check.hpp"
#include "sm80/bwd/launch_bwd.hpp"
#include "sm80/bwd/tile_config.hpp"

namespace flashcore::detail {

namespace {

using LaunchFn = Status (*)(const BackwardParams&, const backward::BwdWorkspace&, bool compact, cudaStream_t);
using Instantiation = BuiltKernel<LaunchFn>;

constexpr Instantiation kInstantiations[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&sm80::launch_bwd<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm80_bwd_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the table non-empty in pruned builds)
};

std::string sm80_backward_supports(const BackwardParams& bp, const DeviceInfo& d) {
  const AttentionParams& p = bp.forward;
  if (!d.has_device || d.pointers_on_host) return "the sm80 backward needs a CUDA device and device pointers";
  if (d.cc_major < 8) {
    return "the sm80 backward needs compute capability >= 8.0 (device is sm_" + std::to_string(d.cc_major) +
           std::to_string(d.cc_minor) + ")";
  }
  if (std::string why = missing_code_reason("sm80-path", d.cc_major, d.cc_minor); !why.empty()) return why;
  // The call's own (Dqk, Dv), or the covering pair it is padded to (api/built_kernels.hpp).
  const Instantiation* inst = find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (inst == nullptr) {
    return "head dims Dqk=" + std::to_string(p.head_dim_qk) + ", Dv=" + std::to_string(p.head_dim_v) + " in " +
           dtype_name(p.dtype) + " are not in this build of the sm80 backward (built: " +
           built_kernels_list(kInstantiations) + "; padded to a covering pair when both are multiples of " +
           std::to_string(kPaddedHeadDimMultiple) + ")";
  }
  // The table's tile, or its compact variant where the device allows less (common/smem_budget.hpp).
  const int elem_bytes = int(dtype_size(p.dtype));
  const int smem = sm80::bwd_smem_bytes(
      inst->head_dim_qk, inst->head_dim_v,
      sm80::bwd_tile_shape_for(inst->head_dim_qk, inst->head_dim_v, elem_bytes, (long long)d.max_smem_per_block_optin),
      elem_bytes);
  if (size_t(smem) > d.max_smem_per_block_optin) {
    return "the sm80 backward for Dqk=" + std::to_string(inst->head_dim_qk) + ", Dv=" + std::to_string(inst->head_dim_v) +
           " needs " + std::to_string(smem) + " bytes of shared memory per block; the device allows " +
           std::to_string(d.max_smem_per_block_optin);
  }
  // 16-byte vectors on every tensor: cp.async rows of q, k, v, dout; uint4 reads of o, dout in the
  // preprocess; uint4 dq stores; dk, dv are written in 4-byte pairs.
  if (std::string why = vector_alignment_problem(bp, 16); !why.empty()) return why;
  if (p.batch > 65535 || p.heads_q > 65535) return "the sm80 backward launches at most 65535 batch entries and heads";
  return "";
}

template <typename Element>
Status run_with_element(const BackwardParams& bp, const Instantiation& inst, bool compact, cudaStream_t stream) {
  return backward::run_backward<Element>(bp, backward::DqLayout{inst.head_dim_qk}, "sm80", stream, [&](const backward::BwdWorkspace& ws) {
    return inst.launch(bp, ws, compact, stream);
  });
}

Status sm80_backward_run(const BackwardParams& bp, const DeviceInfo& d, cudaStream_t stream) {
  const AttentionParams& p = bp.forward;
  const Instantiation* inst = find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (inst == nullptr) return Status::Unsupported("sm80 backward: no instantiation for this call");
  const bool compact = sm80::uses_compact_bwd_tile(inst->head_dim_qk, inst->head_dim_v, int(dtype_size(p.dtype)),
                                                   (long long)d.max_smem_per_block_optin);
  if (p.dtype == DType::kBFloat16) return run_with_element<__nv_bfloat16>(bp, *inst, compact, stream);
  return run_with_element<__half>(bp, *inst, compact, stream);
}

}  // namespace

BackwardOps sm80_backward_path() { return {KernelPath::kSm80, &sm80_backward_supports, &sm80_backward_run}; }

}  // namespace flashcore::detail
