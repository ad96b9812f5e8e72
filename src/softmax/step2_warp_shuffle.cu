// Ladder step 2 — same three passes as step 1, but each reduction is a warp butterfly
// (__shfl_xor_sync, no shared memory, no barrier) followed by one shared slot per warp: two
// barriers per reduction instead of log2(256) + 2 = 10. Still scalar loads; any alignment.
#include "softmax/three_pass.cuh"

namespace flashcore::softmax {

Status launch_warp_shuffle(const SoftmaxProblem& p) {
  return dispatch_dtype(p.dtype, [&](auto tag) {
    return launch_three_pass<decltype(tag), 1>(p, "three_pass_kernel<scalar>");
  });
}

}  // namespace flashcore::softmax
