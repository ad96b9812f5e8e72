// flashcore standalone row softmax: y[r, :] = softmax(x[r, :]) for a dense row-major [rows, cols]
// tensor, plus the natural-log log-sum-exp of each row. Every variant computes in fp32 (the CPU path
// in fp64) and writes y in the input dtype.
//
// Special values follow torch.softmax: a NaN anywhere in a row makes the whole row NaN; a row of only
// -inf gives NaN (0/0); a +inf entry gives NaN for the whole row (inf - inf). The LSE follows
// torch.logsumexp: -inf for an all -inf row, +inf for a row holding +inf, NaN for a row holding NaN.
// docs/softmax.md describes the kernel ladder and what each step buys.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"

namespace flashcore {

// The kernel ladder, in the order it was built: each step changes one thing of the one before.
// Host pointers ignore the variant (beyond checking it is a known value) and run the fp64 CPU path.
enum class SoftmaxVariant : int {
  kAuto = 0,                // picks by cols, rows and alignment (see docs/softmax.md)
  kSharedMemReduction = 1,  // block per row, 3 passes, shared-memory tree reductions
  kWarpShuffle = 2,         // as 1, reductions through warp shuffles (one barrier per reduction)
  kVectorized = 3,          // as 2 with 16-byte loads/stores; needs 16-byte aligned rows of x and y
  kOnline = 4,              // one pass for the running (max, sum), one write pass; any alignment
  kRowPerWarp = 5,          // a warp per row, row held in registers: cols <= 1024
  kRowPerBlock = 6,         // a block per row, row held in registers: cols <= 32768
  kMultiBlock = 7,          // a row split over blocks, partial (max, sum) combined by a 2nd kernel
  kRowInSharedMem = 8,      // a block per row, row staged in shared memory: cols * dtype size <= 128 KiB
};

inline constexpr int kSoftmaxVariantCount = 9;

// Largest rows the register-resident variants hold.
inline constexpr int64_t kSoftmaxRowPerWarpMaxCols = 1024;
inline constexpr int64_t kSoftmaxRowPerBlockMaxCols = 32768;
// Largest row, in bytes (cols * dtype size), kRowInSharedMem stages: 32768 fp32 or 65536 fp16/bf16
// columns (less on a device with less shared memory per block).
inline constexpr int64_t kSoftmaxRowInSharedMemMaxBytes = 128 * 1024;

FLASHCORE_API const char* softmax_variant_name(SoftmaxVariant variant);

// x, y: [rows, cols] row-major, contiguous, of `dtype`, both host or both device memory. x == y
// (in place) is allowed; any other overlap is rejected. lse: [rows] float32 in the same memory, or
// null. rows >= 0, cols >= 1 when rows > 0. Device pointers run on `stream` (asynchronously); host
// pointers run the fp64 CPU path synchronously. On error nothing is written and the message names
// the argument and the rule.
FLASHCORE_API Status softmax_forward(const void* x, void* y, float* lse, int64_t rows, int64_t cols, DType dtype,
                       SoftmaxVariant variant = SoftmaxVariant::kAuto, cudaStream_t stream = nullptr);

// The variant softmax_forward would run for these arguments (kAuto resolved), or why the requested
// variant cannot run them. Host pointers resolve to kAuto (the CPU path). Writes nothing.
FLASHCORE_API Status softmax_select_variant(const void* x, const void* y, int64_t rows, int64_t cols, DType dtype,
                              SoftmaxVariant requested, SoftmaxVariant* chosen);

}  // namespace flashcore
