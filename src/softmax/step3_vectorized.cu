// Ladder step 3 — step 2 with 16-byte loads and stores (4 fp32 or 8 fp16/bf16 per instruction):
// a quarter / an eighth of the memory instructions and of the loop overhead, so more bytes in
// flight per thread. Needs every row of x and y to start on a 16-byte boundary; the API refuses
// other calls for this variant (kAuto and kOnline fall back to scalar loads instead).
#include "softmax/three_pass.cuh"

namespace flashcore::softmax {

bool rows_are_vector_aligned(const SoftmaxProblem& p) {
  const auto address = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr); };
  const int64_t row_bytes = p.cols * dtype_size(p.dtype);
  return address(p.x) % kVectorBytes == 0 && address(p.y) % kVectorBytes == 0 && row_bytes % kVectorBytes == 0;
}

Status launch_vectorized(const SoftmaxProblem& p) {
  if (!rows_are_vector_aligned(p)) return Status::Internal("launch_vectorized: rows are not 16-byte aligned");
  return dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    return launch_three_pass<T, kFullVec<T>>(p, "three_pass_kernel<vec16>");
  });
}

}  // namespace flashcore::softmax
