// The sm90 (wgmma/TMA) forward path against an fp64 reference, with the fp16/bf16 tolerance rule:
// the path's error (relative Frobenius and max-abs, vs fp64) must be no worse than 2x the error of a
// naive computation in the same dtype (fp32 accumulation, inputs and probabilities P rounded to the
// dtype, output rounded). Outputs are poisoned with NaN before each run; every element must be
// written. The sweep covers head dims x dtypes x masks (causal both alignments, window) x GQA x
// tails x Sq != Sk x input scale 1 and 10 x softcap x both memory layouts x both schedules.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "attention/mask.hpp"
#include "common/dtype.hpp"
#include "common/gpu.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

struct Case {
  int batch = 1, heads_q = 2, heads_kv = 2, seqlen_q = 128, seqlen_k = 128, head_dim = 128;
  DType dtype = DType::kBFloat16;
  bool causal = false;
  MaskAlign align = MaskAlign::kBottomRight;
  int window_left = kWindowInfinite, window_right = kWindowInfinite;
  float softcap = 0.0f;
  float input_scale = 1.0f;
  bool bhsd = false;           // PyTorch [B, H, S, D] strides instead of [B, S, H, D]
  const char* schedule = "";   // FLASHCORE_SM90_SCHEDULE value ("" = the tile config's)
  const char* block_n = "";    // FLASHCORE_SM90_BLOCK_N value ("" = the tile config's kBlockN)
  const char* rescale = "";    // FLASHCORE_SM90_RESCALE value ("" = the tile config's choice)

  std::string name() const {
    std::string s = "d" + std::to_string(head_dim) + "_" + dtype_name(dtype) + "_B" + std::to_string(batch) + "_H" +
                    std::to_string(heads_q) + "x" + std::to_string(heads_kv) + "_Sq" + std::to_string(seqlen_q) +
                    "_Sk" + std::to_string(seqlen_k);
    if (causal) s += align == MaskAlign::kBottomRight ? "_causalBR" : "_causalTL";
    if (window_left >= 0 || window_right >= 0) {
      s += "_win" + std::to_string(window_left) + "," + std::to_string(window_right);
      s += align == MaskAlign::kBottomRight ? "BR" : "TL";
    }
    if (softcap > 0) s += "_softcap" + std::to_string((int)softcap);
    s += "_x" + std::to_string((int)input_scale);
    if (bhsd) s += "_bhsd";
    if (*schedule) s += std::string("_") + schedule;
    if (*block_n) s += std::string("_blockN") + block_n;
    if (*rescale) s += std::string("_rescale_") + rescale;
    return s;
  }
};

// Host tensors hold values already rounded to the dtype, as floats, in the case's layout.
struct Tensors {
  std::vector<float> q, k, v;
  AttentionParams p;  // strides and sizes (pointers set later)
};

void set_strides(const Case& c, AttentionParams& p) {
  const int64_t d = c.head_dim;
  if (!c.bhsd) {
    set_dense_strides(p);
    return;
  }
  p.q_seq_stride = d, p.q_head_stride = (int64_t)c.seqlen_q * d, p.q_batch_stride = (int64_t)c.heads_q * c.seqlen_q * d;
  p.k_seq_stride = d, p.k_head_stride = (int64_t)c.seqlen_k * d, p.k_batch_stride = (int64_t)c.heads_kv * c.seqlen_k * d;
  p.v_seq_stride = d, p.v_head_stride = (int64_t)c.seqlen_k * d, p.v_batch_stride = (int64_t)c.heads_kv * c.seqlen_k * d;
  p.o_seq_stride = d, p.o_head_stride = (int64_t)c.seqlen_q * d, p.o_batch_stride = (int64_t)c.heads_q * c.seqlen_q * d;
  p.lse_head_stride = c.seqlen_q, p.lse_batch_stride = (int64_t)c.heads_q * c.seqlen_q;
}

float round_to(float x, DType t) {
  return t == DType::kFloat16 ? fp16_to_float(float_to_fp16(x)) : bf16_to_float(float_to_bf16(x));
}

// fp64 reference and the naive same-dtype baseline, one (b, h, block of rows) per task.
struct Reference {
  std::vector<double> o, lse;  // fp64
  std::vector<float> o_naive;  // naive same-dtype result (rounded to dtype)
};

