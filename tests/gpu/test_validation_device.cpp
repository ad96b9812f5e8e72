// Validation rules that need device memory (docs/validation.md): cu_seqlens/seqused_k contents read
// from the device, the content check skipped while a stream captures a graph (without breaking the
// capture), placement of the small arrays, null k/v when there are no keys.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/gpu.hpp"
#include "flashcore/flashcore.hpp"

namespace {

using flashcore::AttentionParams;
using flashcore::Status;
using flashcore::StatusCode;

constexpr uint8_t kPoison = 0xA5;

#define ASSERT_CUDA(call) ASSERT_EQ((call), cudaSuccess) << #call

// Device copies of a small fp16 problem (B=2, Sq=5, Sk=7, Hq=4, Hkv=2, D=16): one allocation,
// one 16 KiB slot per array, all bytes poisoned except the int arrays written by the test.
class DeviceProblem {
 public:
  enum Slot { kQ, kK, kV, kO, kLse, kCuQ, kCuK, kSeqused, kSlotCount };
  static constexpr size_t kSlotBytes = 16384;

  DeviceProblem() {
    if (cudaMalloc(&base_, kSlotCount * kSlotBytes) != cudaSuccess) return;
    cudaMemset(base_, kPoison, kSlotCount * kSlotBytes);
    cudaDeviceSynchronize();
    AttentionParams& p = params;
    p.batch = 2; p.seqlen_q = 5; p.seqlen_k = 7; p.heads_q = 4; p.heads_kv = 2;
    p.head_dim_qk = p.head_dim_v = 16;
    p.q = slot(kQ); p.k = slot(kK); p.v = slot(kV); p.o = slot(kO);
    p.lse = reinterpret_cast<float*>(slot(kLse));
    flashcore::set_dense_strides(p);
  }
  ~DeviceProblem() { cudaFree(base_); }
  DeviceProblem(const DeviceProblem&) = delete;
  DeviceProblem& operator=(const DeviceProblem&) = delete;

  bool allocated() const { return base_ != nullptr; }
  uint8_t* slot(Slot s) { return static_cast<uint8_t*>(base_) + s * kSlotBytes; }
  const int32_t* write_ints(Slot s, const std::vector<int32_t>& values) {
    cudaMemcpy(slot(s), values.data(), values.size() * sizeof(int32_t), cudaMemcpyHostToDevice);
    return reinterpret_cast<const int32_t*>(slot(s));
  }
  // Varlen: q sequences {5, 4}, k sequences {7, 3}, with the given cu_seqlens_q contents.
  void make_varlen(const std::vector<int32_t>& cu_q) {
    params.cu_seqlens_q = write_ints(kCuQ, cu_q);
    params.cu_seqlens_k = write_ints(kCuK, {0, 7, 10});
    params.total_q = 9;
    params.total_k = 10;
    flashcore::set_dense_strides(params);
  }
  bool outputs_poisoned() {
    std::vector<uint8_t> bytes(2 * kSlotBytes);
    if (cudaMemcpy(bytes.data(), slot(kO), bytes.size(), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    for (uint8_t b : bytes) {
      if (b != kPoison) return false;
    }
    return true;
  }

  AttentionParams params;

 private:
  void* base_ = nullptr;
};

TEST(ValidationDevice, ChecksDeviceCuSeqlensContents) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  prob.make_varlen({0, 5, 4});
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  const Status status = flashcore::attention_forward(prob.params, stream);
  EXPECT_EQ(status.code, StatusCode::kInvalidArgument) << status.message;
  EXPECT_NE(status.message.find("cu_seqlens_q[2]: must be >= cu_seqlens_q[1] (got 4 < 5)"), std::string::npos)
      << status.message;
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  EXPECT_TRUE(prob.outputs_poisoned()) << "a rejected call wrote o or lse";
  prob.make_varlen({0, 5, 9});
  EXPECT_TRUE(flashcore::validate(prob.params, stream).ok()) << flashcore::validate(prob.params, stream).message;
  cudaStreamDestroy(stream);
}

TEST(ValidationDevice, ChecksDeviceSequsedKContents) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  prob.params.seqused_k = prob.write_ints(DeviceProblem::kSeqused, {3, 9});  // seqlen_k = 7
  const Status status = flashcore::validate(prob.params);
  EXPECT_EQ(status.code, StatusCode::kInvalidArgument) << status.message;
  EXPECT_NE(status.message.find("seqused_k[1]: must be in [0, 7]"), std::string::npos) << status.message;
}

// While capturing, validate() may not copy: it skips the content check and must leave the capture
// valid (cudaStreamEndCapture succeeds), in both capture modes.
TEST(ValidationDevice, SkipsContentCheckWhileCapturingAndKeepsTheCaptureValid) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  prob.make_varlen({0, 5, 4});  // invalid contents, unseen during capture
  for (cudaStreamCaptureMode mode : {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal}) {
    cudaStream_t stream = nullptr;
    ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    ASSERT_CUDA(cudaStreamBeginCapture(stream, mode));
    const Status status = flashcore::validate(prob.params, stream);
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream, &graph);
    EXPECT_TRUE(status.ok()) << "mode " << int(mode) << ": " << status.message;
    EXPECT_EQ(end, cudaSuccess) << "mode " << int(mode) << ": validate() invalidated the capture: "
                                << cudaGetErrorString(end);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    cudaStreamDestroy(stream);
  }
}

