// Ladder step 5 — short rows (cols <= 1024): one warp owns a row and keeps it in registers. The row
// is read once and written once, and both reductions are five shuffles with no barrier. Four rows
// per 128-thread block. Uses 16-byte vectors when the rows are aligned, scalar accesses otherwise.
#include <type_traits>

#include "softmax/row_in_registers.cuh"

namespace flashcore::softmax {
namespace {
constexpr int kThreads = 128;  // four warps, four rows in flight per block
}  // namespace

Status launch_row_per_warp(const SoftmaxProblem& p) {
  if (p.cols > kSoftmaxRowPerWarpMaxCols) return Status::Internal("launch_row_per_warp: cols > 1024");
  return dispatch_dtype_and_vec(p, [&](auto tag, auto vec) {
    using T = decltype(tag);
    constexpr int kVec = decltype(vec)::value;
    const int64_t vecs_per_lane = ceil_div(p.cols / kVec, kWarpSize);
    const int64_t rows_per_block = kThreads / kWarpSize;
    return launch_row_in_registers<T, kVec, /*kBlockPerRow=*/false>(
        p, int(vecs_per_lane), grid_for(ceil_div(p.rows, rows_per_block)), kThreads, "row_per_warp_kernel");
  });
}

}  // namespace flashcore::softmax
