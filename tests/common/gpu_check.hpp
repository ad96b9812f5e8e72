// Runs one TestCase on a GPU kernel path and judges it against the fp64 CPU reference — the check
// every GPU test of every path uses:
//   1. host tensors from make_problem (random normal * input_scale, fresh seed per case);
//   2. device copies; o and lse poisoned (NaN) on the device before the launch;
//   3. the path runs; every logical element of o and lse must be overwritten, padding untouched;
//   4. error vs fp64 (relative Frobenius and max-abs) within 2x the naive same-dtype baseline's
//      error (plus a tiny floor), LSE within a dtype-independent fp32 bound; NaN never passes.
#pragma once

#include <string>
#include <vector>

#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::testing {

// Device copies of a HostProblem's tensors, with params rewritten to point at them.
class DeviceProblem {
 public:
  explicit DeviceProblem(const HostProblem& host);
  ~DeviceProblem();
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  AttentionParams params;  // device pointers, the host problem's strides
  // Poisons o and lse on the device, then runs attention_forward with params.path = path.
  Status run(KernelPath path, cudaStream_t stream = nullptr);
  // Copies o and lse back (whole buffers, padding included).
  void download(std::vector<uint8_t>* o, std::vector<float>* lse) const;

 private:
  std::vector<void*> allocations_;
  void* o_ = nullptr;
  float* lse_ = nullptr;
  size_t o_bytes_ = 0, lse_count_ = 0;
  void* upload(const void* data, size_t bytes);
};

struct PathCheck {
  Status status;             // the launch's status
  ErrorStats out_error, lse_error, naive_error;
  Tolerance tolerance;
  double lse_tolerance = 0;
  int64_t unwritten_o = 0, unwritten_lse = 0, padding_written = 0;
  bool ok() const;
  std::string describe() const;  // everything above, for a failure message
};

// The whole check of one case on one path. The case must be small enough for the CPU reference.
PathCheck check_path(const TestCase& test_case, KernelPath path);

// Asserts check_path's verdict with the case's description on failure.
#define FC_EXPECT_PATH_MATCHES_REFERENCE(test_case, path)                                      \
  do {                                                                                         \
    const ::flashcore::testing::PathCheck fc_check_ = ::flashcore::testing::check_path(test_case, path); \
    EXPECT_TRUE(fc_check_.ok()) << (test_case).describe() << "\n" << fc_check_.describe();     \
  } while (0)

}  // namespace flashcore::testing

namespace flashcore::testing {

// For shapes too large for the CPU reference: runs `path` and `reference_path` (the naive GPU
// reference by default) on the same device inputs and compares them. The naive path itself is
// checked against the fp64 CPU reference on small shapes (tests/gpu/test_naive_gpu.cpp).
struct PathComparison {
  Status status, reference_status;
  ErrorStats error;        // path vs reference path
  int64_t unwritten_o = 0;
  std::string describe() const;
};
PathComparison compare_paths(const TestCase& test_case, KernelPath path,
                             KernelPath reference_path = KernelPath::kNaiveGpu);

}  // namespace flashcore::testing
