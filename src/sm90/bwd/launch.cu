// The sm90 backward's entry in the backward dispatch table: supports() says exactly why a call
// cannot run here (it then runs on the sm80 backward); run() builds the tensor maps and runs the
// (Dqk, Dv, dtype) instantiation's main kernel inside the shared backward sequence
// (backward/run.cuh: workspace, preprocess, main kernel, postprocess).
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "api/built_kernels.hpp"
#include "api/paths.hpp"
#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "backward/run.cuh"
#include "backward/workspace.hpp"
#include "common/cuda_check.hpp"
#include "sm90/bwd/params.hpp"
#include "sm90/bwd/tile_config.hpp"
#include "sm90/common/tma.cuh"

namespace flashcore {
namespace sm90::bwd {

namespace {

using LaunchFn = Status (*)(const CUtensorMap*, const BackwardParams&, const backward::BwdWorkspace&, const BwdKernelArgs&,
                            cudaStream_t);
using Instantiation = detail::BuiltKernel<LaunchFn>;

constexpr Instantiation kInstantiations[] = {
#define FLASHCORE_KERNEL(DQK, DV, DTYPE, ELEMENT, BUILT) \
  FLASHCORE_BUILT_ENTRY(BUILT, (&launch_backward<DQK, DV, ELEMENT>), DQK, DV, DTYPE)
#include "kernels/sm90_bwd_kernels.inc"
#undef FLASHCORE_KERNEL
    {0, 0, DType::kFloat32, nullptr},  // end marker (keeps the table non-empty in pruned builds)
};

// The TMA views of q, k, v, dout: dense [batch][seq], or packed tokens (varlen: total_q / total_k
// rows, one batch entry) for q/dout when cu_seqlens_q and for k/v when cu_seqlens_k is given.
struct OperandViews {
  OperandView q, k, v, dout;
};
OperandViews operand_views(const BackwardParams& bp) {
  const AttentionParams& p = bp.forward;
  const bool packed_q = p.is_varlen(), packed_k = p.cu_seqlens_k != nullptr;
  const int rows_q = packed_q ? int(p.total_q) : p.seqlen_q, batch_q = packed_q ? 1 : p.batch;
  const int rows_k = packed_k ? int(p.total_k) : p.seqlen_k, batch_k = packed_k ? 1 : p.batch;
  OperandViews v;
  v.q = {p.q, p.head_dim_qk, rows_q, p.heads_q, batch_q, p.q_seq_stride, p.q_head_stride, p.q_batch_stride};
  v.k = {p.k, p.head_dim_qk, rows_k, p.heads_kv, batch_k, p.k_seq_stride, p.k_head_stride, p.k_batch_stride};
  v.v = {p.v, p.head_dim_v, rows_k, p.heads_kv, batch_k, p.v_seq_stride, p.v_head_stride, p.v_batch_stride};
  v.dout = {bp.dout, p.head_dim_v, rows_q, p.heads_q, batch_q, bp.dout_seq_stride, bp.dout_head_stride,
            bp.dout_batch_stride};
  return v;
}

std::string sm90_backward_supports(const BackwardParams& bp, const detail::DeviceInfo& d) {
  const AttentionParams& p = bp.forward;
  if (!d.has_device || d.pointers_on_host) return "the sm90 backward needs a CUDA device and device pointers";
  if (d.cc_major != 9 || d.cc_minor != 0) {
    return "the sm90 backward needs compute capability 9.0 (sm_90a); device is " + std::to_string(d.cc_major) + "." +
           std::to_string(d.cc_minor);
  }
  if (p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16) {
    return std::string("dtype ") + dtype_name(p.dtype) + " is not supported by the sm90 backward (fp16, bf16)";
  }
  if (attn::uses_kv_cache_layout(p)) return "the sm90 backward reads dense or varlen K/V only";
  const Instantiation* inst = detail::find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (inst == nullptr) {
    return "head dims Dqk=" + std::to_string(p.head_dim_qk) + ", Dv=" + std::to_string(p.head_dim_v) + " in " +
           dtype_name(p.dtype) + " are not in this build of the sm90 backward (built: " +
           detail::built_kernels_list(kInstantiations) + "; padded to a covering pair when both are multiples of " +
           std::to_string(detail::kPaddedHeadDimMultiple) + ")";
  }
  const bool dq_pass = bwd_tile(inst->head_dim_qk, inst->head_dim_v).dq_pass();
  const size_t smem = std::max(bwd_smem_bytes(inst->head_dim_qk, inst->head_dim_v),
                               dq_pass ? dq_pass_smem_bytes(inst->head_dim_qk, inst->head_dim_v) : size_t(0));
  if (smem > d.max_smem_per_block_optin) {
    return "the sm90 backward for Dqk=" + std::to_string(inst->head_dim_qk) + ", Dv=" + std::to_string(inst->head_dim_v) +
           " needs " + std::to_string(smem) + " bytes of shared memory per block; the device allows " +
           std::to_string(d.max_smem_per_block_optin);
  }
  if (p.batch > 65535 || p.heads_kv > 65535) return "the sm90 backward launches at most 65535 batch entries and KV heads";
  // TMA addresses the workspace's rows (every query head's padded tokens) with a 32-bit coordinate.
  backward::BwdWorkspaceBytes bytes;
  const backward::BwdWorkspace ws = backward::bwd_workspace_layout(p, inst->head_dim_qk, nullptr, &bytes);
  if (int64_t(p.heads_q) * ws.rows_per_head >= (int64_t(1) << 31)) {
    return "the sm90 backward addresses at most 2^31 workspace rows (query heads x padded tokens)";
  }
  // TMA loads of q, k, v, dout; 16-byte vectors in the shared preprocess (o, dout) and postprocess (dq);
  // dk, dv are written in 4-byte pairs.
  const OperandViews views = operand_views(bp);
  std::string why = operand_view_problem("q", views.q);
  if (why.empty()) why = operand_view_problem("k", views.k);
  if (why.empty()) why = operand_view_problem("v", views.v);
  if (why.empty()) why = operand_view_problem("dout", views.dout);
  if (why.empty()) why = detail::vector_alignment_problem(bp, 16);
  return why;
}

template <typename Element>
Status run_with_element(const BackwardParams& bp, const Instantiation& inst, cudaStream_t stream) {
  const AttentionParams& p = bp.forward;
  const BwdTile tile = bwd_tile(inst.head_dim_qk, inst.head_dim_v);
  CUtensorMap maps[kBwdMaps];
  const OperandViews views = operand_views(bp);
  FC_RETURN_IF_ERROR(encode_operand_map(&maps[kMapQ], views.q, p.dtype, inst.head_dim_qk, tile.block_m));
  FC_RETURN_IF_ERROR(encode_operand_map(&maps[kMapK], views.k, p.dtype, inst.head_dim_qk, tile.block_n()));
  FC_RETURN_IF_ERROR(encode_operand_map(&maps[kMapV], views.v, p.dtype, inst.head_dim_v, tile.block_n()));
  FC_RETURN_IF_ERROR(encode_operand_map(&maps[kMapDout], views.dout, p.dtype, inst.head_dim_v, tile.block_m));
  if (tile.dq_pass()) {
    FC_RETURN_IF_ERROR(encode_operand_map(&maps[kMapQDqPass], views.q, p.dtype, inst.head_dim_qk, kDqPassTile.block_m));
    FC_RETURN_IF_ERROR(
        encode_operand_map(&maps[kMapDoutDqPass], views.dout, p.dtype, inst.head_dim_v, kDqPassTile.block_m));
  }
  BwdKernelArgs args;
  args.scale = attn::softmax_scale(p);
  args.scale_log2 = args.scale * attn::kLog2e;
  args.qk_per_chunk = per_chunk_map(p.head_dim_qk, inst.head_dim_qk);
  args.v_per_chunk = per_chunk_map(p.head_dim_v, inst.head_dim_v);
  args.deterministic = bp.deterministic;

  // The dQ accumulator's layout: fragment-ordered blocks of the padded 128 columns (dq_transposed),
  // or rows of the kernel's Dqk.
  const backward::DqLayout dq_layout = tile.dq_transposed()
                                           ? backward::DqLayout{backward::kDqTileCols, tile.block_m}
                                           : backward::DqLayout{inst.head_dim_qk, 0};
  return backward::run_backward<Element>(bp, dq_layout, "sm90", stream, [&](const backward::BwdWorkspace& ws) {
    // The workspace as TMA views: dQ accumulator rows, lse2 and D (their rows are the same).
    const int64_t ws_rows = int64_t(p.heads_q) * ws.rows_per_head;
    if (!tile.dq_pass() && !tile.dq_transposed()) {  // the dQ pass writes dq itself; fragment blocks go by bulk adds
      FC_RETURN_IF_ERROR(encode_fp32_matrix_map(&maps[kMapDqAccum], ws.dq_accum, inst.head_dim_qk, ws_rows, tile.block_m));
    } else {
      maps[kMapDqAccum] = CUtensorMap{};
    }
    FC_RETURN_IF_ERROR(encode_fp32_vector_map(&maps[kMapLse2], ws.lse2, ws_rows, tile.block_m));
    FC_RETURN_IF_ERROR(encode_fp32_vector_map(&maps[kMapRowD], ws.row_d, ws_rows, tile.block_m));
    return inst.launch(maps, bp, ws, args, stream);
  }, tile.dq_pass() ? backward::DqOutput::kWrittenByMain : backward::DqOutput::kAccumulated);
}

Status sm90_backward_run(const BackwardParams& bp, const detail::DeviceInfo&, cudaStream_t stream) {
  const AttentionParams& p = bp.forward;
  const Instantiation* inst = detail::find_covering_kernel(kInstantiations, p.head_dim_qk, p.head_dim_v, p.dtype);
  if (inst == nullptr) return Status::Unsupported("sm90 backward: no instantiation for this call");
  if (p.dtype == DType::kBFloat16) return run_with_element<__nv_bfloat16>(bp, *inst, stream);
  return run_with_element<__half>(bp, *inst, stream);
}

}  // namespace

}  // namespace sm90::bwd

namespace detail {
BackwardOps sm90_backward_path() {
  return {KernelPath::kSm90, &sm90::bwd::sm90_backward_supports, &sm90::bwd::sm90_backward_run};
}
}  // namespace detail

}  // namespace flashcore
