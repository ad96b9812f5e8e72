// The register-resident kernel of ladder steps 5 and 6: a row is read from memory exactly once into
// registers (kVecsPerThread vectors of kVec elements per thread), reduced there, and written once —
// the minimum traffic a softmax can have. The row is owned by one warp (step 5: short rows, no
// barrier at all) or by the whole block (step 6: rows up to 1024 threads x 32 elements).
#pragma once

#include <string>
#include <type_traits>

#include "softmax/softmax_common.cuh"

namespace flashcore::softmax {

// Elements a thread holds, as floats: 32 keep a 1024-thread block within 64 registers per thread.
// (Holding 16-bit rows packed would halve that, but the compiler then keeps the converted floats
// and their exponentials live across the reductions anyway and spills; measured no better.)
inline constexpr int kMaxElemsPerThread = 32;
inline constexpr int kMaxThreadsPerBlock = 1024;

template <int kVec>
inline constexpr int kMaxVecsPerThread = kMaxElemsPerThread / kVec;

// kPdlPrologue (block mode, step 6; the launcher picks the instantiation): before the wait, the
// block's row is prefetched into L2 and the next call allowed to start (softmax_common.cuh), so a
// call's rows come from DRAM while the previous call drains. Step 6 uses it for grids of one wave
// (H200, back-to-back calls: 1024x1024 bf16 2.81 -> 2.48 us, the same-size copy's time; fp32
// 3.81 -> 3.18). On grids of several waves it did not help (4096x4096 bf16 18.6-18.8 -> 18.8-19.0
// us) or hurt (8192x32000 bf16: 324 -> 369 us). Warp mode (step 5) has none: its 1024x1024 bf16
// went 2.90 -> 3.09 us with it. A separate instantiation, not a run-time flag: the prologue's code
// changed ptxas's schedule of the row loop (4096 16-bit columns: 32 -> 50 registers, 5 instead of
// 8 blocks per SM, 18.8 -> 23.1 us), and capping it at 32 registers spilled.
//
// kSmallBlock (block mode, 16-bit rows of at most 4096 columns in 16-byte vectors, so 256 threads
// hold them at <= 16 elements each; grids of more than one wave, the launcher picks it): always 256
// threads, bounded at 8 blocks per SM, so ptxas keeps it at 32 registers (spill-free only with the
// stride a compile-time constant; fp32 at 16 elements spills 12 bytes, so fp32 keeps the general
// kernel), and each reduction takes one barrier (block_allreduce_one_barrier, the max by
// redux.sync) instead of two. H200, 4096x4096: 84.3 -> 85.6 % of the 1 GiB copy rate in bf16, 83.8 ->
// 85.0 % in fp16; compiled into the 1024-thread kernel the same reductions take it to 50 registers
// (docs/softmax.md).
inline constexpr int kSmallBlockThreads = 256;
inline constexpr int kSmallBlockElems = 16;

// The body of both kernels below (one row loop; kSmallBlock picks the reductions and the stride).
template <typename T, int kVec, int kVecsPerThread, bool kBlockPerRow, bool kPdlPrologue, bool kSmallBlock>
FC_DEVICE void row_in_registers(const T* x, T* y, float* lse, int64_t rows, int cols) {
  static_assert(!kSmallBlock || (kBlockPerRow && kVec * kVecsPerThread <= kSmallBlockElems),
                "small block: block mode, <= 16 elements per thread");
  constexpr int kSmallBlockWarps = kSmallBlockThreads / kWarpSize;
  // Block mode only. The small block's reductions take one barrier each, so its max and its sum
  // have their own slots: scratch[0, 8) and scratch[8, 16).
  __shared__ float scratch[kWarpSize];
  // A row group is the warp (step 5) or the block (step 6); `rank` is this thread's place in it.
  const int group_threads =
      kSmallBlock ? kSmallBlockThreads : (kBlockPerRow ? int(blockDim.x) : kWarpSize);
  const int rank = kBlockPerRow ? int(threadIdx.x) : int(threadIdx.x) % kWarpSize;
  const int groups_per_block = kBlockPerRow ? 1 : int(blockDim.x) / kWarpSize;
  const int group = kBlockPerRow ? 0 : int(threadIdx.x) / kWarpSize;
  const int64_t row_stride = int64_t(gridDim.x) * groups_per_block;
  if constexpr (kPdlPrologue) {
    static_assert(kBlockPerRow && kVec > 1, "the prologue prefetches one 16-byte aligned row per block");
    prefetch_row_to_l2(x + int64_t(blockIdx.x) * cols, uint32_t(cols) * uint32_t(sizeof(T)), rank == 0 && blockIdx.x < rows);
    allow_next_grid_to_start();
  }
  wait_for_previous_grid();

  for (int64_t row = int64_t(blockIdx.x) * groups_per_block + group; row < rows; row += row_stride) {
    const T* x_row = x + row * cols;
    T* y_row = y + row * cols;
    // Vector k of this thread starts at column (k * group_threads + rank) * kVec: consecutive
    // threads read consecutive vectors, so every load instruction of the group is coalesced.
    float values[kVecsPerThread][kVec];
    float row_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int col = (k * group_threads + rank) * kVec;
      if (col < cols) {  // cols % kVec == 0, so a vector is wholly inside the row or wholly past it
        load_pack<T, kVec>(x_row + col, values[k]);
      } else {
#pragma unroll
        for (int i = 0; i < kVec; ++i) values[k][i] = -INFINITY;  // padding: adds 0 to the sum
      }
#pragma unroll
      for (int i = 0; i < kVec; ++i) row_max = max_nan(row_max, values[k][i]);
    }
    // Both branches leave values[k][i] = exp(x - m) for some m, the row's statistics, and the factor
    // the write pass multiplies by to turn values into probabilities.
    RowStats stats;
    float factor;
    if constexpr (!kBlockPerRow) {
      // A warp's row: one reduction instead of two. Each lane first exponentiates against its OWN
      // max, the warp merges (max, sum) pairs (merge_stats rescales each sum to the row max), and
      // the write pass applies the lane's correction exp(lane_max - row_max) / row_sum: one
      // shuffle chain instead of two (H200, 1024x1024: 3.10 -> 2.88 us bf16). For a block's row
      // the same merge was slower (4096x4096 bf16: 19.2 -> 22.1 us), so blocks keep two plain
      // reductions below.
      const float lane_max = row_max;  // so far only this lane's share of the row
      float lane_sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kVecsPerThread; ++k) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          values[k][i] = exp_term(values[k][i], lane_max);  // padding (-inf) adds 0, even when lane_max is -inf
          lane_sum += values[k][i];
        }
      }
      stats = warp_allreduce(RowStats{lane_max, lane_sum}, MergeOp{});
      // An all -inf row: 0 * (1 / 0) = NaN, as torch gives; a NaN row max makes the factor NaN.
      factor = exp_term(lane_max, stats.max) * (1.0f / stats.sum);
    } else {
      if constexpr (kSmallBlock) {
        row_max = block_allreduce_one_barrier<kSmallBlockWarps>(warp_max(row_max), MaxOp{}, scratch);
      } else {
        row_max = block_allreduce(row_max, MaxOp{}, scratch);
      }

      // Keep exp(x - max) in the registers: the write pass then costs one multiply per element.
      // The max is the row's own, so no -inf guard is needed: only an all -inf row has
      // row_max = -inf, and its NaN sum gives the NaN row torch gives (lse_from_stats says -inf).
      float row_sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kVecsPerThread; ++k) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          values[k][i] = fast_exp(values[k][i] - row_max);
          row_sum += values[k][i];
        }
      }
      if constexpr (kSmallBlock) {
        // The next row's max goes into scratch only after this barrier, which every thread
        // reaches after reading this row's max from it.
        row_sum = block_allreduce_one_barrier<kSmallBlockWarps>(warp_allreduce(row_sum, SumOp{}), SumOp{},
                                                                scratch + kSmallBlockWarps);
      } else {
        row_sum = block_allreduce(row_sum, SumOp{}, scratch);
      }
      stats = {row_max, row_sum};
      factor = 1.0f / row_sum;
    }

