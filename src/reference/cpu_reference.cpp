// PLACEHOLDER — replaced by the fp64 CPU reference.
#include "api/paths.hpp"
namespace flashcore::detail {
namespace {
std::string cpu_supports(const AttentionParams&, const DeviceInfo& d) {
  return d.pointers_on_host ? "" : "the CPU reference needs host pointers";
}
Status cpu_run(const AttentionParams&, const DeviceInfo&, cudaStream_t) { return Status::Internal("todo"); }
}  // namespace
PathOps cpu_reference_path() { return {KernelPath::kCpuReference, &cpu_supports, &cpu_run}; }
}  // namespace flashcore::detail
