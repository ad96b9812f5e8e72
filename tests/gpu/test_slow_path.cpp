// No silent slow path (flashcore.hpp, SlowPathPolicy; api/realign.hpp): calls that only their
// operands' layout keeps off the fused kernels run on aligned copies (so strict mode accepts them);
// calls no fused kernel takes warn once per reason, or fail in strict mode writing nothing; asking for
// the naive path by name is never warned about.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

using testing::Layout;
using testing::TestCase;

// Sets the policy (and a counting handler) for one test, restoring the defaults after it.
std::atomic<int> g_warnings{0};
std::string g_last_warning;
void count_warning(const char* message) {
  g_last_warning = message;
  ++g_warnings;
}
class PolicyScope {
 public:
  explicit PolicyScope(SlowPathPolicy policy) : saved_(slow_path_policy()) {
    set_slow_path_policy(policy);
    set_slow_path_handler(&count_warning);
    g_warnings = 0;
  }
  ~PolicyScope() {
    set_slow_path_policy(saved_);
    set_slow_path_handler(nullptr);
  }

 private:
  SlowPathPolicy saved_;
};

// The path auto dispatch picks for a call of these head dims and dtype with aligned, contiguous
// tensors on this device: the fused kernels of this build that realigned copies can reach.
KernelPath aligned_path(int dqk, int dv, DType dtype, bool varlen = false) {
  void* buf = nullptr;
  if (cudaMalloc(&buf, 1 << 20) != cudaSuccess) return KernelPath::kAuto;
  static int32_t* cu = nullptr;
  AttentionParams p;
  p.batch = 2, p.seqlen_q = 64, p.seqlen_k = 64, p.heads_q = 2, p.heads_kv = 2;
  p.head_dim_qk = dqk, p.head_dim_v = dv, p.dtype = dtype;
  p.q = p.k = p.v = p.o = buf;
  set_dense_strides(p);
  if (varlen) {
    cu = static_cast<int32_t*>(buf);
    p.cu_seqlens_q = p.cu_seqlens_k = cu, p.total_q = p.total_k = 64;
  }
  KernelPath chosen = KernelPath::kAuto;
  const Status st = select_path(p, &chosen);
  cudaFree(buf);
  return st.ok() ? chosen : KernelPath::kAuto;
}
bool fused(KernelPath path) { return path == KernelPath::kSm90 || path == KernelPath::kSm80 || path == KernelPath::kDecode; }

// Strict mode, so that a call the realigned copies do not bring onto a fused kernel fails: odd
// strides (odd-BSHD: no 16-byte access anywhere) and head dims that are not multiples of 8 (36,
// 20 and 44/20: padded to 40 / 24 / 48/24 in the copies, zero columns), dense, causal with GQA,
// varlen; every output element written and within tolerance of the fp64 reference.
TEST(SlowPath, MisalignedOperandsRunFusedOnAlignedCopiesEvenInStrictMode) {
  FC_REQUIRE_SM(80);
  PolicyScope strict(SlowPathPolicy::kError);
  struct Shape {
    int dqk, dv;
    Layout layout;
    bool varlen;
  };
  const Shape shapes[] = {{128, 128, Layout::kOddBSHD, false}, {64, 64, Layout::kOddBSHD, true},
                          {36, 36, Layout::kBSHD, false},      {44, 20, Layout::kBSHD, false},
                          {20, 20, Layout::kOddBSHD, false}};
  int ran = 0;
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (const Shape& s : shapes) {
      const int dqk8 = (s.dqk + 7) / 8 * 8, dv8 = (s.dv + 7) / 8 * 8;
      const KernelPath path = aligned_path(dqk8, dv8, dtype, s.varlen);
      if (!fused(path)) {
        std::printf("[slow-path] no fused kernel in this build for %d/%d %s: not run\n", dqk8, dv8, dtype_name(dtype));
        continue;
      }
      TestCase tc;
      tc.head_dim_qk = s.dqk, tc.head_dim_v = s.dv, tc.dtype = dtype, tc.layout = s.layout;
      tc.heads_q = 4, tc.heads_kv = 2, tc.causal = true, tc.seed = 4242u + uint64_t(s.dqk);
      // Large enough for the copies to pay (smaller calls run on the naive kernel: realign.cu).
      if (s.varlen) {
        tc.varlen_q = {700, 1, 900};
        tc.varlen_k = {900, 5, 1200};
      } else {
        tc.batch = 2, tc.seqlen_q = 500, tc.seqlen_k = 900;
      }
      FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kAuto);
      ++ran;
    }
  }
  EXPECT_EQ(g_warnings.load(), 0) << g_last_warning;
  if (ran == 0) GTEST_SKIP() << "no fused kernel in this build for these head dims";
}

