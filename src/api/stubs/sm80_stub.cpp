// Stands in for the sm80 path when the build prunes it (FLASHCORE_BUILD_SM80=OFF or no matching
// architecture), so dispatch and supports() say why the path is unavailable.
#include "api/paths.hpp"

namespace flashcore::detail {

namespace {
std::string sm80_not_built(const AttentionParams&, const DeviceInfo&) {
  return "the sm80 path is not part of this build (configure with FLASHCORE_BUILD_SM80=ON)";
}
Status sm80_run_not_built(const AttentionParams& p, const DeviceInfo& d, cudaStream_t) {
  return Status::Unsupported(sm80_not_built(p, d));
}
std::string sm80_backward_not_built(const BackwardParams& bp, const DeviceInfo& d) {
  return sm80_not_built(bp.forward, d);
}
Status sm80_backward_run_not_built(const BackwardParams& bp, const DeviceInfo& d, cudaStream_t) {
  return Status::Unsupported(sm80_not_built(bp.forward, d));
}
}  // namespace

PathOps decode_path() { return {KernelPath::kDecode, &sm80_not_built, &sm80_run_not_built}; }
PathOps sm80_path() { return {KernelPath::kSm80, &sm80_not_built, &sm80_run_not_built}; }
BackwardOps sm80_backward_path() {
  return {KernelPath::kSm80, &sm80_backward_not_built, &sm80_backward_run_not_built};
}

}  // namespace flashcore::detail
