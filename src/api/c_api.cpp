// The C ABI (include/flashcore/flashcore.h) over the C++ API. Each entry point converts the C struct
// field by field, calls the C++ function, records the outcome in the thread's last-error message and
// returns the status code. Nothing throws across the boundary: every entry point catches everything.
#include "flashcore/flashcore.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "common/cuda_check.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

static_assert(FC_STATUS_OK == int(StatusCode::kOk));
static_assert(FC_STATUS_INVALID_ARGUMENT == int(StatusCode::kInvalidArgument));
static_assert(FC_STATUS_UNSUPPORTED == int(StatusCode::kUnsupported));
static_assert(FC_STATUS_CUDA_ERROR == int(StatusCode::kCudaError));
static_assert(FC_STATUS_INTERNAL == int(StatusCode::kInternal));
static_assert(FC_DTYPE_FLOAT16 == int(DType::kFloat16) && FC_DTYPE_BFLOAT16 == int(DType::kBFloat16) &&
              FC_DTYPE_FLOAT32 == int(DType::kFloat32));
static_assert(FC_MASK_ALIGN_BOTTOM_RIGHT == int(MaskAlign::kBottomRight) &&
              FC_MASK_ALIGN_TOP_LEFT == int(MaskAlign::kTopLeft));
static_assert(FC_PATH_AUTO == int(KernelPath::kAuto) && FC_PATH_SM90 == int(KernelPath::kSm90) &&
              FC_PATH_SM80 == int(KernelPath::kSm80) && FC_PATH_NAIVE_GPU == int(KernelPath::kNaiveGpu) &&
              FC_PATH_CPU_REFERENCE == int(KernelPath::kCpuReference) && FC_PATH_DECODE == int(KernelPath::kDecode));
static_assert(FC_WINDOW_INFINITE == kWindowInfinite);

thread_local std::string t_last_error;

fc_status record(const Status& status) {
  if (status.ok()) {
    t_last_error.clear();
  } else {
    t_last_error = status.message;
  }
  return static_cast<fc_status>(status.code);
}

// Runs `body` (returning Status) with every exception turned into an Internal status.
template <class Body>
fc_status guarded(Body&& body) {
  try {
    return record(body());
  } catch (const std::exception& e) {
    return record(Status::Internal(std::string("unexpected exception: ") + e.what()));
  } catch (...) {
    return record(Status::Internal("unexpected non-standard exception"));
  }
}

Status check_struct(const fc_attention_params* params) {
  if (params == nullptr) return Status::InvalidArgument("params: must not be null");
  if (params->struct_size != sizeof(fc_attention_params)) {
    return Status::InvalidArgument("params.struct_size: must be sizeof(fc_attention_params) = " +
                                   std::to_string(sizeof(fc_attention_params)) + " (got " +
                                   std::to_string(params->struct_size) + "); initialise the struct with fc_params_init");
  }
  if (params->causal != 0 && params->causal != 1) {
    return Status::InvalidArgument("causal: must be 0 or 1 (got " + std::to_string(params->causal) + ")");
  }
  return Status::Ok();
}

// Fields whose C and C++ types agree, copied by name in both directions.
#define FC_STRIDE_FIELDS(X)                                                                  \
  X(q_batch_stride) X(q_seq_stride) X(q_head_stride) X(k_batch_stride) X(k_seq_stride)       \
  X(k_head_stride) X(v_batch_stride) X(v_seq_stride) X(v_head_stride) X(o_batch_stride)      \
  X(o_seq_stride) X(o_head_stride) X(lse_batch_stride) X(lse_head_stride)
#define FC_SAME_TYPE_FIELDS(X)                                                               \
  X(q) X(k) X(v) X(o) X(lse) FC_STRIDE_FIELDS(X) X(batch) X(seqlen_q) X(seqlen_k) X(heads_q) \
  X(heads_kv) X(head_dim_qk) X(head_dim_v) X(softmax_scale) X(softcap) X(alibi_slopes)       \
  X(alibi_batch_stride) X(window_left) X(window_right) X(cu_seqlens_q) X(cu_seqlens_k)       \
  X(seqused_k) X(total_q) X(total_k) X(num_splits) X(block_table) X(block_table_batch_stride)   \
  X(pages_per_seq) X(page_size) X(num_pages) X(kv_batch_idx) X(kv_batch) X(leftpad_k)

