// PLACEHOLDER — replaced by the naive GPU reference.
#include "api/paths.hpp"
namespace flashcore::detail {
namespace {
std::string naive_supports(const AttentionParams&, const DeviceInfo& d) {
  return d.pointers_on_host ? "the naive GPU path needs device pointers" : "";
}
Status naive_run(const AttentionParams&, const DeviceInfo&, cudaStream_t) { return Status::Internal("todo"); }
}  // namespace
PathOps naive_gpu_path() { return {KernelPath::kNaiveGpu, &naive_supports, &naive_run}; }
}  // namespace flashcore::detail
