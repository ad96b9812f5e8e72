// Ladder step 6 — step 5 for longer rows (cols <= 32768): the whole block owns a row and keeps it
// in registers, so even a 32000-wide vocabulary row crosses DRAM once each way (step 4 reads it
// twice and relies on L2 for the second read). Reductions are block_allreduce (two barriers).
// About 256 threads per row, growing to 1024 once a thread holds its limit of 32 elements.
#include <type_traits>

#include "softmax/row_in_registers.cuh"

namespace flashcore::softmax {
namespace {
constexpr int kPreferredThreads = 256;  // small blocks: several rows per SM overlap their phases
}  // namespace

Status launch_row_per_block(const SoftmaxProblem& p) {
  if (p.cols > kSoftmaxRowPerBlockMaxCols) return Status::Internal("launch_row_per_block: cols > 32768");
  return dispatch_dtype_and_vec(p, [&](auto tag, auto vec) {
    using T = decltype(tag);
    constexpr int kVec = decltype(vec)::value;
    const int64_t vecs_per_row = p.cols / kVec;
    int64_t vecs_per_thread = ceil_div(vecs_per_row, kPreferredThreads);
    if (vecs_per_thread > kMaxVecsPerThread<kVec>) vecs_per_thread = kMaxVecsPerThread<kVec>;
    // Round vecs_per_thread up to the power of two the kernel is instantiated for, then take just
    // enough warps to cover the row.
    int64_t instantiated = 1;
    while (instantiated < vecs_per_thread) instantiated *= 2;
    const int64_t threads = ceil_div(ceil_div(vecs_per_row, instantiated), kWarpSize) * kWarpSize;
    if (threads > kMaxThreadsPerBlock) return Status::Internal("launch_row_per_block: row needs > 1024 threads");
    // The PDL prologue on grids of one wave only (row_in_registers.cuh).
    return launch_row_in_registers<T, kVec, /*kBlockPerRow=*/true>(p, int(instantiated), grid_for(p.rows), int(threads),
                                                                    "row_per_block_kernel",
                                                                    grid_is_one_wave(p.rows, int(threads), p.sm_count));
  });
}

}  // namespace flashcore::softmax