TEST(ValidationDevice, RejectsPageableCuSeqlensWithDeviceQ) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  prob.make_varlen({0, 5, 9});
  const std::vector<int32_t> host_cu_k = {0, 7, 10};
  prob.params.cu_seqlens_k = host_cu_k.data();
  const Status status = flashcore::attention_forward(prob.params);
  EXPECT_EQ(status.code, StatusCode::kInvalidArgument) << status.message;
  EXPECT_NE(status.message.find("cu_seqlens_k: must be device-accessible memory"), std::string::npos)
      << status.message;
  EXPECT_TRUE(prob.outputs_poisoned());
}

TEST(ValidationDevice, RejectsDeviceCuSeqlensWithHostQ) {
  FC_REQUIRE_GPU();
  DeviceProblem dev;
  ASSERT_TRUE(dev.allocated());
  dev.make_varlen({0, 5, 9});
  alignas(64) static uint16_t q[9 * 4 * 16], k[10 * 2 * 16], v[10 * 2 * 16], o[9 * 4 * 16];
  AttentionParams p = dev.params;
  p.q = q; p.k = k; p.v = v; p.o = o; p.lse = nullptr;
  const Status status = flashcore::validate(p);
  EXPECT_EQ(status.code, StatusCode::kInvalidArgument) << status.message;
  EXPECT_NE(status.message.find("cu_seqlens_q: must be host memory when q is host memory"), std::string::npos)
      << status.message;
}

// Sk = 0: k and v may be null; every row gets o = 0 and lse = -inf (docs/semantics.md).
TEST(ValidationDevice, NoKeysWithNullKAndVRunsAndGivesEmptyRows) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  prob.params.seqlen_k = 0;
  prob.params.k = nullptr;
  prob.params.v = nullptr;
  flashcore::set_dense_strides(prob.params);
  ASSERT_TRUE(flashcore::validate(prob.params).ok()) << flashcore::validate(prob.params).message;
  const Status status = flashcore::attention_forward(prob.params);
  ASSERT_TRUE(status.ok()) << status.message;
  ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> o(2 * 5 * 4 * 16);
  std::vector<float> lse(2 * 4 * 5);
  ASSERT_CUDA(cudaMemcpy(o.data(), prob.params.o, o.size() * 2, cudaMemcpyDeviceToHost));
  ASSERT_CUDA(cudaMemcpy(lse.data(), prob.params.lse, lse.size() * 4, cudaMemcpyDeviceToHost));
  for (uint16_t bits : o) ASSERT_EQ(bits & 0x7fff, 0) << "o must be 0 for a row with no key";
  for (float x : lse) ASSERT_TRUE(std::isinf(x) && x < 0) << "lse must be -inf for a row with no key";
}

}  // namespace

