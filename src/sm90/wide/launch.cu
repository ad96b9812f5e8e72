// Host side of the sm90 wide forward: which calls it takes, tensor maps, parameters, launch.
#include "sm90/wide/launch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "attention/mask.hpp"
#include "attention/score_transform.hpp"
#include "common/cuda_check.hpp"
#include "sm90/common/tma.cuh"
#include "sm90/wide/kernel.cuh"

namespace flashcore::sm90::wide {

namespace {

template <int kD, typename Element>
Status launch(const AttentionParams& p, cudaStream_t stream) {
  using Traits = WideTraits<kD, Element>;
  // Per-chunk boxes of a 5-D map: {64 columns, 64 rows, chunk c, head, batch}.
  const OperandView q{p.q, kD, p.seqlen_q, p.heads_q, p.batch, p.q_seq_stride, p.q_head_stride, p.q_batch_stride};
  const OperandView k{p.k, kD, p.seqlen_k, p.heads_kv, p.batch, p.k_seq_stride, p.k_head_stride, p.k_batch_stride};
  const OperandView v{p.v, kD, p.seqlen_k, p.heads_kv, p.batch, p.v_seq_stride, p.v_head_stride, p.v_batch_stride};
  CUtensorMap tm_q, tm_k, tm_v;
  FC_RETURN_IF_ERROR(encode_operand_map(&tm_q, q, p.dtype, kD, 64, 1));
  if (p.k != nullptr && p.v != nullptr) {
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_k, k, p.dtype, kD, 64, 1));
    FC_RETURN_IF_ERROR(encode_operand_map(&tm_v, v, p.dtype, kD, 64, 1));
  } else {
    tm_k = tm_v = tm_q;  // no keys (k/v may be null): never loaded, every query block's KV range is empty
  }
  WideParams w;
  w.o = p.o;
  w.lse = p.lse;
  w.o_batch_stride = p.o_batch_stride, w.o_seq_stride = p.o_seq_stride, w.o_head_stride = p.o_head_stride;
  w.lse_batch_stride = p.lse_batch_stride, w.lse_head_stride = p.lse_head_stride;
  w.seqlen_q = p.seqlen_q, w.seqlen_k = p.seqlen_k, w.heads_per_kv = p.heads_q / p.heads_kv;
  w.mask = attn::make_mask(p, p.seqlen_q, p.seqlen_k);
  const attn::ScoreTransform transform = attn::make_score_transform(p, 0, 0, p.seqlen_q, p.seqlen_k);
  w.scale_log2 = transform.scale * attn::kLog2e;
  w.has_softcap = transform.softcap > 0.0f;
  w.softcap = transform.dot_softcap();
  auto kernel = &wide_forward_kernel<Traits>;
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Traits::kSmemBytes)));
  const dim3 grid(unsigned((p.seqlen_q + 63) / 64), unsigned(p.heads_q), unsigned(p.batch));
  kernel<<<grid, Traits::kThreads, Traits::kSmemBytes, stream>>>(tm_q, tm_k, tm_v, w);
  return cuda_status(cudaGetLastError(), "sm90 wide_forward_kernel");
}

}  // namespace

std::string why_not(const AttentionParams& p) {
  if (p.head_dim_qk != 512 || p.head_dim_v != 512) {
    return "head dims " + std::to_string(p.head_dim_qk) + "/" + std::to_string(p.head_dim_v) +
           " are not supported by the sm90 wide kernels (this build: 512/512)";
  }
  if (p.is_varlen() || p.seqused_k != nullptr) return "the sm90 wide kernels run dense calls only (no varlen, no seqused_k)";
  return "";
}

Status run(const AttentionParams& p, cudaStream_t stream) {
  if (const std::string why = why_not(p); !why.empty()) return Status::Unsupported(why);
  if (p.dtype == DType::kBFloat16) return launch<512, __nv_bfloat16>(p, stream);
  return launch<512, __half>(p, stream);
}

}  // namespace flashcore::sm90::wide