Reference compute_reference(const Case& c, const Tensors& t) {
  const AttentionParams& p = t.p;
  const int D = c.head_dim;
  Reference r;
  const size_t o_count = (size_t)c.batch * c.seqlen_q * c.heads_q * D;
  r.o.assign(o_count, 0.0);
  r.o_naive.assign(o_count, 0.0f);
  r.lse.assign((size_t)c.batch * c.heads_q * c.seqlen_q, 0.0);
  const attn::VisibilityMask mask = attn::make_mask(p, c.seqlen_q, c.seqlen_k);
  constexpr int kRowsPerTask = 32;
  const int row_chunks = (c.seqlen_q + kRowsPerTask - 1) / kRowsPerTask;
  auto work = [&](int task) {
    const int bh = task / row_chunks;
    const int row_begin = (task % row_chunks) * kRowsPerTask;
    const int row_end = std::min(c.seqlen_q, row_begin + kRowsPerTask);
    const int b = bh / c.heads_q, h = bh % c.heads_q;
    const int hk = h / (c.heads_q / c.heads_kv);
    const attn::ScoreTransform tr = attn::make_score_transform(p, b, h, c.seqlen_q, c.seqlen_k);
    std::vector<double> s(c.seqlen_k);
    std::vector<float> sf(c.seqlen_k);
    for (int i = row_begin; i < row_end; ++i) {
      const float* qi = &t.q[b * p.q_batch_stride + i * p.q_seq_stride + h * p.q_head_stride];
      double m = -INFINITY;
      float mf = -INFINITY;
      for (int j = 0; j < c.seqlen_k; ++j) {
        if (!mask.visible(i, j)) {
          s[j] = -INFINITY, sf[j] = -INFINITY;
          continue;
        }
        const float* kj = &t.k[b * p.k_batch_stride + j * p.k_seq_stride + hk * p.k_head_stride];
        double dot = 0;
        float dotf = 0;
        for (int x = 0; x < D; ++x) dot += (double)qi[x] * kj[x], dotf += qi[x] * kj[x];
        s[j] = tr.apply(dot, i, j);
        sf[j] = tr.apply(dotf, i, j);
        m = std::max(m, s[j]);
        mf = std::max(mf, sf[j]);
      }
      double l = 0;
      float lf = 0;
      for (int j = 0; j < c.seqlen_k; ++j) {
        s[j] = s[j] == -INFINITY ? 0.0 : std::exp(s[j] - m);
        const float pf = sf[j] == -INFINITY ? 0.0f : std::exp(sf[j] - mf);
        lf += pf;
        sf[j] = round_to(pf, c.dtype);  // P rounded to the dtype, as a naive kernel feeds its P.V GEMM
        l += s[j];
      }
      const size_t lse_index = b * p.lse_batch_stride + h * p.lse_head_stride + i;
      r.lse[lse_index] = l == 0 ? -INFINITY : m + std::log(l);
      const size_t o_base = b * p.o_batch_stride + i * p.o_seq_stride + h * p.o_head_stride;
      for (int x = 0; x < D; ++x) {
        double acc = 0;
        float accf = 0;
        for (int j = 0; j < c.seqlen_k; ++j) {
          if (s[j] == 0.0 && sf[j] == 0.0f) continue;
          const float vj = t.v[b * p.v_batch_stride + j * p.v_seq_stride + hk * p.v_head_stride + x];
          acc += s[j] * vj;
          accf += sf[j] * vj;
        }
        r.o[o_base + x] = l == 0 ? 0.0 : acc / l;
        r.o_naive[o_base + x] = round_to(lf == 0 ? 0.0f : accf / lf, c.dtype);
      }
    }
  };
  const int tasks = c.batch * c.heads_q * row_chunks;
  const int workers = std::max(1, std::min<int>(tasks, (int)std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      for (int task = w; task < tasks; task += workers) work(task);
    });
  }
  for (auto& th : pool) th.join();
  return r;
}