namespace deferred {

// check_device_metadata off: no sync. The device check records the malformed cu_seqlens_q; the next
// call reports it and runs nothing, once; check_errors() reports the next problem after waiting for
// the stream. The malformed calls themselves stay inside their tensors (the kernels clamp every
// length; this suite runs under compute-sanitizer memcheck in scripts/device-check.sh).
TEST(ValidationDevice, NoSyncVarlenReportsMalformedCuSeqlensOnTheNextCall) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreate(&stream));
  ASSERT_TRUE(flashcore::check_errors(stream).ok());  // nothing pending from earlier tests
  prob.make_varlen({0, 5, 4});  // decreasing
  prob.params.check_device_metadata = false;
  const Status bad = flashcore::attention_forward(prob.params, stream);
  EXPECT_TRUE(bad.ok()) << "no sync: the call itself cannot know: " << bad.message;
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  prob.make_varlen({0, 5, 9});
  ASSERT_CUDA(cudaMemset(prob.slot(DeviceProblem::kO), kPoison, 2 * DeviceProblem::kSlotBytes));
  const Status next = flashcore::attention_forward(prob.params, stream);
  EXPECT_EQ(next.code, StatusCode::kInvalidArgument) << next.message;
  EXPECT_NE(next.message.find("cu_seqlens_q[2]: must be >= cu_seqlens_q[1] (got 4 < 5)"), std::string::npos)
      << next.message;
  ASSERT_CUDA(cudaStreamSynchronize(stream));
  EXPECT_TRUE(prob.outputs_poisoned()) << "the call that reported an earlier problem wrote o or lse";
  const Status after = flashcore::attention_forward(prob.params, stream);
  EXPECT_TRUE(after.ok()) << "reported once: " << after.message;

  prob.make_varlen({0, 5, 30});  // past total_q = 9 (and within max_seqlen_q below)
  prob.params.check_device_metadata = false;
  prob.params.seqlen_q = 40;
  EXPECT_TRUE(flashcore::attention_forward(prob.params, stream).ok());
  const Status checked = flashcore::check_errors(stream);
  EXPECT_EQ(checked.code, StatusCode::kInvalidArgument) << checked.message;
  EXPECT_NE(checked.message.find("cu_seqlens_q[2]: must be <= total_q (got 30 > 9)"), std::string::npos)
      << checked.message;
  EXPECT_TRUE(flashcore::check_errors(stream).ok());
  cudaStreamDestroy(stream);
}

// A captured varlen call (whose arrays validate() cannot read during capture) is checked on the
// device at every replay: the malformed seqused_k of the captured call is reported after a replay.
TEST(ValidationDevice, CapturedVarlenCallsAreCheckedOnTheDeviceAtReplay) {
  FC_REQUIRE_GPU();
  DeviceProblem prob;
  ASSERT_TRUE(prob.allocated());
  cudaStream_t stream = nullptr;
  ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  ASSERT_TRUE(flashcore::check_errors(stream).ok());
  prob.make_varlen({0, 5, 9});
  prob.params.seqused_k = prob.write_ints(DeviceProblem::kSeqused, {3, 8});  // sequence 1 has 3 keys
  ASSERT_CUDA(cudaDeviceSynchronize());  // the pageable uploads above, before a non-blocking stream reads
  ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status captured = flashcore::attention_forward(prob.params, stream);
  cudaGraph_t graph = nullptr;
  ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(captured.ok()) << captured.message;
  cudaGraphExec_t exec = nullptr;
  ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  ASSERT_CUDA(cudaGraphLaunch(exec, stream));
  const Status replayed = flashcore::check_errors(stream);
  EXPECT_EQ(replayed.code, StatusCode::kInvalidArgument) << replayed.message;
  EXPECT_NE(replayed.message.find("seqused_k[1]: must be in [0, 3]"), std::string::npos) << replayed.message;
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace deferred