// A misaligned call too small for the copies to pay runs on the naive kernel, its fastest way: no
// warning, and strict mode accepts it.
TEST(SlowPath, SmallMisalignedCallsRunNaiveWithoutWarningEvenInStrictMode) {
  FC_REQUIRE_SM(80);
  if (!fused(aligned_path(64, 64, DType::kBFloat16))) GTEST_SKIP() << "no fused d64 bf16 kernel in this build";
  PolicyScope strict(SlowPathPolicy::kError);
  TestCase tc;
  tc.head_dim_qk = tc.head_dim_v = 64, tc.dtype = DType::kBFloat16, tc.layout = Layout::kOddBSHD;
  tc.batch = 1, tc.seqlen_q = 16, tc.seqlen_k = 40, tc.heads_q = 2, tc.heads_kv = 2, tc.seed = 5;
  FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kAuto);
  EXPECT_EQ(g_warnings.load(), 0) << g_last_warning;
}

// fp32 head dim 264: no fused kernel takes it (the sm80 path's fp32 stops at 256, the sm90 path has no
// fp32). Strict: Unsupported, naming strict mode and the paths' reasons, with every output element
// still poisoned. Warn: runs (and matches the reference), the handler hears once for two identical
// calls. path = naive: neither.
TEST(SlowPath, StrictRefusesTheNaiveFallbackWarnRunsItAndWarnsOnce) {
  FC_REQUIRE_SM(80);
  TestCase tc;
  tc.head_dim_qk = tc.head_dim_v = 264, tc.dtype = DType::kFloat32;
  tc.batch = 1, tc.seqlen_q = 33, tc.seqlen_k = 65, tc.heads_q = 2, tc.heads_kv = 1, tc.seed = 9;
  {
    PolicyScope strict(SlowPathPolicy::kError);
    testing::HostProblem host = testing::make_problem(tc);
    testing::DeviceProblem device(host);
    const Status st = device.run(KernelPath::kAuto);
    EXPECT_EQ(st.code, StatusCode::kUnsupported);
    EXPECT_NE(st.message.find("strict mode"), std::string::npos) << st.message;
    EXPECT_NE(st.message.find("sm80:"), std::string::npos) << st.message;
    std::vector<uint8_t> o;
    std::vector<float> lse;
    device.download(&o, &lse);
    EXPECT_EQ(testing::count_unwritten_output(host, o.data()), int64_t(tc.seqlen_q) * tc.heads_q * tc.head_dim_v);
    // Asked for by name, the naive path runs in strict mode too.
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kNaiveGpu);
  }
  {
    PolicyScope warn(SlowPathPolicy::kWarn);
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kAuto);
    FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kAuto);
    // (Another test in this process may have warned about these reasons already: at most once.)
    EXPECT_LE(g_warnings.load(), 1);
    TestCase other = tc;
    other.head_dim_qk = other.head_dim_v = 272;  // new reasons: a new warning
    FC_EXPECT_PATH_MATCHES_REFERENCE(other, KernelPath::kAuto);
    EXPECT_GE(g_warnings.load(), 1);
    EXPECT_NE(g_last_warning.find("naive reference kernel"), std::string::npos) << g_last_warning;
    EXPECT_NE(g_last_warning.find("272"), std::string::npos) << g_last_warning;
    const int before = g_warnings.load();
    FC_EXPECT_PATH_MATCHES_REFERENCE(other, KernelPath::kNaiveGpu);
    EXPECT_EQ(g_warnings.load(), before);
  }
}

// The backward's fallback obeys the same policy: d264 has no fused backward.
TEST(SlowPath, StrictRefusesTheNaiveBackward) {
  FC_REQUIRE_SM(80);
  PolicyScope strict(SlowPathPolicy::kError);
  const int B = 1, S = 16, H = 1, D = 264;
  const size_t elems = size_t(B) * S * H * D;
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, elems * 2 * 8 + 4096), cudaSuccess);
  ASSERT_EQ(cudaMemset(buf, 0, elems * 2 * 8 + 4096), cudaSuccess);
  char* at = static_cast<char*>(buf);
  auto take = [&](size_t bytes) {
    void* p = at;
    at += (bytes + 255) / 256 * 256;
    return p;
  };
  BackwardParams bp;
  AttentionParams& f = bp.forward;
  f.batch = B, f.seqlen_q = f.seqlen_k = S, f.heads_q = f.heads_kv = H, f.head_dim_qk = f.head_dim_v = D;
  f.dtype = DType::kBFloat16;
  f.q = take(elems * 2), f.k = take(elems * 2), f.v = take(elems * 2), f.o = take(elems * 2);
  f.lse = static_cast<float*>(take(size_t(B) * H * S * 4));
  set_dense_strides(f);
  bp.dout = take(elems * 2), bp.dq = take(elems * 2), bp.dk = take(elems * 2), bp.dv = take(elems * 2);
  set_grad_strides_like_forward(bp);
  const Status st = attention_backward(bp);
  EXPECT_EQ(st.code, StatusCode::kUnsupported);
  EXPECT_NE(st.message.find("strict mode"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("attention_backward"), std::string::npos) << st.message;
  cudaFree(buf);
}

}  // namespace
}  // namespace flashcore
