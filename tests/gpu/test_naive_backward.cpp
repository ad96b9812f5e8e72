// The naive GPU backward (src/reference/naive_gpu_backward.cu) against the fp64 CPU reference
// backward on the same inputs, for every feature (tests/gpu/backward_check.hpp); two runs bitwise
// equal (the path has no atomics).
#include "backward_check.hpp"

namespace flashcore {
namespace {

using testing::BackwardCase;

std::vector<BackwardCase> cases() {
  std::vector<BackwardCase> out;
  auto base = [](DType dt) {
    testing::TestCase tc;
    tc.dtype = dt;
    tc.batch = 2, tc.seqlen_q = 70, tc.seqlen_k = 90, tc.heads_q = tc.heads_kv = 2;
    tc.head_dim_qk = tc.head_dim_v = 64;
    tc.seed = 17;
    return tc;
  };
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    testing::TestCase tc = base(dt);
    out.push_back({"dense", tc});
    tc.causal = true, tc.heads_q = 6, tc.heads_kv = 2, tc.head_dim_v = 32;
    out.push_back({"causal GQA 6/2, Dv 32", tc});
    tc = base(dt);
    tc.causal = true, tc.align = MaskAlign::kTopLeft, tc.seqlen_q = 100, tc.seqlen_k = 40;
    tc.alibi = testing::AlibiLayout::kPerHead;
    out.push_back({"causal top-left Sq > Sk, ALiBi", tc});
    tc = base(dt);
    tc.window_left = 9, tc.window_right = 2, tc.softcap = 3.0f, tc.input_scale = 2.0f;
    out.push_back({"window, softcap, inputs x2", tc});
    tc = base(dt);
    tc.causal = true, tc.seqlen_q = 90, tc.seqlen_k = 30;  // bottom-right: rows 0..59 see no key
    out.push_back({"rows without keys", tc});
    tc = base(dt);
    tc.varlen_q = {33, 0, 71}, tc.varlen_k = {40, 5, 64}, tc.seqused_k = {31, 5, 64}, tc.batch = 3;
    tc.causal = true;
    out.push_back({"varlen + seqused_k", tc});
  }
  return out;
}

TEST(NaiveGpuBackward, MatchesTheFp64CpuReferenceAndIsDeterministic) {
  FC_REQUIRE_GPU();
  testing::BackwardRun run;
  run.path = KernelPath::kNaiveGpu;
  run.tag = "naive-bwd";
  for (const BackwardCase& c : cases()) testing::check_backward(c, run);
}

}  // namespace
}  // namespace flashcore