struct ErrorStats {
  double rel_fro = 0, max_abs = 0;
};
template <typename T>
ErrorStats error_vs(const std::vector<T>& got, const std::vector<double>& ref) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = (double)got[i] - ref[i];
    num += e * e, den += ref[i] * ref[i], mx = std::max(mx, std::fabs(e));
  }
  return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), mx};
}

std::vector<uint16_t> to_bits(const std::vector<float>& x, DType t) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = t == DType::kFloat16 ? float_to_fp16(x[i]) : float_to_bf16(x[i]);
  return out;
}

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

void run_case(const Case& c) {
  SCOPED_TRACE(c.name());
  Tensors t;
  AttentionParams& p = t.p;
  p.batch = c.batch, p.seqlen_q = c.seqlen_q, p.seqlen_k = c.seqlen_k, p.heads_q = c.heads_q,
  p.heads_kv = c.heads_kv, p.head_dim_qk = c.head_dim, p.head_dim_v = c.head_dim, p.dtype = c.dtype;
  p.causal = c.causal, p.mask_align = c.align, p.window_left = c.window_left, p.window_right = c.window_right;
  p.softcap = c.softcap;
  p.path = KernelPath::kSm90;
  set_strides(c, p);

  const size_t nq = (size_t)c.batch * c.seqlen_q * c.heads_q * c.head_dim;
  const size_t nk = std::max<size_t>(1, (size_t)c.batch * c.seqlen_k * c.heads_kv * c.head_dim);
  const size_t nlse = (size_t)c.batch * c.heads_q * c.seqlen_q;
  std::mt19937 rng(1234 + c.seqlen_q * 7 + c.seqlen_k * 13 + c.head_dim);
  std::normal_distribution<float> normal(0.0f, c.input_scale);
  auto fill = [&](std::vector<float>& x, size_t n) {
    x.resize(n);
    for (auto& e : x) e = round_to(normal(rng), c.dtype);
  };
  fill(t.q, nq), fill(t.k, nk), fill(t.v, nk);

  const Reference ref = compute_reference(c, t);

  void *dq, *dk, *dv, *dout;
  float* dlse;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dk, nk * 2));
  CUDA_OK(cudaMalloc(&dv, nk * 2));
  CUDA_OK(cudaMalloc(&dout, nq * 2));
  CUDA_OK(cudaMalloc(reinterpret_cast<void**>(&dlse), nlse * 4));
  const auto qb = to_bits(t.q, c.dtype), kb = to_bits(t.k, c.dtype), vb = to_bits(t.v, c.dtype);
  CUDA_OK(cudaMemcpy(dq, qb.data(), nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk, kb.data(), nk * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv, vb.data(), nk * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout, 0xFF, nq * 2));      // 0xFFFF: NaN in fp16 and bf16
  CUDA_OK(cudaMemset(dlse, 0xFF, nlse * 4));    // NaN in fp32
  p.q = dq, p.k = dk, p.v = dv, p.o = dout, p.lse = dlse;

  if (*c.schedule) setenv("FLASHCORE_SM90_SCHEDULE", c.schedule, 1);
  if (*c.block_n) setenv("FLASHCORE_SM90_BLOCK_N", c.block_n, 1);
  if (*c.rescale) setenv("FLASHCORE_SM90_RESCALE", c.rescale, 1);
  const Status st = attention_forward(p);
  unsetenv("FLASHCORE_SM90_SCHEDULE");
  unsetenv("FLASHCORE_SM90_BLOCK_N");
  unsetenv("FLASHCORE_SM90_RESCALE");
  ASSERT_TRUE(st.ok()) << st.message;
  CUDA_OK(cudaDeviceSynchronize());

  std::vector<uint16_t> ob(nq);
  std::vector<float> lse(nlse);
  CUDA_OK(cudaMemcpy(ob.data(), dout, nq * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(lse.data(), dlse, nlse * 4, cudaMemcpyDeviceToHost));
  cudaFree(dq), cudaFree(dk), cudaFree(dv), cudaFree(dout), cudaFree(dlse);

  std::vector<float> o(nq);
  size_t nan_count = 0;
  for (size_t i = 0; i < nq; ++i) {
    o[i] = c.dtype == DType::kFloat16 ? fp16_to_float(ob[i]) : bf16_to_float(ob[i]);
    nan_count += std::isnan(o[i]) ? 1 : 0;
  }
  ASSERT_EQ(nan_count, 0u) << "output elements left unwritten (NaN poison) or NaN produced";

  const ErrorStats fast = error_vs(o, ref.o);
  const ErrorStats naive = error_vs(ref.o_naive, ref.o);
  EXPECT_LE(fast.rel_fro, 2.0 * naive.rel_fro + 1e-7) << "rel Frobenius error " << fast.rel_fro << " vs naive " << naive.rel_fro;
  EXPECT_LE(fast.max_abs, 2.0 * naive.max_abs + 1e-6) << "max-abs error " << fast.max_abs << " vs naive " << naive.max_abs;

  size_t lse_bad = 0;
  double lse_max_err = 0;
  for (size_t i = 0; i < nlse; ++i) {
    if (std::isinf(ref.lse[i])) {
      lse_bad += (std::isinf(lse[i]) && lse[i] < 0) ? 0 : 1;
    } else {
      const double e = std::fabs(lse[i] - ref.lse[i]);
      lse_max_err = std::max(lse_max_err, e / std::max(1.0, std::fabs(ref.lse[i])));
      lse_bad += (std::isnan(lse[i]) || e > 1e-3 * std::max(1.0, std::fabs(ref.lse[i]))) ? 1 : 0;
    }
  }
  EXPECT_EQ(lse_bad, 0u) << "LSE entries wrong (max rel err " << lse_max_err << ")";
  std::printf("[sm90] %-60s rel %.3e (naive %.3e) max %.3e (naive %.3e) lse %.1e\n", c.name().c_str(), fast.rel_fro,
              naive.rel_fro, fast.max_abs, naive.max_abs, lse_max_err);
}

