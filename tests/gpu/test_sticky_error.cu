// After a kernel fault the CUDA context is unusable ("sticky" error): the library reports a CudaError
// naming it instead of taking device pointers for host memory (which would run the CPU reference on
// device addresses). Runs in a child process (gtest death-test machinery, re-executing this test
// alone), since the fault poisons the process's context. Also: a tensor on another device than the
// current one is an InvalidArgument naming it (needs two GPUs).
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/gpu.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

__global__ void write_through_bad_pointer(int* p) { *p = 1; }

AttentionParams small_call(void* q, void* k, void* v, void* o) {
  AttentionParams p;
  p.q = q, p.k = k, p.v = v, p.o = o;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 8, p.heads_q = p.heads_kv = 1, p.head_dim_qk = p.head_dim_v = 64;
  p.dtype = DType::kFloat16;
  set_dense_strides(p);
  return p;
}

// The child's whole run: allocate, fault, call; exit 0 only if the call reported a CudaError.
[[noreturn]] void fault_then_call() {
  void* buf = nullptr;
  if (cudaMalloc(&buf, 4 * 8 * 64 * 2) != cudaSuccess) std::exit(3);
  char* base = static_cast<char*>(buf);
  const AttentionParams p = small_call(base, base + 1024, base + 2048, base + 3072);
  write_through_bad_pointer<<<1, 1>>>(reinterpret_cast<int*>(uintptr_t(0x10)));
  cudaDeviceSynchronize();  // the fault: the context is now unusable
  const Status st = attention_forward(p);
  std::fprintf(stderr, "status %s: %s\n", status_code_name(st.code), st.message.c_str());
  std::exit(st.code == StatusCode::kCudaError ? 0 : 1);
}

TEST(StickyCudaError, IsReportedAsACudaErrorNotTakenForHostMemory) {
  FC_REQUIRE_GPU();
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_EXIT(fault_then_call(), ::testing::ExitedWithCode(0), "status CUDA error");
}

TEST(DevicePlacement, ATensorOnAnotherDeviceIsRefusedByName) {
  FC_REQUIRE_GPU();
  int count = 0;
  cudaGetDeviceCount(&count);
  if (count < 2) GTEST_SKIP() << "needs two GPUs (this machine has " << count << ")";
  void* on0 = nullptr;
  void* on1 = nullptr;
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on1, 8 * 64 * 2), cudaSuccess);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&on0, 3 * 8 * 64 * 2), cudaSuccess);
  char* base = static_cast<char*>(on0);
  const AttentionParams p = small_call(base, base + 1024, base + 2048, on1);
  const Status st = attention_forward(p);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_NE(st.message.find("o: lives on device 1"), std::string::npos) << st.message;
  cudaFree(on0);
  cudaSetDevice(1);
  cudaFree(on1);
  cudaSetDevice(0);
}

}  // namespace
}  // namespace flashcore
