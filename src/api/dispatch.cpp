// attention_forward: validate, find where the data lives, pick the first path that supports the
// call, run it. supports() and the "no path" error read the same table (kPaths).
#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include "api/guard.hpp"
#include "api/memory.hpp"
#include "api/metadata_check.hpp"
#include "api/paths.hpp"
#include "api/realign.hpp"
#include "api/slow_path.hpp"
#include "backward/varlen_tail.hpp"
#include "common/cuda_check.hpp"

namespace flashcore {
namespace detail {

namespace {

// Dispatch order: fastest first. The decode path takes only what it is fastest at (few query rows
// per KV head, or K/V layouts the others do not read: batch-indexed, left-padded), and defers
// prefill-shaped paged calls to the sm90 path where it takes them; see its supports() / defers().
std::array<PathOps, 5> path_table() {
  return {decode_path(), sm90_path(), sm80_path(), naive_gpu_path(), cpu_reference_path()};
}

}  // namespace

Status query_device(const AttentionParams& params, DeviceInfo* info) {
  *info = DeviceInfo{};
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    cudaGetLastError();
    info->has_device = false;
    info->pointers_on_host = true;
    return Status::Ok();
  }
  info->has_device = true;
  FC_CUDA_RETURN(cudaGetDevice(&info->device));
  // Four attributes, not cudaGetDeviceProperties: this runs on every call, and the attribute
  // queries are cheap while the full property struct is not.
  int smem_optin = 0;
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&info->cc_major, cudaDevAttrComputeCapabilityMajor, info->device));
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&info->cc_minor, cudaDevAttrComputeCapabilityMinor, info->device));
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&info->sm_count, cudaDevAttrMultiProcessorCount, info->device));
  FC_CUDA_RETURN(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, info->device));
  info->max_smem_per_block_optin = size_t(smem_optin);
  // FLASHCORE_MAX_SMEM_PER_BLOCK (bytes) lowers the limit the paths plan for, never raises it: how
  // the compact tiles of the 99 KB parts (sm_86, sm_89) are exercised on a larger GPU. Read per call
  // (a getenv beside four attribute queries), so a test can set it around the calls it makes.
  if (const char* cap = std::getenv("FLASHCORE_MAX_SMEM_PER_BLOCK"); cap != nullptr && cap[0] != '\0') {
    char* end = nullptr;
    const unsigned long long bytes = std::strtoull(cap, &end, 10);
    if (end == cap || *end != '\0') {
      return Status::InvalidArgument(std::string("FLASHCORE_MAX_SMEM_PER_BLOCK: '") + cap +
                                     "' is not a byte count (a decimal integer)");
    }
    info->max_smem_per_block_optin = std::min(info->max_smem_per_block_optin, size_t(bytes));
  }

  // All tensors must live on one side. q decides; the others must agree, and device memory must be
  // the current device's (the kernels run there). A CUDA failure in the query (a sticky error from
  // an earlier kernel fault) is reported, never taken for host memory.
  PointerInfo q_info;
  FC_RETURN_IF_ERROR(classify_pointer(params.q, &q_info));
  const bool q_host = is_host(q_info.memory);
  const void* tensors[] = {params.q, params.k, params.v, params.o, params.lse};
  const char* names[] = {"q", "k", "v", "o", "lse"};
  for (int t = 0; t < 5; ++t) {
    // validate() allows null k/v only when there are no keys (nothing is read): no placement then.
    if (tensors[t] == nullptr) continue;
    PointerInfo at;
    FC_RETURN_IF_ERROR(classify_pointer(tensors[t], &at));
    if (is_host(at.memory) != q_host) {
      return Status::InvalidArgument(std::string(names[t]) + ": must live in the same memory as q (" +
                                     (q_host ? "host" : "device") + ")");
    }
    if (at.memory == Memory::kDevice && at.device != info->device) {
      return Status::InvalidArgument(std::string(names[t]) + ": lives on device " + std::to_string(at.device) +
                                     " but the current device is " + std::to_string(info->device) +
                                     " (make it current with cudaSetDevice, or move the tensor)");
    }
  }
  info->pointers_on_host = q_host;
  return Status::Ok();
}

}  // namespace detail