std::vector<Case> sweep() {
  std::vector<Case> cases;
  for (int d : {64, 128, 256}) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      Case base;
      base.head_dim = d, base.dtype = dt;
      auto add = [&](auto edit) {
        Case c = base;
        edit(c);
        cases.push_back(c);
      };
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; });                                   // tails, no mask
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.causal = true; c.input_scale = 10; }); // causal, scale 10
      add([](Case& c) { c.seqlen_q = 65; c.seqlen_k = 300; c.causal = true; });                // Sq < Sk, BR
      add([](Case& c) { c.seqlen_q = 300; c.seqlen_k = 129; c.causal = true; });               // Sq > Sk: empty rows
      add([](Case& c) { c.seqlen_q = 300; c.seqlen_k = 129; c.causal = true; c.align = MaskAlign::kTopLeft; });
      add([](Case& c) { c.seqlen_q = 129; c.seqlen_k = 400; c.causal = true; c.align = MaskAlign::kTopLeft; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 500; c.window_left = 64; c.window_right = 16; });
      add([](Case& c) { c.seqlen_q = 200; c.seqlen_k = 700; c.window_left = 100; c.window_right = 0; c.align = MaskAlign::kTopLeft; });
      add([](Case& c) { c.heads_q = 8; c.heads_kv = 2; c.seqlen_q = 7; c.seqlen_k = 1; });     // GQA 4, tiny
      add([](Case& c) { c.heads_q = 8; c.heads_kv = 1; c.seqlen_q = 129; c.seqlen_k = 257; c.causal = true; });  // MQA
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 384; c.softcap = 30; c.input_scale = 10; });
      add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 2; c.seqlen_q = 130; c.seqlen_k = 260; c.bhsd = true; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 777; c.causal = true; c.schedule = "serial"; });
      add([](Case& c) { c.seqlen_q = 333; c.seqlen_k = 555; c.input_scale = 10; c.schedule = "serial"; });
      // The tuning candidate kAltBlockN (serial schedule) and the rescale-only-when-the-max-moved variant.
      const char* alt = d == 64 ? "128" : d == 128 ? "176" : "48";
      add([&](Case& c) { c.seqlen_q = c.seqlen_k = 999; c.causal = true; c.input_scale = 10; c.block_n = alt; });
      add([&](Case& c) { c.seqlen_q = 257; c.seqlen_k = 1100; c.window_left = 300; c.window_right = 40; c.block_n = alt; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.causal = true; c.input_scale = 10; c.rescale = "vote"; });
      add([](Case& c) { c.seqlen_q = 600; c.seqlen_k = 900; c.rescale = "vote"; });
      // More tiles than SMs: every CTA runs several tiles, so the pipeline phases, the Q buffer and
      // the O staging tile are reused across tiles (and the snake order visits both directions).
      add([](Case& c) { c.batch = 2; c.heads_q = 32; c.heads_kv = 8; c.seqlen_q = c.seqlen_k = 700; c.causal = true; });
      add([](Case& c) { c.batch = 3; c.heads_q = 24; c.heads_kv = 24; c.seqlen_q = 520; c.seqlen_k = 333; });
    }
  }
  Case big;  // a longer sequence: many KV blocks, several tiles per CTA
  big.head_dim = 128, big.seqlen_q = big.seqlen_k = 4097, big.heads_q = 4, big.heads_kv = 4, big.causal = true;
  cases.push_back(big);
  Case long_keys;  // Sk = 16k: the scheduler groups 3 heads per L2 group, so 4 heads leave a partial group
  long_keys.head_dim = 128, long_keys.heads_q = long_keys.heads_kv = 4, long_keys.seqlen_q = 130;
  long_keys.seqlen_k = 16384, long_keys.dtype = DType::kFloat16;
  cases.push_back(long_keys);
  Case empty_keys;  // Sk = 0: every row sees nothing -> o = 0, lse = -inf
  empty_keys.seqlen_q = 70, empty_keys.seqlen_k = 0;
  cases.push_back(empty_keys);
  return cases;
}

