// The sm80 path's entry in the dispatch table: supports() says exactly why a call cannot run here
// (device, head dims and dtype of this build, architecture, alignment, shared memory), run() picks
// the instantiation for (Dqk, Dv, dtype): fp16/bf16 on mma.m16n8k16, fp32 on 3xTF32 mma.m16n8k8.
#include <cstdint>
#include <cstring>
#include <string>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "sm80/fwd/launch_fwd.hpp"
#include "sm80/fwd/tile_config.hpp"

namespace flashcore::detail {

namespace {

using LaunchFn = Status (*)(const AttentionParams&, cudaStream_t);

using Instantiation = BuiltKernel<LaunchFn>;

// What this build compiled, from the kernel list (cmake/KernelList.cmake). fp32 (3xTF32, see
// common/gemm.cuh) has the equal pairs up to 128 and the half-V pairs 192/96 and 256/128, which
// also serve fp32 d192 / d256 (see plan_for below).
constexpr Instantiation kInstantiations[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&sm80::launch_fwd<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm80_fwd_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the table non-empty in pruned builds)
};

// The kernel that runs a call: its own (Dqk, Dv) instantiation or the covering one it is padded to,
// or for fp32 with Dv > 128 (a multiple of 16) the one covering (Dqk, Dv/2), launched once per half
// of V and O. No single fp32 kernel fits there (one m16 tile
// per warp holds 128 fp32 O accumulators and every tile shape spills, see tile_config.hpp); each
// half launch recomputes the same scores and softmax, so every output element is exactly what one
// kernel would compute, at twice the Q K^T work.
struct Plan {
  const Instantiation* inst = nullptr;
  bool split_v = false;  // launch inst twice: V[..., :Dv/2] -> O[..., :Dv/2], then the upper halves
};

Plan plan_for(const AttentionParams& p) {
  // The call's own pair, or the covering one it is padded to (api/built_kernels.hpp, covers).
  if (const Instantiation* inst = find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype)) {
    return {inst, false};
  }
  if (p.dtype == DType::kFloat32 && p.head_dim_v > 128 && p.head_dim_v % 16 == 0) {
    if (const Instantiation* half = find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v / 2, p.dtype)) {
      return {half, true};
    }
  }
  return {};
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
           std::to_string(kPaddedHeadDimMultiple) + "; fp32 Dv > 128 runs as two Dv/2 launches" +
           ")";
  }
  const int smem = sm80::smem_bytes(plan.inst->head_dim_qk, plan.inst->head_dim_v, dtype_size(p.dtype));
  if (size_t(smem) > d.max_smem_per_block_optin) {
    return "the sm80 kernel for Dqk=" + std::to_string(plan.inst->head_dim_qk) +
           ", Dv=" + std::to_string(plan.inst->head_dim_v) +
           " needs " + std::to_string(smem) + " bytes of shared memory per block; the device allows " +
           std::to_string(d.max_smem_per_block_optin);
  }
  // 16-byte vector loads/stores: every row start must be 16-byte aligned. (The upper half views of
  // a split launch start Dv/2 fp32, a multiple of 8 floats, further: aligned too.)
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

Status sm80_run(const AttentionParams& p, const DeviceInfo&, cudaStream_t stream) {
  const Plan plan = plan_for(p);
  if (plan.inst == nullptr) return Status::Unsupported("sm80: no instantiation for this call");
  if (!plan.split_v) return plan.inst->launch(p, stream);
  // Same strides, base pointers of V and O offset by Dv/2 elements for the upper half; LSE (the same
  // in both launches) is written by the first one only.
  const int half = p.head_dim_v / 2;
  AttentionParams lo = p;
  lo.head_dim_v = half;
  AttentionParams hi = lo;
  hi.v = static_cast<const float*>(p.v) + half;
  hi.o = static_cast<float*>(p.o) + half;
  hi.lse = nullptr;
  const Status first = plan.inst->launch(lo, stream);
  return first.ok() ? plan.inst->launch(hi, stream) : first;
}

}  // namespace

PathOps sm80_path() { return {KernelPath::kSm80, &sm80_supports, &sm80_run}; }

}  // namespace flashcore::detail
