// attention_with_kvcache on device pointers against the same call on host pointers (tests/cpu/
// test_kvcache.cpp checks the host against a hand-written cache and the CPU reference): the caches
// after the append must be bitwise equal (same rotation rules, rotary.hpp), the output within
// max-abs 1e-2 * max|o| (fp16), 3e-2 (bf16), 1e-4 (fp32). Also: no host sync when metadata is
// trusted (a CUDA graph captures the whole call), and the clamp of unchecked cache_seqlens.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/gpu.hpp"
#include "cpu/kvcache_case.hpp"
#include "flashcore/flashcore.hpp"

namespace {

using flashcore::DType;
using flashcore::KvCacheParams;
using flashcore::Status;
using namespace flashcore::testing::kv;

#define FC_ASSERT_CUDA(call)                                                   \
  do {                                                                         \
    const cudaError_t fc_e_ = (call);                                          \
    ASSERT_EQ(fc_e_, cudaSuccess) << #call << ": " << cudaGetErrorString(fc_e_); \
  } while (0)

// Device copies of a fixture's buffers, and its params pointing at them.
class DeviceFixture {
 public:
  explicit DeviceFixture(const Fixture& f) : params(f.params) {
    flashcore::AttentionParams& a = params.attention;
    a.q = upload(f.q);
    a.k = k_ = upload(f.k_store);
    a.v = v_ = upload(f.v_store);
    a.o = o_ = upload(f.o);
    a.lse = static_cast<float*>(lse_ = upload(f.lse));
    if (a.block_table != nullptr) a.block_table = static_cast<const int32_t*>(upload(f.block_table));
    if (a.kv_batch_idx != nullptr) a.kv_batch_idx = static_cast<const int32_t*>(upload(f.kv_batch_idx));
    if (a.leftpad_k != nullptr) a.leftpad_k = static_cast<const int32_t*>(upload(f.leftpad));
    if (params.cache_seqlens != nullptr) params.cache_seqlens = static_cast<const int32_t*>(upload(f.cache_seqlens));
    if (params.k_new != nullptr) params.k_new = upload(f.k_new), params.v_new = upload(f.v_new);
    if (params.rotary_cos != nullptr) params.rotary_cos = upload(f.cos), params.rotary_sin = upload(f.sin);
    k_bytes_ = f.k_store.size(), v_bytes_ = f.v_store.size(), o_bytes_ = f.o.size(), lse_count_ = f.lse.size();
    // A pageable cudaMemcpy may return before its DMA lands, and the calls run on non-blocking
    // streams, which do not wait for the legacy stream: finish the uploads first.
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  ~DeviceFixture() {
    for (void* p : allocations_) cudaFree(p);
  }
  DeviceFixture(const DeviceFixture&) = delete;
  DeviceFixture& operator=(const DeviceFixture&) = delete;

  void download(std::vector<uint8_t>* k, std::vector<uint8_t>* v, std::vector<uint8_t>* o, std::vector<float>* lse) {
    k->resize(k_bytes_), v->resize(v_bytes_), o->resize(o_bytes_), lse->resize(lse_count_);
    EXPECT_EQ(cudaMemcpy(k->data(), k_, k_bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(v->data(), v_, v_bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(o->data(), o_, o_bytes_, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(lse->data(), lse_, lse_count_ * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  }

  KvCacheParams params;

 private:
  template <class T>
  void* upload(const std::vector<T>& host) {
    void* d = nullptr;
    const size_t bytes = std::max<size_t>(host.size() * sizeof(T), 4);
    EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
    if (!host.empty()) EXPECT_EQ(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    allocations_.push_back(d);
    return d;
  }
  std::vector<void*> allocations_;
  void *k_ = nullptr, *v_ = nullptr, *o_ = nullptr, *lse_ = nullptr;
  size_t k_bytes_ = 0, v_bytes_ = 0, o_bytes_ = 0, lse_count_ = 0;
};

double tolerance(DType dtype) {
  return dtype == DType::kFloat16 ? 1e-2 : dtype == DType::kBFloat16 ? 3e-2 : 1e-4;
}

enum class Launch { kChecked, kTrusted, kGraph };

// Runs the case on the host and on the device and compares.
void expect_device_matches_host(const KvCase& kc, Launch launch = Launch::kChecked) {
  SCOPED_TRACE(kc.describe());
  Fixture host;
  make_fixture(kc, host);
  DeviceFixture device(host);  // uploads the untouched inputs
  const Status host_status = flashcore::attention_with_kvcache(host.params);
  ASSERT_TRUE(host_status.ok()) << host_status.message;

  cudaStream_t stream = nullptr;
  FC_ASSERT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  device.params.attention.check_device_metadata = launch == Launch::kChecked;
  if (launch == Launch::kGraph) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    FC_ASSERT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    const Status st = flashcore::attention_with_kvcache(device.params, stream);
    FC_ASSERT_CUDA(cudaStreamEndCapture(stream, &graph));
    ASSERT_TRUE(st.ok()) << st.message;
    FC_ASSERT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    FC_ASSERT_CUDA(cudaGraphLaunch(exec, stream));
    FC_ASSERT_CUDA(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  } else {
    const Status st = flashcore::attention_with_kvcache(device.params, stream);
    ASSERT_TRUE(st.ok()) << st.message;
    FC_ASSERT_CUDA(cudaStreamSynchronize(stream));
  }
  cudaStreamDestroy(stream);

  std::vector<uint8_t> k, v, o;
  std::vector<float> lse;
  device.download(&k, &v, &o, &lse);
  EXPECT_EQ(count_differences(k, host.k_store), 0) << "k cache differs from the host append";
  EXPECT_EQ(count_differences(v, host.v_store), 0) << "v cache differs from the host append";
  const MaxAbs err = max_abs_error(to_doubles(o, kc.dtype), to_doubles(host.o, kc.dtype));
  EXPECT_LE(err.error, tolerance(kc.dtype) * err.ref) << "o max-abs error " << err.error << ", max|o| " << err.ref;
}

KvCase paged_case(int page_size) {
  KvCase c;
  c.batch = 3;
  c.heads_q = 8, c.heads_kv = 2;
  c.layout = CacheLayout::kPaged;
  c.page_size = page_size;
  c.capacity = 2 * page_size + 5;
  c.cache_seqlens = {page_size - 2, 2 * page_size - 1, 0};
  c.seqlen_new = 4, c.seqlen_q = 4;
  c.causal = true;
  c.rotary_dim = 32;
  c.seed = uint64_t(page_size) + 7;
  return c;
}

TEST(KvCacheGpu, DenseCacheAppendsOneTokenToGqaHeads) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.heads_q = 8, c.heads_kv = 2;
  c.cache_seqlens = {5, 17};
  expect_device_matches_host(c);
}

TEST(KvCacheGpu, DenseCacheAppendsFourTokensWithNeoxRotaryUnderACausalMask) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.cache_seqlens = {0, 30};
  c.seqlen_new = 4, c.seqlen_q = 4;
  c.causal = true;
  c.rotary_dim = 32;
  expect_device_matches_host(c);
}

TEST(KvCacheGpu, WithoutNewKeysAttendsTheCachedRowsOnly) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.cache_seqlens = {0, 12};
  c.seqlen_new = 0;
  c.rotary_dim = 64;
  c.interleaved = true;
  expect_device_matches_host(c);
}

TEST(KvCacheGpu, BatchIndexedBf16CacheWithInterleavedRotary) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.batch = 3;
  c.layout = CacheLayout::kBatchIndexed;
  c.cache_seqlens = {3, 20, 9};
  c.seqlen_new = 4;
  c.dtype = DType::kBFloat16;
  c.rotary_dim = 64;
  c.interleaved = true;
  expect_device_matches_host(c);
}

TEST(KvCacheGpu, PagedCacheWithShuffledPagesOf16Rows) {
  FC_REQUIRE_SM(80);
  expect_device_matches_host(paged_case(16));
}
TEST(KvCacheGpu, PagedCacheWithShuffledPagesOf64Rows) {
  FC_REQUIRE_SM(80);
  expect_device_matches_host(paged_case(64));
}
TEST(KvCacheGpu, PagedCacheWithShuffledPagesOf256Rows) {
  FC_REQUIRE_SM(80);
  expect_device_matches_host(paged_case(256));
}

TEST(KvCacheGpu, LeftPaddedPagedCache) {
  FC_REQUIRE_SM(80);
  KvCase c = paged_case(16);
  c.leftpad = {5, 17, 0};
  expect_device_matches_host(c);
}

TEST(KvCacheGpu, Fp32CacheWithAWindow) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.dtype = DType::kFloat32;
  c.cache_seqlens = {9, 2};
  c.seqlen_new = 1, c.seqlen_q = 3;
  c.window_left = 5;
  c.rotary_dim = 16;
  expect_device_matches_host(c);
}

TEST(KvCacheGpu, TrustedMetadataRunsWithoutChecks) {
  FC_REQUIRE_SM(80);
  expect_device_matches_host(paged_case(16), Launch::kTrusted);
}

TEST(KvCacheGpu, ACudaGraphCapturesTheWholeDecodeStep) {
  FC_REQUIRE_SM(80);
  KvCase c = paged_case(16);
  c.seqlen_new = 1, c.seqlen_q = 1;
  expect_device_matches_host(c, Launch::kGraph);
}

TEST(KvCacheGpu, ACudaGraphCapturesADenseDecodeStepWithoutRotary) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.heads_q = 8, c.heads_kv = 2;
  c.cache_seqlens = {5, 17};
  expect_device_matches_host(c, Launch::kGraph);
}

TEST(KvCacheGpu, UncheckedRowsPastTheCacheAreNotWritten) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.capacity = 24;
  c.cache_seqlens = {22, 3};  // entry 0: rows 22, 23 fit, 24 and 25 do not
  c.seqlen_new = 4;
  Fixture f;
  make_fixture(c, f);
  std::vector<uint8_t> k_expected = f.k_store, v_expected = f.v_store;
  const int64_t row_k = int64_t(c.heads_kv) * c.head_dim_qk * f.elem, row_v = int64_t(c.heads_kv) * c.head_dim_v * f.elem;
  for (int b = 0; b < c.batch; ++b) {
    for (int i = 0; i < c.seqlen_new; ++i) {
      const int64_t row = c.cache_seqlens[size_t(b)] + i;
      if (row >= c.capacity) continue;
      const int64_t src = int64_t(b) * c.seqlen_new + i, dst = int64_t(b) * c.capacity + row;
      std::copy_n(f.k_new.begin() + src * row_k, row_k, k_expected.begin() + dst * row_k);
      std::copy_n(f.v_new.begin() + src * row_v, row_v, v_expected.begin() + dst * row_v);
    }
  }
  EXPECT_FALSE(flashcore::validate_kvcache(f.params).ok());  // checked: an error
  DeviceFixture device(f);
  device.params.attention.check_device_metadata = false;  // unchecked: clamped
  const Status st = flashcore::attention_with_kvcache(device.params);
  ASSERT_TRUE(st.ok()) << st.message;
  FC_ASSERT_CUDA(cudaDeviceSynchronize());
  std::vector<uint8_t> k, v, o;
  std::vector<float> lse;
  device.download(&k, &v, &o, &lse);
  EXPECT_EQ(count_differences(k, k_expected), 0);
  EXPECT_EQ(count_differences(v, v_expected), 0);
  for (size_t i = 0; i < o.size(); i += size_t(f.elem)) {
    ASSERT_TRUE(std::isfinite(flashcore::load_as_float(o.data(), int64_t(i) / f.elem, c.dtype))) << "o[" << i << "]";
  }
}

TEST(KvCacheGpu, DeviceValidationNamesTheBadEntry) {
  FC_REQUIRE_SM(80);
  KvCase c;
  c.cache_seqlens = {5, 40};  // 40 + 1 > 40
  Fixture f;
  make_fixture(c, f);
  DeviceFixture device(f);
  const Status st = flashcore::attention_with_kvcache(device.params);
  EXPECT_EQ(st.code, flashcore::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message.find("cache_seqlens[1]"), std::string::npos) << st.message;
}

}  // namespace