namespace {

Support supports_one(const AttentionParams& params, KernelPath path) {
  Support s;
  s.path = path;
  detail::DeviceInfo info;
  Status st = detail::query_device(params, &info);
  if (!st.ok()) {
    s.reason = st.message;
    return s;
  }
  for (const auto& ops : detail::path_table()) {
    if (ops.path != path) continue;
    s.reason = ops.supports(params, info);
    s.supported = s.reason.empty();
    return s;
  }
  s.reason = std::string("path '") + kernel_path_name(path) + "' is not a concrete kernel path";
  return s;
}

std::vector<Support> supports_all(const AttentionParams& params) {
  std::vector<Support> out;
  detail::DeviceInfo info;
  const Status st = detail::query_device(params, &info);  // once for every path
  for (const auto& ops : detail::path_table()) {
    Support s;
    s.path = ops.path;
    s.reason = st.ok() ? ops.supports(params, info) : st.message;
    s.supported = st.ok() && s.reason.empty();
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

// supports() answers with a reason instead of throwing (detail::status_guard's rule for Status).
Support supports(const AttentionParams& params, KernelPath path) {
  Support s;
  s.path = path;
  const Status st = detail::status_guard("supports", [&]() -> Status {
    s = supports_one(params, path);
    return Status::Ok();
  });
  if (!st.ok()) s.reason = st.message;
  return s;
}

std::vector<Support> supports(const AttentionParams& params) {
  std::vector<Support> out;
  const Status st = detail::status_guard("supports", [&]() -> Status {
    out = supports_all(params);
    return Status::Ok();
  });
  if (!st.ok()) out.assign(1, Support{KernelPath::kAuto, false, st.message});
  return out;
}

namespace detail {

Status select_path(const AttentionParams& params, const DeviceInfo& info, PathOps* chosen, std::string* refusals) {
  std::string reasons;
  for (const auto& ops : detail::path_table()) {
    if (params.path != KernelPath::kAuto && ops.path != params.path) continue;
    std::string why_not = ops.supports(params, info);
    if (why_not.empty() && params.path == KernelPath::kAuto && ops.defers != nullptr) why_not = ops.defers(params, info);
    if (why_not.empty()) {
      *chosen = ops;
      if (refusals != nullptr) *refusals = reasons;
      return Status::Ok();
    }
    reasons += std::string("\n  ") + kernel_path_name(ops.path) + ": " + why_not;
  }
  if (params.path != KernelPath::kAuto) {
    return Status::Unsupported(std::string("path: the requested path '") + kernel_path_name(params.path) +
                               "' cannot run this call:" + reasons);
  }
  return Status::Unsupported("no kernel path can run this call:" + reasons);
}

}  // namespace detail

Status select_path(const AttentionParams& params, KernelPath* chosen) {
  return detail::status_guard("select_path", [&]() -> Status {
    detail::DeviceInfo info;
    FC_RETURN_IF_ERROR(detail::query_device(params, &info));
    detail::PathOps ops{};
    FC_RETURN_IF_ERROR(detail::select_path(params, info, &ops));
    *chosen = ops.path;
    return Status::Ok();
  });
}

Status attention_forward(const AttentionParams& params, cudaStream_t stream) {
  return detail::status_guard("attention_forward", [&]() -> Status {
    FC_RETURN_IF_ERROR(detail::take_deferred_error());
    FC_RETURN_IF_ERROR(validate(params, stream));
    // B = 0 or no query rows: a valid call with nothing to write. (Sk = 0 with query rows is not
    // empty: every row then has no visible key and gets o = 0, lse = -inf.)
    const bool no_rows = params.batch == 0 || (params.is_varlen() ? params.total_q == 0 : params.seqlen_q == 0);
    if (no_rows) return Status::Ok();
    detail::DeviceInfo info;
    FC_RETURN_IF_ERROR(detail::query_device(params, &info));
    detail::PathOps ops{};
    std::string refusals;
    FC_RETURN_IF_ERROR(detail::select_path(params, info, &ops, &refusals));
    FC_RETURN_IF_ERROR(detail::check_metadata_on_device(params, stream));
    if (detail::fell_back_to_naive(params, ops.path)) {
      // On aligned copies of the operands, where that lets a fused path run; a call too small for
      // the copies to pay runs on the naive kernel as its fastest way, which is no slow path.
      detail::Realigned realigned = detail::Realigned::kNotApplicable;
      FC_RETURN_IF_ERROR(detail::run_realigned(params, info, stream, &realigned));
      if (realigned == detail::Realigned::kRan) return Status::Ok();
      if (realigned == detail::Realigned::kNotApplicable) {
        FC_RETURN_IF_ERROR(detail::slow_path_notice("attention_forward", refusals));
      }
    }
    return ops.run(params, info, stream);
  });
}

// ---- Backward ------------------------------------------------------------------------------------

namespace {

// The backward's paths, fastest first.
std::array<detail::BackwardOps, 4> backward_path_table() {
  return {detail::sm90_backward_path(), detail::sm80_backward_path(), detail::naive_gpu_backward_path(),
          detail::cpu_reference_backward_path()};
}

// dout, dq, dk, dv must live where q does (query_device checked q, k, v, o, lse).
Status check_gradient_placement(const BackwardParams& bp, const detail::DeviceInfo& info) {
  const void* grads[] = {bp.dout, bp.dq, bp.dk, bp.dv};
  const char* names[] = {"dout", "dq", "dk", "dv"};
  for (int t = 0; t < 4; ++t) {
    if (grads[t] == nullptr || !info.has_device) continue;
    if (detail::is_host(detail::memory_of(grads[t])) != info.pointers_on_host) {
      return Status::InvalidArgument(std::string(names[t]) + ": must live in the same memory as q (" +
                                     (info.pointers_on_host ? "host" : "device") + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

namespace {

Status select_backward(const BackwardParams& params, const detail::DeviceInfo& info, detail::BackwardOps* chosen,
                       std::string* refusals = nullptr) {
  std::string reasons;
  for (const auto& ops : backward_path_table()) {
    if (params.forward.path != KernelPath::kAuto && ops.path != params.forward.path) continue;
    const std::string why_not = ops.supports(params, info);
    if (why_not.empty()) {
      *chosen = ops;
      if (refusals != nullptr) *refusals = reasons;
      return Status::Ok();
    }
    reasons += std::string("\n  ") + kernel_path_name(ops.path) + ": " + why_not;
  }
  return Status::Unsupported("no kernel path can run this backward:" + reasons);
}

}  // namespace

Status select_backward_path(const BackwardParams& params, KernelPath* chosen) {
  return detail::status_guard("select_backward_path", [&]() -> Status {
    detail::DeviceInfo info;
    FC_RETURN_IF_ERROR(detail::query_device(params.forward, &info));
    FC_RETURN_IF_ERROR(check_gradient_placement(params, info));
    detail::BackwardOps ops{};
    FC_RETURN_IF_ERROR(select_backward(params, info, &ops));
    *chosen = ops.path;
    return Status::Ok();
  });
}

Status attention_backward(const BackwardParams& params, cudaStream_t stream) {
  return detail::status_guard("attention_backward", [&]() -> Status {
    FC_RETURN_IF_ERROR(detail::take_deferred_error());
    FC_RETURN_IF_ERROR(validate_backward(params, stream));
    const AttentionParams& f = params.forward;
    const bool no_rows = f.batch == 0 || (f.is_varlen() ? f.total_q == 0 : f.seqlen_q == 0);
    if (no_rows) return Status::Ok();
    detail::DeviceInfo info;
    FC_RETURN_IF_ERROR(detail::query_device(f, &info));
    FC_RETURN_IF_ERROR(check_gradient_placement(params, info));
    detail::BackwardOps ops{};
    std::string refusals;
    FC_RETURN_IF_ERROR(select_backward(params, info, &ops, &refusals));
    FC_RETURN_IF_ERROR(detail::check_metadata_on_device(f, stream));
    if (detail::fell_back_to_naive(f, ops.path)) {
      FC_RETURN_IF_ERROR(detail::slow_path_notice("attention_backward", refusals));
    }
    FC_RETURN_IF_ERROR(ops.run(params, info, stream));
    return backward::zero_varlen_gradient_tails(params, info.pointers_on_host, stream);
  });
}

}  // namespace flashcore
