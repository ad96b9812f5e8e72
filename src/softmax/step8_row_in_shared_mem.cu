// Ladder step 8 — step 6 with the row staged in shared memory instead of registers. Step 6 is
// limited by registers: a 32000-wide 16-bit row fills a 1024-thread block at 64 registers per
// thread, so one row per SM is in flight and its load, reduce and write phases run one after the
// other. Here the row is copied global -> shared with cp.async (16 bytes per instruction, no
// register round trip, the whole row requested at once), so residency is set by shared memory:
// three 64 KB rows per SM at 32000 bf16 columns, sixteen 8 KB rows at 4096, and the phases of the
// rows on one SM overlap. Max, sum of exp and the write pass (three_pass_row, as in steps 2 and 3)
// then read the row from shared memory; x still crosses DRAM exactly once each way. Rows that are
// not 16-byte aligned are staged with plain element loads (same kernel, kVec = 1).
#include <type_traits>

#include "softmax/row_in_registers.cuh"
#include "softmax/three_pass.cuh"

namespace flashcore::softmax {
namespace {

// Short rows: few threads per row, many rows per SM (16 blocks of 128 threads fill 2048 threads).
// Long rows: 512 threads, so the passes over shared memory have enough warps to hide latency.
constexpr int kShortRowThreads = 128;
constexpr int kLongRowThreads = 512;
constexpr int64_t kShortRowMaxVecs = 1024;  // at most 8 vectors per thread with 128 threads
// Above the 48 KB every kernel may use, dynamic shared memory must be opted into per kernel.
constexpr int kDefaultDynamicSharedBytes = 48 * 1024;
// Kept free of the per-block opt-in limit for the kernel's static shared memory (the reduction
// scratch) and the 16-byte round-up of the row.
constexpr int64_t kStaticSharedReserve = 1024;

FC_DEVICE unsigned shared_address(const void* ptr) { return unsigned(__cvta_generic_to_shared(ptr)); }

// 16 bytes global -> shared without passing through registers; .cg: cached in L2 only (x is
// read once).
FC_DEVICE void copy_async_16(void* shared_dst, const void* global_src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(shared_dst)), "l"(global_src)
               : "memory");
}

FC_DEVICE void wait_all_async_copies() {
  asm volatile("cp.async.commit_group;\n\tcp.async.wait_group 0;" ::: "memory");
}

template <typename T, int kVec, int kThreads>
__global__ void __launch_bounds__(kThreads) row_in_shared_mem_kernel(const T* x, T* y, float* lse, int64_t rows,
                                                                     int cols, bool pdl_prologue) {
  extern __shared__ __align__(kVectorBytes) unsigned char shared_bytes[];
  T* row_buffer = reinterpret_cast<T*>(shared_bytes);  // cols elements
  __shared__ float scratch[kWarpSize];
  const int vecs_per_row = cols / kVec;  // the launcher guarantees cols % kVec == 0
  // PDL prologue (row_in_registers.cuh, softmax_common.cuh) when the launcher asks for it.
  if constexpr (kVec > 1) {  // 16-byte aligned rows
    prefetch_row_to_l2(x + int64_t(blockIdx.x) * cols, uint32_t(cols) * uint32_t(sizeof(T)),
                       pdl_prologue && threadIdx.x == 0 && blockIdx.x < rows);
  }
  if (pdl_prologue) allow_next_grid_to_start();
  wait_for_previous_grid();

  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const T* x_row = x + row * cols;
    T* y_row = y + row * cols;

    // Stage the row. Each thread waits for its own copies; the barrier makes all of them visible.
    if constexpr (kVec > 1) {
#pragma unroll 4
      for (int v = threadIdx.x; v < vecs_per_row; v += kThreads) copy_async_16(row_buffer + v * kVec, x_row + v * kVec);
      wait_all_async_copies();
    } else {
#pragma unroll 4
      for (int c = threadIdx.x; c < cols; c += kThreads) row_buffer[c] = x_row[c];
    }
    __syncthreads();

    three_pass_row<T, kVec, kThreads>(row_buffer, y_row, lse == nullptr ? nullptr : lse + row, vecs_per_row, scratch);
    __syncthreads();  // every thread is done reading row_buffer before the next row overwrites it
  }
}

template <typename T, int kVec, int kThreads>
Status launch_kernel(const SoftmaxProblem& p, int shared_bytes) {
  const auto kernel = row_in_shared_mem_kernel<T, kVec, kThreads>;
  if (shared_bytes > kDefaultDynamicSharedBytes) {
    FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes));
  }
  // Residency is the point of this step: ask for the largest shared-memory carve-out so the driver
  // does not size the SM's L1/shared split for fewer blocks (x is streamed; L1 has nothing to keep).
  FC_CUDA_RETURN(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
  // The PDL prologue for 16-bit rows on grids of more than one wave. H200, back-to-back calls:
  // 8192x32000 bf16 256.6 -> 251.8 us (the auto choice there), 4096x4096 bf16 19.5 -> 19.1 us; but
  // 1024x1024 bf16 (one wave) 3.44 -> 3.58 us, as with the early start alone (the
  // waiting blocks hold shared memory), and 4096x4096 fp32 35.3 -> 36.4 us.
  const bool pdl_prologue = p.programmatic_launch && sizeof(T) == 2 && !grid_is_one_wave(p.rows, kThreads, p.sm_count);
  return launch_softmax_kernel("row_in_shared_mem_kernel", kernel, grid_for(p.rows), kThreads, size_t(shared_bytes),
                               p.stream, p.programmatic_launch, static_cast<const T*>(p.x), static_cast<T*>(p.y),
                               p.lse, p.rows, int(p.cols), pdl_prologue);
}

}  // namespace

int64_t row_in_shared_mem_max_bytes(const SoftmaxProblem& p) {
  const int64_t device_limit = p.max_shared_bytes_per_block - kStaticSharedReserve;
  return device_limit < kSoftmaxRowInSharedMemMaxBytes ? device_limit : kSoftmaxRowInSharedMemMaxBytes;
}

Status launch_row_in_shared_mem(const SoftmaxProblem& p) {
  const int64_t row_bytes = p.cols * dtype_size(p.dtype);
  if (row_bytes > row_in_shared_mem_max_bytes(p)) {
    return Status::Internal("launch_row_in_shared_mem: the row does not fit in shared memory");
  }
  // Rounded up to whole 16-byte vectors (the scalar path may end mid-vector).
  const int shared_bytes = int(ceil_div(row_bytes, kVectorBytes) * kVectorBytes);
  return dispatch_dtype_and_vec(p, [&](auto tag, auto vec) {
    using T = decltype(tag);
    constexpr int kVec = decltype(vec)::value;
    return p.cols / kVec <= kShortRowMaxVecs ? launch_kernel<T, kVec, kShortRowThreads>(p, shared_bytes)
                                             : launch_kernel<T, kVec, kLongRowThreads>(p, shared_bytes);
  });
}

}  // namespace flashcore::softmax
