// GPU test helpers: skip with a clear reason where no CUDA device exists.
#pragma once

#include <string>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

namespace flashcore::testing {

// Empty when a device is usable, otherwise why not.
inline std::string gpu_unavailable_reason() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device (cudaGetDeviceCount: ") + cudaGetErrorString(err) + ")";
  }
  if (count == 0) return "no CUDA device on this machine";
  return "";
}

// Compute capability of device 0 as 10*major + minor (0 when none).
inline int gpu_compute_capability() {
  int major = 0, minor = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess) return 0;
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major * 10 + minor;
}

}  // namespace flashcore::testing

// First statement of every GPU test.
#define FC_REQUIRE_GPU()                                                              \
  do {                                                                                \
    const std::string fc_why_ = ::flashcore::testing::gpu_unavailable_reason();       \
    if (!fc_why_.empty()) GTEST_SKIP() << "GPU test skipped: " << fc_why_;            \
  } while (0)

#define FC_REQUIRE_SM(min_cc)                                                          \
  do {                                                                                 \
    FC_REQUIRE_GPU();                                                                  \
    const int fc_cc_ = ::flashcore::testing::gpu_compute_capability();                 \
    if (fc_cc_ < (min_cc)) GTEST_SKIP() << "GPU test skipped: needs sm_" << (min_cc)   \
                                        << ", device is sm_" << fc_cc_;                \
  } while (0)
