// Stands in for the sm90 path when the build prunes it (FLASHCORE_BUILD_SM90=OFF or no matching
// architecture), so dispatch and supports() say why the path is unavailable.
#include "api/paths.hpp"

namespace flashcore::detail {

namespace {
std::string sm90_not_built(const AttentionParams&, const DeviceInfo&) {
  return "the sm90 path is not part of this build (configure with FLASHCORE_BUILD_SM90=ON and 90a in FLASHCORE_CUDA_ARCHS)";
}
Status sm90_run_not_built(const AttentionParams& p, const DeviceInfo& d, cudaStream_t) {
  return Status::Unsupported(sm90_not_built(p, d));
}
std::string sm90_backward_not_built(const BackwardParams& bp, const DeviceInfo& d) {
  return sm90_not_built(bp.forward, d);
}
Status sm90_backward_run_not_built(const BackwardParams& bp, const DeviceInfo& d, cudaStream_t) {
  return Status::Unsupported(sm90_not_built(bp.forward, d));
}
}  // namespace

PathOps sm90_path() { return {KernelPath::kSm90, &sm90_not_built, &sm90_run_not_built}; }
BackwardOps sm90_backward_path() {
  return {KernelPath::kSm90, &sm90_backward_not_built, &sm90_backward_run_not_built};
}

}  // namespace flashcore::detail