class Sm90Sweep : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90Sweep, MatchesFp64ReferenceWithinTwiceNaiveError) {
  FC_REQUIRE_SM(90);
  run_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, Sm90Sweep, ::testing::ValuesIn(sweep()), [](const auto& info) {
  std::string n = info.param.name();
  for (char& ch : n) if (!std::isalnum((unsigned char)ch)) ch = '_';
  return n;
});

// supports() names precisely what the sm90 path does not compute, so dispatch falls back.
TEST(Sm90Supports, RejectsWhatItDoesNotComputeWithAReason) {
  FC_REQUIRE_SM(90);
  if (testing::gpu_compute_capability() != 90) GTEST_SKIP() << "sm90 path needs exactly sm_90";
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1 << 20), cudaSuccess);
  AttentionParams p;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 64, p.heads_q = p.heads_kv = 1, p.head_dim_qk = p.head_dim_v = 128;
  p.dtype = DType::kBFloat16, p.q = p.k = p.v = p.o = buf;
  set_dense_strides(p);
  EXPECT_TRUE(supports(p, KernelPath::kSm90).supported) << supports(p, KernelPath::kSm90).reason;

  auto reason = [&](AttentionParams q) { return supports(q, KernelPath::kSm90).reason; };
  AttentionParams x = p;
  x.dtype = DType::kFloat32;
  EXPECT_NE(reason(x).find("dtype fp32"), std::string::npos) << reason(x);
  x = p, x.head_dim_qk = x.head_dim_v = 96, set_dense_strides(x);
  EXPECT_NE(reason(x).find("head dims 96/96"), std::string::npos) << reason(x);
  x = p, x.alibi_slopes = static_cast<const float*>(buf);
  EXPECT_NE(reason(x).find("ALiBi"), std::string::npos) << reason(x);
  int32_t* cu = static_cast<int32_t*>(buf);
  x = p, x.cu_seqlens_q = cu, x.cu_seqlens_k = cu;
  EXPECT_NE(reason(x).find("varlen"), std::string::npos) << reason(x);
  x = p, x.k_seq_stride = 132;  // 264 bytes: not a multiple of 16
  EXPECT_NE(reason(x).find("k_seq_stride"), std::string::npos) << reason(x);
  x = p, x.o_seq_stride = 130;  // O leaves through TMA stores: the same 16-byte rule
  EXPECT_NE(reason(x).find("o_seq_stride"), std::string::npos) << reason(x);
  x = p, x.q = static_cast<char*>(buf) + 8;
  EXPECT_NE(reason(x).find("16-byte aligned"), std::string::npos) << reason(x);
  cudaFree(buf);
}

}  // namespace
}  // namespace flashcore
