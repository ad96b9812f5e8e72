// NaN in the inputs propagates as in PyTorch: a query row holding a NaN gets a NaN output row and a
// NaN LSE on every fused path (they share attn::SoftmaxState, where only a zero sum means "no
// visible key"), while every other row stays finite and correct.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "flashcore/flashcore.hpp"
#include "reference/cpu_reference.hpp"

namespace flashcore {
namespace {

TEST(NanRows, AQueryRowWithANanGivesANanRowOnEveryFusedPath) {
  FC_REQUIRE_GPU();
  constexpr int kNanRow = 37, kNanHead = 1;
  for (KernelPath path : {KernelPath::kSm90, KernelPath::kSm80}) {
    testing::TestCase tc;
    tc.batch = 1, tc.seqlen_q = tc.seqlen_k = 200, tc.heads_q = tc.heads_kv = 2;
    tc.head_dim_qk = tc.head_dim_v = 128;
    tc.dtype = DType::kFloat16;
    tc.causal = true;
    testing::HostProblem host = testing::make_problem(tc);
    if (!supports(host.params, path).supported) {
      std::printf("[nan-rows] %s skipped: %s\n", kernel_path_name(path), supports(host.params, path).reason.c_str());
      continue;
    }
    std::vector<double> ref_out, ref_lse;
    reference::cpu_reference_forward_f64(host.params, &ref_out, &ref_lse);
    const AttentionParams& p = host.params;
    uint16_t* q = reinterpret_cast<uint16_t*>(host.q.data());
    q[kNanRow * p.q_seq_stride + kNanHead * p.q_head_stride + 5] = 0x7e00;  // fp16 quiet NaN
    testing::DeviceProblem device(host);
    const Status st = device.run(path);
    ASSERT_TRUE(st.ok()) << kernel_path_name(path) << ": " << st.message;
    std::vector<uint8_t> o;
    std::vector<float> lse;
    device.download(&o, &lse);
    const std::vector<double> out = testing::read_output(host, o.data());
    const std::vector<double> lse_rows = testing::read_lse(host, lse.data());
    for (int i = 0; i < p.seqlen_q; ++i) {
      for (int h = 0; h < p.heads_q; ++h) {
        const size_t row = size_t(i) * p.heads_q + h;
        const bool nan_row = i == kNanRow && h == kNanHead;
        EXPECT_EQ(std::isnan(lse_rows[row]), nan_row) << kernel_path_name(path) << " row " << i << " head " << h;
        for (int e = 0; e < p.head_dim_v; ++e) {
          const double x = out[row * p.head_dim_v + e];
          if (nan_row) {
            ASSERT_TRUE(std::isnan(x)) << kernel_path_name(path) << " element " << e;
          } else {
            ASSERT_NEAR(x, ref_out[row * p.head_dim_v + e], 2e-2) << kernel_path_name(path) << " row " << i;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace flashcore