#pragma unroll
    for (int k = 0; k < kVecsPerThread; ++k) {
      const int col = (k * group_threads + rank) * kVec;
      if (col < cols) {
#pragma unroll
        for (int i = 0; i < kVec; ++i) values[k][i] *= factor;
        store_pack<T, kVec>(y_row + col, values[k]);
      }
    }
    if (lse != nullptr && rank == 0) lse[row] = lse_from_stats(stats.max, stats.sum);
  }
}

// The general kernel (steps 5 and 6). Bounded by threads only: an explicit minimum of one block
// per SM (.minnctapersm 1) changed ptxas's allocation (16-bit rows of 4096 columns: 32 -> 40
// registers).
template <typename T, int kVec, int kVecsPerThread, bool kBlockPerRow, bool kPdlPrologue>
__global__ void __launch_bounds__(kMaxThreadsPerBlock) row_in_registers_kernel(const T* x, T* y, float* lse,
                                                                               int64_t rows, int cols) {
  row_in_registers<T, kVec, kVecsPerThread, kBlockPerRow, kPdlPrologue, false>(x, y, lse, rows, cols);
}

// The small-block kernel (step 6): 256 threads, 8 blocks per SM, so at most 32 registers.
template <typename T, int kVec, int kVecsPerThread>
__global__ void __launch_bounds__(kSmallBlockThreads, int(kMaxThreadsPerSm / kSmallBlockThreads))
    row_in_registers_small_block_kernel(const T* x, T* y, float* lse, int64_t rows, int cols) {
  row_in_registers<T, kVec, kVecsPerThread, /*kBlockPerRow=*/true, /*kPdlPrologue=*/false, true>(x, y, lse, rows,
                                                                                                   cols);
}