// Field-by-field copy. Enum values are carried unchanged (the enums have int underlying types), so
// out-of-range values reach validate(), which names them.
AttentionParams to_cpp(const fc_attention_params& c) {
  AttentionParams p;
#define FC_COPY_FIELD(field) p.field = c.field;
  FC_SAME_TYPE_FIELDS(FC_COPY_FIELD)
#undef FC_COPY_FIELD
  p.dtype = static_cast<DType>(c.dtype);
  p.causal = c.causal != 0;
  p.mask_align = static_cast<MaskAlign>(c.mask_align);
  p.path = static_cast<KernelPath>(c.path);
  p.check_device_metadata = c.check_device_metadata != 0;
  return p;
}

void copy_reason(const std::string& reason, char* buf, size_t len) {
  if (buf == nullptr || len == 0) return;
  const size_t n = std::min(reason.size(), len - 1);
  std::memcpy(buf, reason.data(), n);
  buf[n] = '\0';
}

}  // namespace
}  // namespace flashcore

using flashcore::Status;

extern "C" {

fc_status fc_params_init(fc_attention_params* params) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    const flashcore::AttentionParams defaults;  // the C++ defaults are the single source
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(fc_attention_params);
    params->dtype = static_cast<int32_t>(defaults.dtype);
    params->softmax_scale = defaults.softmax_scale;
    params->softcap = defaults.softcap;
    params->causal = defaults.causal ? 1 : 0;
    params->mask_align = static_cast<int32_t>(defaults.mask_align);
    params->window_left = defaults.window_left;
    params->window_right = defaults.window_right;
    params->path = static_cast<int32_t>(defaults.path);
    params->num_splits = defaults.num_splits;
    params->check_device_metadata = defaults.check_device_metadata ? 1 : 0;
    return Status::Ok();
  });
}

fc_status fc_set_dense_strides(fc_attention_params* params) {
  return flashcore::guarded([&] {
    FC_RETURN_IF_ERROR(flashcore::check_struct(params));
    flashcore::AttentionParams p = flashcore::to_cpp(*params);
    flashcore::set_dense_strides(p);
#define FC_COPY_BACK(field) params->field = p.field;
    FC_STRIDE_FIELDS(FC_COPY_BACK)
#undef FC_COPY_BACK
    return Status::Ok();
  });
}

fc_status fc_validate(const fc_attention_params* params, void* stream) {
  return flashcore::guarded([&] {
    FC_RETURN_IF_ERROR(flashcore::check_struct(params));
    return flashcore::validate(flashcore::to_cpp(*params), static_cast<cudaStream_t>(stream));
  });
}

fc_status fc_attention_forward(const fc_attention_params* params, void* stream) {
  return flashcore::guarded([&] {
    FC_RETURN_IF_ERROR(flashcore::check_struct(params));
    return flashcore::attention_forward(flashcore::to_cpp(*params), static_cast<cudaStream_t>(stream));
  });
}

fc_status fc_backward_params_init(fc_backward_params* params) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    std::memset(params, 0, sizeof(*params));
    if (fc_params_init(&params->forward) != FC_STATUS_OK) return Status::Internal("fc_params_init failed");
    return Status::Ok();
  });
}

fc_status fc_set_grad_strides_like_forward(fc_backward_params* params) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    FC_RETURN_IF_ERROR(flashcore::check_struct(&params->forward));
    const fc_attention_params& f = params->forward;
    params->dout_batch_stride = f.o_batch_stride, params->dout_seq_stride = f.o_seq_stride;
    params->dout_head_stride = f.o_head_stride;
    params->dq_batch_stride = f.q_batch_stride, params->dq_seq_stride = f.q_seq_stride;
    params->dq_head_stride = f.q_head_stride;
    params->dk_batch_stride = f.k_batch_stride, params->dk_seq_stride = f.k_seq_stride;
    params->dk_head_stride = f.k_head_stride;
    params->dv_batch_stride = f.v_batch_stride, params->dv_seq_stride = f.v_seq_stride;
    params->dv_head_stride = f.v_head_stride;
    return Status::Ok();
  });
}

