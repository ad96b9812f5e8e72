// Names of enums, the effective softmax scale, dense strides and build facts.
#include <cmath>
#include <sstream>

#include "attention/score_transform.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kCudaError: return "CUDA error";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown";
}

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat32: return "fp32";
  }
  return "unknown";
}

int dtype_size(DType dtype) { return dtype == DType::kFloat32 ? 4 : 2; }

const char* kernel_path_name(KernelPath path) {
  switch (path) {
    case KernelPath::kAuto: return "auto";
    case KernelPath::kSm90: return "sm90";
    case KernelPath::kSm80: return "sm80";
    case KernelPath::kNaiveGpu: return "naive-gpu";
    case KernelPath::kCpuReference: return "cpu-reference";
    case KernelPath::kDecode: return "decode";
  }
  return "unknown";
}

float AttentionParams::effective_scale() const {
  return attn::softmax_scale(*this);
}

void set_grad_strides_like_forward(BackwardParams& bp) {
  const AttentionParams& f = bp.forward;
  bp.dout_batch_stride = f.o_batch_stride, bp.dout_seq_stride = f.o_seq_stride, bp.dout_head_stride = f.o_head_stride;
  bp.dq_batch_stride = f.q_batch_stride, bp.dq_seq_stride = f.q_seq_stride, bp.dq_head_stride = f.q_head_stride;
  bp.dk_batch_stride = f.k_batch_stride, bp.dk_seq_stride = f.k_seq_stride, bp.dk_head_stride = f.k_head_stride;
  bp.dv_batch_stride = f.v_batch_stride, bp.dv_seq_stride = f.v_seq_stride, bp.dv_head_stride = f.v_head_stride;
}

void set_dense_strides(AttentionParams& p) {
  const int64_t sq = p.is_varlen() ? 0 : p.seqlen_q;
  const int64_t sk = p.is_varlen() ? 0 : p.seqlen_k;
  p.q_head_stride = p.head_dim_qk;
  p.q_seq_stride = int64_t(p.heads_q) * p.head_dim_qk;
  p.q_batch_stride = sq * p.q_seq_stride;
  p.k_head_stride = p.head_dim_qk;
  p.k_seq_stride = int64_t(p.heads_kv) * p.head_dim_qk;
  p.k_batch_stride = sk * p.k_seq_stride;
  p.v_head_stride = p.head_dim_v;
  p.v_seq_stride = int64_t(p.heads_kv) * p.head_dim_v;
  p.v_batch_stride = sk * p.v_seq_stride;
  p.o_head_stride = p.head_dim_v;
  p.o_seq_stride = int64_t(p.heads_q) * p.head_dim_v;
  p.o_batch_stride = sq * p.o_seq_stride;
  if (p.is_varlen()) {  // lse [Hq, total_q]
    p.lse_head_stride = p.total_q;
    p.lse_batch_stride = 0;
  } else {              // lse [B, Hq, Sq]
    p.lse_head_stride = p.seqlen_q;
    p.lse_batch_stride = int64_t(p.heads_q) * p.seqlen_q;
  }
}

std::string build_info() {
  std::ostringstream os;
  os << "flashcore " << FLASHCORE_VERSION << " (archs " << FLASHCORE_ARCHS << "; head dims "
     << FLASHCORE_HEAD_DIMS_STR << "; dtypes " << FLASHCORE_DTYPES_STR << "; paths:"
#if defined(FLASHCORE_HAS_SM80)
     << " decode"
#endif
#if defined(FLASHCORE_HAS_SM90)
     << " sm90"
#endif
#if defined(FLASHCORE_HAS_SM80)
     << " sm80"
#endif
     << " naive-gpu cpu-reference)";
  return os.str();
}

}  // namespace flashcore
