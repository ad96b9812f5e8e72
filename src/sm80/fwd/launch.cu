// The sm80 path's entry in the dispatch table: supports() says exactly why a call cannot run here
// (device, head dims and dtype of this build, architecture, alignment, shared memory), run() picks
// the instantiation for (Dqk, Dv, dtype): fp16/bf16 on mma.m16n8k16, fp32 on 3xTF32 mma.m16n8k8.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "sm80/fwd/launch_fwd.hpp"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore::detail {

namespace {

using LaunchFn = Status (*)(const AttentionParams&, bool compact, cudaStream_t);

using Instantiation = BuiltKernel<LaunchFn>;

// What this build compiled, from the kernel list (cmake/KernelList.cmake). fp32 (3xTF32, see
// common/gemm.cuh) has the equal pairs up to 128 and the half-V pairs 192/96 and 256/128; 16-bit
// head dims above 256 have 512/256, 576/256 and 1024/256. The half-V pairs and the wide ones run
// calls in parts of Dv (see plan_for below).
constexpr Instantiation kInstantiations[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&sm80::launch_fwd<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm80_fwd_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the table non-empty in pruned builds)
};

// The kernel that runs a call: its own (Dqk, Dv) instantiation or the covering one it is padded to;
// else a kernel with Dqk >= the call's, launched once per part of Dv (api/built_kernels.hpp,
// find_dv_parts_kernel). Parts are how fp32 d192 / d256 run (one m16 tile per warp holds 128 fp32 O
// accumulators there and every fp32 tile shape spills, see tile_config.hpp) and how 16-bit head dims
// above 256 run (the tile's O is 256 columns). Each part recomputes the same scores and softmax, so
// every output element is exactly what one kernel would compute, at parts x the Q K^T work.
struct Plan {
  const Instantiation* inst = nullptr;
  int parts = 1;  // launches; part z reads V[..., z W:(z + 1) W] and writes O's same columns (W: inst's Dv)
};

Plan plan_for(const AttentionParams& p) {
  if (const Instantiation* inst = find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype)) {
    return {inst, 1};
  }
  Plan plan;
  plan.inst = find_dv_parts_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype, &plan.parts);
  return plan;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

std::string sm80_supports(const AttentionParams& p, const DeviceInfo& d) {
  if (attn::uses_kv_cache_layout(p)) {
    return "the sm80 path reads dense or varlen K/V only (block_table, kv_batch_idx, leftpad_k: the decode path)";
  }
  if (!d.has_device || d.pointers_on_host) return "the sm80 path needs a CUDA device and device pointers";
  if (d.cc_major < 8) {
    return "the sm80 path needs compute capability >= 8.0 (device is sm_" + std::to_string(d.cc_major) +
           std::to_string(d.cc_minor) + ")";
  }
  if (std::string why = missing_code_reason("sm80-path", d.cc_major, d.cc_minor); !why.empty()) return why;
  const Plan plan = plan_for(p);
  if (plan.inst == nullptr) {
    return "head dims Dqk=" + std::to_string(p.head_dim_qk) + ", Dv=" + std::to_string(p.head_dim_v) + " in " +
           dtype_name(p.dtype) + " are not in this build of the sm80 path (built: " +
           built_kernels_list(kInstantiations) + "; padded to a covering pair when both are multiples of " +
           std::to_string(kPaddedHeadDimMultiple) + ", or in parts of Dv on a pair with Dqk >= the call's)";
  }
  // The table's tile, or its compact variant where the device allows less (common/smem_budget.hpp).
  const int elem_bytes = int(dtype_size(p.dtype));
  const int smem = sm80::smem_bytes(
      plan.inst->head_dim_qk, plan.inst->head_dim_v,
      sm80::tile_shape_for(plan.inst->head_dim_qk, plan.inst->head_dim_v, elem_bytes, (long long)d.max_smem_per_block_optin),
      elem_bytes);
  if (size_t(smem) > d.max_smem_per_block_optin) {
    return "the sm80 kernel for Dqk=" + std::to_string(plan.inst->head_dim_qk) +
           ", Dv=" + std::to_string(plan.inst->head_dim_v) +
           " needs " + std::to_string(smem) + " bytes of shared memory per block; the device allows " +
           std::to_string(d.max_smem_per_block_optin);
  }
  // 16-byte vector loads/stores: every row start must be 16-byte aligned. (The views of a Dv part
  // start a multiple of the kernel's Dv further: aligned too.)
  const struct {
    const char* name;
    const void* ptr;
    int64_t strides[3];
  } tensors[] = {
      {"q", p.q, {p.q_batch_stride, p.q_seq_stride, p.q_head_stride}},
      {"k", p.k, {p.k_batch_stride, p.k_seq_stride, p.k_head_stride}},
      {"v", p.v, {p.v_batch_stride, p.v_seq_stride, p.v_head_stride}},
      {"o", p.o, {p.o_batch_stride, p.o_seq_stride, p.o_head_stride}},
  };
  for (const auto& t : tensors) {
    bool ok = aligned16(t.ptr);
    for (int64_t s : t.strides) ok = ok && (s * dtype_size(p.dtype)) % 16 == 0;
    if (!ok) {
      return std::string(t.name) +
             ": the sm80 path needs a 16-byte aligned base and batch/seq/head strides that are multiples "
             "of 16 bytes (8 fp16/bf16 or 4 fp32 elements)";
    }
  }
  if (p.batch > 65535 || p.heads_q > 65535) return "the sm80 path launches at most 65535 batch entries and heads";
  return "";
}

Status sm80_run(const AttentionParams& p, const DeviceInfo& d, cudaStream_t stream) {
  const Plan plan = plan_for(p);
  if (plan.inst == nullptr) return Status::Unsupported("sm80: no instantiation for this call");
  const bool compact = sm80::uses_compact_tile(plan.inst->head_dim_qk, plan.inst->head_dim_v, int(dtype_size(p.dtype)),
                                               (long long)d.max_smem_per_block_optin);
  if (plan.parts == 1) return plan.inst->launch(p, compact, stream);
  // Same strides; V and O base pointers offset by z W elements for part z. LSE (the same in every
  // part) is written by the first one only.
  const int width = plan.inst->head_dim_v;
  const size_t elem = dtype_size(p.dtype);
  for (int z = 0; z < plan.parts; ++z) {
    AttentionParams part = p;
    part.head_dim_v = std::min(width, p.head_dim_v - z * width);
    part.v = p.v != nullptr ? static_cast<const char*>(p.v) + size_t(z) * width * elem : nullptr;  // null: no keys
    part.o = static_cast<char*>(p.o) + size_t(z) * width * elem;
    if (z > 0) part.lse = nullptr;
    FC_RETURN_IF_ERROR(plan.inst->launch(part, compact, stream));
  }
  return Status::Ok();
}

}  // namespace

PathOps sm80_path() { return {KernelPath::kSm80, &sm80_supports, &sm80_run}; }

}  // namespace flashcore::detail