fc_status fc_attention_backward(const fc_backward_params* params, void* stream) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    FC_RETURN_IF_ERROR(flashcore::check_struct(&params->forward));
    flashcore::BackwardParams bp;
    bp.forward = flashcore::to_cpp(params->forward);
    bp.dout = params->dout;
    bp.dout_batch_stride = params->dout_batch_stride, bp.dout_seq_stride = params->dout_seq_stride;
    bp.dout_head_stride = params->dout_head_stride;
    bp.dq = params->dq;
    bp.dq_batch_stride = params->dq_batch_stride, bp.dq_seq_stride = params->dq_seq_stride;
    bp.dq_head_stride = params->dq_head_stride;
    bp.dk = params->dk;
    bp.dk_batch_stride = params->dk_batch_stride, bp.dk_seq_stride = params->dk_seq_stride;
    bp.dk_head_stride = params->dk_head_stride;
    bp.dv = params->dv;
    bp.dv_batch_stride = params->dv_batch_stride, bp.dv_seq_stride = params->dv_seq_stride;
    bp.dv_head_stride = params->dv_head_stride;
    bp.deterministic = params->deterministic != 0;
    return flashcore::attention_backward(bp, static_cast<cudaStream_t>(stream));
  });
}

fc_status fc_supports(const fc_attention_params* params, int32_t path, char* reason_buf, size_t reason_len) {
  flashcore::copy_reason("", reason_buf, reason_len);
  return flashcore::guarded([&] {
    Status status = flashcore::check_struct(params);
    if (status.ok() && (path < FC_PATH_AUTO || path > FC_PATH_DECODE)) {
      status = Status::InvalidArgument("path: must be one of FC_PATH_AUTO (0) .. FC_PATH_DECODE (5) (got " +
                                       std::to_string(path) + ")");
    }
    if (status.ok()) {
      flashcore::AttentionParams p = flashcore::to_cpp(*params);
      p.path = static_cast<flashcore::KernelPath>(path);
      status = flashcore::validate(p);
      if (status.ok() && path == FC_PATH_AUTO) {  // would attention_forward find a path?
        flashcore::KernelPath chosen{};
        status = flashcore::select_path(p, &chosen);
      } else if (status.ok()) {
        const flashcore::Support support = flashcore::supports(p, p.path);
        if (!support.supported) status = Status::Unsupported(support.reason);
      }
    }
    flashcore::copy_reason(status.message, reason_buf, reason_len);
    return status;
  });
}

const char* fc_last_error_message(void) { return flashcore::t_last_error.c_str(); }

const char* fc_status_name(fc_status code) {
  switch (code) {
    case FC_STATUS_OK:
    case FC_STATUS_INVALID_ARGUMENT:
    case FC_STATUS_UNSUPPORTED:
    case FC_STATUS_CUDA_ERROR:
    case FC_STATUS_INTERNAL:
      return flashcore::status_code_name(static_cast<flashcore::StatusCode>(code));
    default:
      return "unknown";
  }
}

fc_status fc_check_errors(void* stream) {
  return flashcore::record(flashcore::check_errors(static_cast<cudaStream_t>(stream)));
}

fc_status fc_set_slow_path_policy(int32_t policy) {
  if (policy != FC_SLOW_PATH_WARN && policy != FC_SLOW_PATH_ERROR && policy != FC_SLOW_PATH_ALLOW) {
    return flashcore::record(flashcore::Status::InvalidArgument(
        "policy: must be FC_SLOW_PATH_WARN (0), FC_SLOW_PATH_ERROR (1) or FC_SLOW_PATH_ALLOW (2) (got " +
        std::to_string(policy) + ")"));
  }
  flashcore::set_slow_path_policy(static_cast<flashcore::SlowPathPolicy>(policy));
  return flashcore::record(flashcore::Status::Ok());
}

int32_t fc_slow_path_policy(void) { return static_cast<int32_t>(flashcore::slow_path_policy()); }

void fc_set_slow_path_handler(void (*handler)(const char* message)) { flashcore::set_slow_path_handler(handler); }

const char* fc_build_info(void) {
  try {
    static const std::string info = flashcore::build_info();
    return info.c_str();
  } catch (...) {
    return "flashcore (build info unavailable)";
  }
}

// ---- Merging attention states ----------------------------------------------------------------

fc_status fc_merge_states_params_init(fc_merge_states_params* params) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    const flashcore::MergeStatesParams defaults;  // the C++ defaults are the single source
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(fc_merge_states_params);
    params->dtype = static_cast<int32_t>(defaults.dtype);
    return Status::Ok();
  });
}

