#include "common/gpu_check.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include <cuda_runtime_api.h>

#include "reference/cpu_reference.hpp"

namespace flashcore::testing {

namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

}  // namespace

void* DeviceProblem::upload(const void* data, size_t bytes) {
  if (data == nullptr) return nullptr;
  void* ptr = nullptr;
  check_cuda(cudaMalloc(&ptr, bytes == 0 ? 16 : bytes), "cudaMalloc");
  allocations_.push_back(ptr);
  if (bytes) check_cuda(cudaMemcpy(ptr, data, bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  return ptr;
}

DeviceProblem::DeviceProblem(const HostProblem& host) {
  params = host.params;
  params.q = upload(host.q.data(), host.q.size());
  params.k = upload(host.k.data(), host.k.size());
  params.v = upload(host.v.data(), host.v.size());
  o_bytes_ = host.o.size();
  o_ = upload(host.o.data(), o_bytes_);
  params.o = o_;
  lse_count_ = host.lse.size();
  lse_ = static_cast<float*>(upload(host.lse.data(), lse_count_ * sizeof(float)));
  params.lse = host.params.lse ? lse_ : nullptr;
  if (host.params.alibi_slopes)
    params.alibi_slopes = static_cast<const float*>(upload(host.alibi_slopes.data(), host.alibi_slopes.size() * sizeof(float)));
  if (host.params.cu_seqlens_q) {
    params.cu_seqlens_q = static_cast<const int32_t*>(upload(host.cu_seqlens_q.data(), host.cu_seqlens_q.size() * 4));
    params.cu_seqlens_k = static_cast<const int32_t*>(upload(host.cu_seqlens_k.data(), host.cu_seqlens_k.size() * 4));
  }
  if (host.params.seqused_k)
    params.seqused_k = static_cast<const int32_t*>(upload(host.seqused_k.data(), host.seqused_k.size() * 4));
  if (host.params.block_table)
    params.block_table = static_cast<const int32_t*>(upload(host.block_table.data(), host.block_table.size() * 4));
  if (host.params.kv_batch_idx)
    params.kv_batch_idx = static_cast<const int32_t*>(upload(host.kv_batch_idx.data(), host.kv_batch_idx.size() * 4));
  if (host.params.leftpad_k)
    params.leftpad_k = static_cast<const int32_t*>(upload(host.leftpad_k.data(), host.leftpad_k.size() * 4));
}

DeviceProblem::~DeviceProblem() {
  for (void* ptr : allocations_) cudaFree(ptr);
}

Status DeviceProblem::run(KernelPath path, cudaStream_t stream) {
  // 0xFF bytes are NaN in fp16, bf16 and fp32.
  if (o_) check_cuda(cudaMemset(o_, 0xff, o_bytes_), "poison o");
  if (lse_) check_cuda(cudaMemset(lse_, 0xff, lse_count_ * sizeof(float)), "poison lse");
  AttentionParams p = params;
  p.path = path;
  Status st = attention_forward(p, stream);
  if (!st.ok()) return st;
  const cudaError_t sync = cudaStreamSynchronize(stream);
  if (sync != cudaSuccess) return Status::CudaError(std::string("after the launch: ") + cudaGetErrorString(sync));
  return Status::Ok();
}

void DeviceProblem::download(std::vector<uint8_t>* o, std::vector<float>* lse) const {
  o->resize(o_bytes_);
  if (o_bytes_) check_cuda(cudaMemcpy(o->data(), o_, o_bytes_, cudaMemcpyDeviceToHost), "cudaMemcpy o");
  lse->resize(lse_count_);
  if (lse_count_) check_cuda(cudaMemcpy(lse->data(), lse_, lse_count_ * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy lse");
}

bool PathCheck::ok() const {
  return status.ok() && unwritten_o == 0 && unwritten_lse == 0 && padding_written == 0 &&
         within(out_error, tolerance) && lse_error.finite_ok() && lse_error.max_abs <= lse_tolerance;
}

std::string PathCheck::describe() const {
  std::ostringstream os;
  os << "status: " << (status.ok() ? "ok" : status.message) << "\n"
     << "out vs fp64:   " << out_error.describe() << "\n"
     << "naive baseline: " << naive_error.describe() << "\n"
     << "tolerance:     " << tolerance.describe() << "\n"
     << "lse vs fp64:   " << lse_error.describe() << " (bound " << lse_tolerance << ")\n"
     << "unwritten o: " << unwritten_o << ", unwritten lse: " << unwritten_lse
     << ", padding written: " << padding_written;
  return os.str();
}

PathCheck check_path(const TestCase& test_case, KernelPath path) {
  PathCheck check;
  HostProblem host = make_problem(test_case);
  std::vector<double> ref_out, ref_lse;
  reference::cpu_reference_forward_f64(host.params, &ref_out, &ref_lse);
  check.naive_error = compare(naive_same_dtype_reference(host.params), ref_out);
  check.tolerance = tolerance_from_naive(check.naive_error, default_rel_floor(test_case.dtype));
  // LSE is fp32 in every path: scores are rounded inputs' dot products, so allow fp32 rounding of
  // the largest logits plus the dtype's input rounding already present in the naive baseline.
  check.lse_tolerance = 1e-3 * std::max(1.0, double(test_case.input_scale) * test_case.input_scale);

  DeviceProblem device(host);
  device.params.overrides = &test_case.overrides;
  check.status = device.run(path);
  if (!check.status.ok()) return check;
  std::vector<uint8_t> o;
  std::vector<float> lse;
  device.download(&o, &lse);
  check.unwritten_o = count_unwritten_output(host, o.data());
  check.padding_written = count_written_padding(host, o.data());
  check.out_error = compare(read_output(host, o.data()), ref_out);
  if (host.params.lse) {
    check.unwritten_lse = count_unwritten_lse(host, lse.data());
    check.lse_error = compare(read_lse(host, lse.data()), ref_lse);
  }
  return check;
}

}  // namespace flashcore::testing

namespace flashcore::testing {

std::string PathComparison::describe() const {
  std::ostringstream os;
  os << "status: " << (status.ok() ? "ok" : status.message)
     << ", reference status: " << (reference_status.ok() ? "ok" : reference_status.message) << "\n"
     << "error vs reference path: " << error.describe() << "\nunwritten o: " << unwritten_o;
  return os.str();
}

PathComparison compare_paths(const TestCase& test_case, KernelPath path, KernelPath reference_path) {
  PathComparison cmp;
  HostProblem host = make_problem(test_case);
  DeviceProblem device(host);
  std::vector<uint8_t> o_ref, o;
  std::vector<float> lse_ref, lse;
  cmp.reference_status = device.run(reference_path);
  if (!cmp.reference_status.ok()) return cmp;
  device.download(&o_ref, &lse_ref);
  cmp.status = device.run(path);
  if (!cmp.status.ok()) return cmp;
  device.download(&o, &lse);
  cmp.unwritten_o = count_unwritten_output(host, o.data());
  cmp.error = compare(read_output(host, o.data()), read_output(host, o_ref.data()));
  return cmp;
}

}  // namespace flashcore::testing
