// Internal contract between the softmax API (softmax_api.cpp) and the kernel ladder (step*.cu).
// The API validates everything first; a launcher only checks what its own kernel needs.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "flashcore/softmax.hpp"

namespace flashcore::softmax {

// One validated call, device pointers.
struct SoftmaxProblem {
  const void* x = nullptr;
  void* y = nullptr;
  float* lse = nullptr;  // optional
  int64_t rows = 0;
  int64_t cols = 0;
  DType dtype = DType::kFloat32;
  cudaStream_t stream = nullptr;
  int sm_count = 0;  // of the current device
  int64_t max_shared_bytes_per_block = 0;  // of the current device, with the per-kernel opt-in
  bool programmatic_launch = false;  // the device has programmatic dependent launch (sm_90+)
};

inline constexpr int kVectorBytes = 16;  // one 128-bit load/store

// True when every row of x and y starts on a 16-byte boundary (so 16-byte vectors never straddle
// rows): both base pointers aligned and the row length a whole number of vectors.
bool rows_are_vector_aligned(const SoftmaxProblem& problem);

// The launchers, one per ladder step. Each returns a CUDA error status or Ok.
Status launch_shared_mem_reduction(const SoftmaxProblem& problem);  // step1_shared_mem_reduction.cu
Status launch_warp_shuffle(const SoftmaxProblem& problem);          // step2_warp_shuffle.cu
Status launch_vectorized(const SoftmaxProblem& problem);            // step3_vectorized.cu
Status launch_online(const SoftmaxProblem& problem);                // step4_online.cu
Status launch_row_per_warp(const SoftmaxProblem& problem);          // step5_row_per_warp.cu
Status launch_row_per_block(const SoftmaxProblem& problem);         // step6_row_per_block.cu
Status launch_multi_block(const SoftmaxProblem& problem);           // step7_multi_block.cu
Status launch_row_in_shared_mem(const SoftmaxProblem& problem);     // step8_row_in_shared_mem.cu

// The longest row (in bytes) kRowInSharedMem stages on this device: kSoftmaxRowInSharedMemMaxBytes
// or less where the device has less shared memory per block.
int64_t row_in_shared_mem_max_bytes(const SoftmaxProblem& problem);  // step8_row_in_shared_mem.cu

// The fp64 CPU path (softmax_cpu.cpp): host pointers, synchronous, any sizes.
void softmax_cpu(const void* x, void* y, float* lse, int64_t rows, int64_t cols, DType dtype);

}  // namespace flashcore::softmax