// Launches the smallest kVecsPerThread (a power of two) >= vecs_per_thread; `pdl_prologue` (block
// mode, 16-byte vectors) picks the kPdlPrologue instantiation.
template <typename T, int kVec, bool kBlockPerRow, int kVecsPerThread = 1>
Status launch_row_in_registers(const SoftmaxProblem& p, int vecs_per_thread, unsigned grid, int threads,
                               const char* name, bool pdl_prologue = false) {
  if constexpr (kVecsPerThread > kMaxVecsPerThread<kVec>) {
    return Status::Internal(std::string(name) + ": row does not fit in registers");
  } else {
    if (vecs_per_thread > kVecsPerThread) {
      return launch_row_in_registers<T, kVec, kBlockPerRow, kVecsPerThread * 2>(p, vecs_per_thread, grid, threads, name,
                                                                                 pdl_prologue);
    }
    const auto launch = [&](auto kernel, int block_threads) {
      return launch_softmax_kernel(name, kernel, grid, block_threads, 0, p.stream, p.programmatic_launch,
                                   static_cast<const T*>(p.x), static_cast<T*>(p.y), p.lse, p.rows, int(p.cols));
    };
    if constexpr (kBlockPerRow && kVec > 1) {
      if (pdl_prologue && p.programmatic_launch) {
        return launch(row_in_registers_kernel<T, kVec, kVecsPerThread, kBlockPerRow, true>, threads);
      }
    }
    if constexpr (kBlockPerRow && sizeof(T) == 2 && kVec > 1 && kVec * kVecsPerThread <= kSmallBlockElems) {
      if (threads <= kSmallBlockThreads) {
        // Always 256 threads: the kernel strides by that constant (fewer registers than blockDim).
        return launch(row_in_registers_small_block_kernel<T, kVec, kVecsPerThread>, kSmallBlockThreads);
      }
    }
    return launch(row_in_registers_kernel<T, kVec, kVecsPerThread, kBlockPerRow, false>, threads);
  }
}

// Calls fn(T{}, std::integral_constant<int, kVec>{}) with 16-byte vectors when the rows allow it.
template <typename Fn>
Status dispatch_dtype_and_vec(const SoftmaxProblem& p, Fn&& fn) {
  const bool vectorized = rows_are_vector_aligned(p);
  return dispatch_dtype(p.dtype, [&](auto tag) {
    using T = decltype(tag);
    return vectorized ? fn(T{}, std::integral_constant<int, kFullVec<T>>{}) : fn(T{}, std::integral_constant<int, 1>{});
  });
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace flashcore::softmax