fc_status fc_merge_attention_states(const fc_merge_states_params* params, void* stream) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    if (params->struct_size != sizeof(fc_merge_states_params)) {
      return Status::InvalidArgument("params.struct_size: must be sizeof(fc_merge_states_params) = " +
                                     std::to_string(sizeof(fc_merge_states_params)) + " (got " +
                                     std::to_string(params->struct_size) +
                                     "); initialise the struct with fc_merge_states_params_init");
    }
    flashcore::MergeStatesParams p;
#define FC_MERGE_FIELDS(X)                                                                            \
  X(o_a) X(lse_a) X(o_b) X(lse_b) X(o) X(lse) X(batch) X(seqlen) X(heads) X(head_dim)                 \
  X(o_a_batch_stride) X(o_a_seq_stride) X(o_a_head_stride) X(o_b_batch_stride) X(o_b_seq_stride)      \
  X(o_b_head_stride) X(o_batch_stride) X(o_seq_stride) X(o_head_stride) X(lse_a_batch_stride)         \
  X(lse_a_head_stride) X(lse_b_batch_stride) X(lse_b_head_stride) X(lse_batch_stride) X(lse_head_stride)
#define FC_COPY_FIELD(field) p.field = params->field;
    FC_MERGE_FIELDS(FC_COPY_FIELD)
#undef FC_COPY_FIELD
#undef FC_MERGE_FIELDS
    p.dtype = static_cast<flashcore::DType>(params->dtype);  // out of range: merge_attention_states names it
    return flashcore::merge_attention_states(p, static_cast<cudaStream_t>(stream));
  });
}


// ---- KV cache ----------------------------------------------------------------------------------

fc_status fc_kvcache_params_init(fc_kvcache_params* params) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    std::memset(params, 0, sizeof(*params));
    params->struct_size = sizeof(fc_kvcache_params);
    if (fc_params_init(&params->attention) != FC_STATUS_OK) return Status::Internal("fc_params_init failed");
    const flashcore::KvCacheParams defaults;  // the C++ defaults are the single source
    params->seqlen_new = defaults.seqlen_new;
    params->rotary_dim = defaults.rotary_dim;
    params->rotary_len = defaults.rotary_len;
    params->rotary_interleaved = defaults.rotary_interleaved ? 1 : 0;
    return Status::Ok();
  });
}

fc_status fc_attention_with_kvcache(const fc_kvcache_params* params, void* stream) {
  return flashcore::guarded([&] {
    if (params == nullptr) return Status::InvalidArgument("params: must not be null");
    if (params->struct_size != sizeof(fc_kvcache_params)) {
      return Status::InvalidArgument("params.struct_size: must be sizeof(fc_kvcache_params) = " +
                                     std::to_string(sizeof(fc_kvcache_params)) + " (got " +
                                     std::to_string(params->struct_size) +
                                     "); initialise the struct with fc_kvcache_params_init");
    }
    FC_RETURN_IF_ERROR(flashcore::check_struct(&params->attention));
    if (params->rotary_interleaved != 0 && params->rotary_interleaved != 1) {
      return Status::InvalidArgument("rotary_interleaved: must be 0 or 1 (got " +
                                     std::to_string(params->rotary_interleaved) + ")");
    }
    flashcore::KvCacheParams p;
    p.attention = flashcore::to_cpp(params->attention);
#define FC_KVCACHE_FIELDS(X)                                                                        \
  X(cache_seqlens) X(k_new) X(v_new) X(seqlen_new) X(k_new_batch_stride) X(k_new_seq_stride)        \
  X(k_new_head_stride) X(v_new_batch_stride) X(v_new_seq_stride) X(v_new_head_stride) X(rotary_cos) \
  X(rotary_sin) X(rotary_dim) X(rotary_len)
#define FC_COPY_FIELD(field) p.field = params->field;
    FC_KVCACHE_FIELDS(FC_COPY_FIELD)
#undef FC_COPY_FIELD
#undef FC_KVCACHE_FIELDS
    p.rotary_interleaved = params->rotary_interleaved != 0;
    return flashcore::attention_with_kvcache(p, static_cast<cudaStream_t>(stream));
  });
}

}  // extern "C"
