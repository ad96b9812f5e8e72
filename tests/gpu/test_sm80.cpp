// The sm80 (mma.sync) forward path against an fp64 reference: every forward rule of the semantics
// (causal in both alignments, sliding window, softcap, ALiBi, GQA/MQA, varlen with seqused_k,
// Sq != Sk, lengths that are not tile multiples) for every head-dim pair and dtype of the build.
//
// Tolerance (design doc): the relative Frobenius error and the max-abs error of O must be no worse
// than 2x those of a naive computation in the same dtype (fp32 scores and sums, P rounded to the
// dtype before P V, O rounded to the dtype), both measured against fp64. LSE is compared with the
// fp64 LSE. Outputs are poisoned with NaN first; every element must be written, nothing past the
// end of O or LSE may be touched, and NaN never passes.
//
// TODO(sm80): switch the local fp64 reference to the shared one (tests/common) once it lands.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "api/paths.hpp"
#include "attention/mask.hpp"
#include "common/dtype.hpp"
#include "common/gpu.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

#define FC_CUDA_ASSERT(call)                                                           \
  do {                                                                                 \
    const cudaError_t err_ = (call);                                                   \
    ASSERT_EQ(err_, cudaSuccess) << #call << ": " << cudaGetErrorString(err_);         \
  } while (0)

enum class MaskMode { kNone, kCausalBottomRight, kCausalTopLeft, kWindow, kSoftcap, kAlibi };

const char* mask_mode_name(MaskMode m) {
  switch (m) {
    case MaskMode::kNone: return "none";
    case MaskMode::kCausalBottomRight: return "causal-br";
    case MaskMode::kCausalTopLeft: return "causal-tl";
    case MaskMode::kWindow: return "window";
    case MaskMode::kSoftcap: return "softcap";
    case MaskMode::kAlibi: return "alibi";
  }
  return "?";
}

enum class Layout { kBSHD, kBHSD, kVarlen };

struct Case {
  int dqk = 64, dv = 64;
  DType dtype = DType::kFloat16;
  int batch = 1, seqlen_q = 1, seqlen_k = 1, heads_q = 1, heads_kv = 1;
  MaskMode mode = MaskMode::kNone;
  int window_left = 0, window_right = 0;
  float input_scale = 1.0f;
  Layout layout = Layout::kBSHD;
  std::vector<int> varlen_q, varlen_k, used_k;  // kVarlen only (used_k empty: no seqused_k)

  std::string describe() const {
    std::string s = "d" + std::to_string(dqk) + "/" + std::to_string(dv) + " " + dtype_name(dtype) + " B=" +
                    std::to_string(batch) + " Sq=" + std::to_string(seqlen_q) + " Sk=" + std::to_string(seqlen_k) +
                    " Hq=" + std::to_string(heads_q) + " Hkv=" + std::to_string(heads_kv) + " mask=" +
                    mask_mode_name(mode) + " x" + std::to_string(int(input_scale));
    if (mode == MaskMode::kWindow) s += " w=(" + std::to_string(window_left) + "," + std::to_string(window_right) + ")";
    if (layout == Layout::kBHSD) s += " BHSD";
    if (layout == Layout::kVarlen) s += used_k.empty() ? " varlen" : " varlen+seqused_k";
    return s;
  }
};

// Host tensors of one problem (16-bit values stored as bit patterns) plus the params that
// describe them; the params' pointers are host pointers (the reference reads them directly).
struct Problem {
  Case c;
  AttentionParams p;  // host pointers
  std::vector<uint16_t> q, k, v;
  std::vector<int32_t> cu_q, cu_k, used_k;
  std::vector<float> alibi;
  int64_t q_elems = 0, k_elems = 0, v_elems = 0, o_elems = 0, lse_elems = 0;
};

float round_to(float x, DType dt) {
  return dt == DType::kBFloat16 ? bf16_to_float(float_to_bf16(x)) : fp16_to_float(float_to_fp16(x));
}

Problem make_problem(const Case& c, uint32_t seed) {
  Problem pr;
  pr.c = c;
  AttentionParams& p = pr.p;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim_qk = c.dqk;
  p.head_dim_v = c.dv;
  p.dtype = c.dtype;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.seqlen_k;
  p.path = KernelPath::kSm80;
  switch (c.mode) {
    case MaskMode::kCausalBottomRight: p.causal = true; break;
    case MaskMode::kCausalTopLeft: p.causal = true; p.mask_align = MaskAlign::kTopLeft; break;
    case MaskMode::kWindow: p.window_left = c.window_left; p.window_right = c.window_right; break;
    case MaskMode::kSoftcap: p.softcap = 2.5f; break;
    case MaskMode::kAlibi: break;
    case MaskMode::kNone: break;
  }
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  if (c.mode == MaskMode::kAlibi) {
    pr.alibi.resize(size_t(c.batch) * c.heads_q);
    for (auto& s : pr.alibi) s = 0.05f + 0.5f * std::uniform_real_distribution<float>(0, 1)(rng);
    p.alibi_slopes = pr.alibi.data();
    p.alibi_batch_stride = c.heads_q;
  }

  if (c.layout == Layout::kVarlen) {
    pr.cu_q.push_back(0);
    pr.cu_k.push_back(0);
    for (int b = 0; b < c.batch; ++b) {
      pr.cu_q.push_back(pr.cu_q.back() + c.varlen_q[b]);
      pr.cu_k.push_back(pr.cu_k.back() + c.varlen_k[b]);
    }
    p.cu_seqlens_q = pr.cu_q.data();
    p.cu_seqlens_k = pr.cu_k.data();
    p.total_q = pr.cu_q.back();
    p.total_k = pr.cu_k.back();
    p.seqlen_q = *std::max_element(c.varlen_q.begin(), c.varlen_q.end());
    p.seqlen_k = *std::max_element(c.varlen_k.begin(), c.varlen_k.end());
    if (!c.used_k.empty()) {
      pr.used_k = c.used_k;
      p.seqused_k = pr.used_k.data();
    }
    set_dense_strides(p);
    pr.q_elems = p.total_q * c.heads_q * c.dqk;
    pr.k_elems = p.total_k * c.heads_kv * c.dqk;
    pr.v_elems = p.total_k * c.heads_kv * c.dv;
    pr.o_elems = p.total_q * c.heads_q * c.dv;
    pr.lse_elems = p.total_q * c.heads_q;
  } else {
    set_dense_strides(p);
    if (c.layout == Layout::kBHSD) {  // PyTorch [B, H, S, D]
      p.q_seq_stride = c.dqk; p.q_head_stride = int64_t(c.seqlen_q) * c.dqk; p.q_batch_stride = p.q_head_stride * c.heads_q;
      p.k_seq_stride = c.dqk; p.k_head_stride = int64_t(c.seqlen_k) * c.dqk; p.k_batch_stride = p.k_head_stride * c.heads_kv;
      p.v_seq_stride = c.dv;  p.v_head_stride = int64_t(c.seqlen_k) * c.dv;  p.v_batch_stride = p.v_head_stride * c.heads_kv;
      p.o_seq_stride = c.dv;  p.o_head_stride = int64_t(c.seqlen_q) * c.dv;  p.o_batch_stride = p.o_head_stride * c.heads_q;
    }
    pr.q_elems = int64_t(c.batch) * c.seqlen_q * c.heads_q * c.dqk;
    pr.k_elems = int64_t(c.batch) * c.seqlen_k * c.heads_kv * c.dqk;
    pr.v_elems = int64_t(c.batch) * c.seqlen_k * c.heads_kv * c.dv;
    pr.o_elems = int64_t(c.batch) * c.seqlen_q * c.heads_q * c.dv;
    pr.lse_elems = int64_t(c.batch) * c.heads_q * c.seqlen_q;
  }
  auto fill = [&](std::vector<uint16_t>& t, int64_t n) {
    t.resize(size_t(n));
    for (auto& x : t) {
      const float f = normal(rng) * c.input_scale;
      x = c.dtype == DType::kBFloat16 ? float_to_bf16(f) : float_to_fp16(f);
    }
  };
  fill(pr.q, pr.q_elems);
  fill(pr.k, pr.k_elems);
  fill(pr.v, pr.v_elems);
  p.q = pr.q.data();
  p.k = pr.k.data();
  p.v = pr.v.data();
  return pr;
}

// Reference outputs: fp64 (o64, lse64) and the naive same-dtype baseline (o_naive, lse_naive).
struct Reference {
  std::vector<double> o64, lse64;
  std::vector<float> o_naive, lse_naive;
};

int64_t o_index(const AttentionParams& p, const attn::SequenceExtent& e, int b, int h, int i, int d) {
  const int64_t batch_off = p.is_varlen() ? 0 : int64_t(b) * p.o_batch_stride;
  return batch_off + (e.q_start + i) * p.o_seq_stride + int64_t(h) * p.o_head_stride + d;
}
int64_t lse_index(const AttentionParams& p, const attn::SequenceExtent& e, int b, int h, int i) {
  return (p.is_varlen() ? e.q_start : int64_t(b) * p.lse_batch_stride) + int64_t(h) * p.lse_head_stride + i;
}

Reference compute_reference(const Problem& pr) {
  const AttentionParams& p = pr.p;
  const Case& c = pr.c;
  Reference ref;
  ref.o64.assign(size_t(pr.o_elems), 0.0);
  ref.o_naive.assign(size_t(pr.o_elems), 0.0f);
  ref.lse64.assign(size_t(pr.lse_elems), -std::numeric_limits<double>::infinity());
  ref.lse_naive.assign(size_t(pr.lse_elems), -std::numeric_limits<float>::infinity());
  auto to_float = [&](const std::vector<uint16_t>& t) {
    std::vector<float> f(t.size());
    for (size_t i = 0; i < t.size(); ++i) f[i] = load_as_float(t.data(), int64_t(i), c.dtype);
    return f;
  };
  const std::vector<float> qf = to_float(pr.q), kf = to_float(pr.k), vf = to_float(pr.v);

  auto work = [&](int b, int h) {
    const attn::SequenceExtent e = attn::sequence_extent(p, b);
    const attn::VisibilityMask mask = attn::make_mask(p, e.seqlen_q, e.seqlen_k);
    const attn::ScoreTransform tr = attn::make_score_transform(p, b, h, e.seqlen_q, e.seqlen_k);
    const int hk = h / (p.heads_q / p.heads_kv);
    const int64_t qb = p.is_varlen() ? 0 : int64_t(b) * p.q_batch_stride;
    const int64_t kb = p.is_varlen() ? 0 : int64_t(b) * p.k_batch_stride;
    const int64_t vb = p.is_varlen() ? 0 : int64_t(b) * p.v_batch_stride;
    std::vector<double> s64(size_t(std::max(e.seqlen_k, 1)));
    std::vector<float> s32(size_t(std::max(e.seqlen_k, 1)));
    std::vector<double> acc64(size_t(c.dv));
    std::vector<float> acc32(size_t(c.dv));
    for (int i = 0; i < e.seqlen_q; ++i) {
      const int lo = mask.first_key(i), hi = mask.last_key(i);
      double m64 = -INFINITY;
      float m32 = -INFINITY;
      for (int j = lo; j <= hi; ++j) {
        double dot64 = 0.0;
        float dot32 = 0.0f;
        for (int d = 0; d < c.dqk; ++d) {
          const float qv = qf[size_t(qb + (e.q_start + i) * p.q_seq_stride + int64_t(h) * p.q_head_stride + d)];
          const float kv = kf[size_t(kb + (e.k_start + j) * p.k_seq_stride + int64_t(hk) * p.k_head_stride + d)];
          dot64 += double(qv) * double(kv);
          dot32 += qv * kv;
        }
        s64[size_t(j)] = tr.apply(dot64, i, j);
        s32[size_t(j)] = tr.apply(dot32, i, j);
        m64 = std::max(m64, s64[size_t(j)]);
        m32 = std::max(m32, s32[size_t(j)]);
      }
      if (hi < lo) continue;  // no visible key: o = 0, lse = -inf (already set)
      double sum64 = 0.0;
      float sum32 = 0.0f;
      for (int j = lo; j <= hi; ++j) {
        sum64 += std::exp(s64[size_t(j)] - m64);
        sum32 += std::exp(s32[size_t(j)] - m32);
      }
      std::fill(acc64.begin(), acc64.end(), 0.0);
      std::fill(acc32.begin(), acc32.end(), 0.0f);
      for (int j = lo; j <= hi; ++j) {
        const double w64 = std::exp(s64[size_t(j)] - m64) / sum64;
        const float w32 = round_to(std::exp(s32[size_t(j)] - m32) / sum32, c.dtype);  // naive: P in dtype
        for (int d = 0; d < c.dv; ++d) {
          const float vv = vf[size_t(vb + (e.k_start + j) * p.v_seq_stride + int64_t(hk) * p.v_head_stride + d)];
          acc64[size_t(d)] += w64 * double(vv);
          acc32[size_t(d)] += w32 * vv;
        }
      }
      for (int d = 0; d < c.dv; ++d) {
        ref.o64[size_t(o_index(p, e, b, h, i, d))] = acc64[size_t(d)];
        ref.o_naive[size_t(o_index(p, e, b, h, i, d))] = round_to(acc32[size_t(d)], c.dtype);
      }
      ref.lse64[size_t(lse_index(p, e, b, h, i))] = m64 + std::log(sum64);
      ref.lse_naive[size_t(lse_index(p, e, b, h, i))] = m32 + std::log(sum32);
    }
  };
  // One thread per (b, h): the fp64 reference dominates the test time.
  std::vector<std::thread> threads;
  const unsigned max_threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::pair<int, int>> jobs;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads_q; ++h) jobs.push_back({b, h});
  for (unsigned t = 0; t < max_threads; ++t) {
    threads.emplace_back([&, t] {
      for (size_t job = t; job < jobs.size(); job += max_threads) work(jobs[job].first, jobs[job].second);
    });
  }
  for (auto& th : threads) th.join();
  return ref;
}

struct Errors {
  double rel_fro = 0, max_abs = 0;
};
template <typename T>
Errors errors_vs(const std::vector<double>& ref, const std::vector<T>& got) {
  double num = 0, den = 0, mx = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(got[i]) - ref[i];
    num += d * d;
    den += ref[i] * ref[i];
    mx = std::max(mx, std::fabs(d));
    if (std::isnan(double(got[i]))) mx = INFINITY;
  }
  return {den > 0 ? std::sqrt(num / den) : std::sqrt(num), mx};
}

constexpr int kGuard = 64;             // poisoned elements past the end of O and LSE
constexpr uint16_t kPoison16 = 0xFFFF;  // NaN in fp16 and bf16

// Runs the sm80 path on the device and checks it against the reference.
void run_and_check(const Case& c, uint32_t seed) {
  SCOPED_TRACE(c.describe());
  Problem pr = make_problem(c, seed);
  const Reference ref = compute_reference(pr);

  // Device copies.
  AttentionParams dp = pr.p;
  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr;
  float* dlse = nullptr;
  int32_t *dcu_q = nullptr, *dcu_k = nullptr, *dused = nullptr;
  float* dalibi = nullptr;
  FC_CUDA_ASSERT(cudaMalloc(&dq, size_t(pr.q_elems) * 2));
  FC_CUDA_ASSERT(cudaMalloc(&dk, size_t(pr.k_elems) * 2));
  FC_CUDA_ASSERT(cudaMalloc(&dv, size_t(pr.v_elems) * 2));
  FC_CUDA_ASSERT(cudaMalloc(&dout, size_t(pr.o_elems + kGuard) * 2));
  FC_CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&dlse), size_t(pr.lse_elems + kGuard) * 4));
  FC_CUDA_ASSERT(cudaMemcpy(dq, pr.q.data(), size_t(pr.q_elems) * 2, cudaMemcpyHostToDevice));
  FC_CUDA_ASSERT(cudaMemcpy(dk, pr.k.data(), size_t(pr.k_elems) * 2, cudaMemcpyHostToDevice));
  FC_CUDA_ASSERT(cudaMemcpy(dv, pr.v.data(), size_t(pr.v_elems) * 2, cudaMemcpyHostToDevice));
  FC_CUDA_ASSERT(cudaMemset(dout, 0xFF, size_t(pr.o_elems + kGuard) * 2));  // NaN poison
  FC_CUDA_ASSERT(cudaMemset(dlse, 0xFF, size_t(pr.lse_elems + kGuard) * 4));
  dp.q = dq; dp.k = dk; dp.v = dv; dp.o = dout; dp.lse = dlse;
  if (!pr.cu_q.empty()) {
    FC_CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&dcu_q), pr.cu_q.size() * 4));
    FC_CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&dcu_k), pr.cu_k.size() * 4));
    FC_CUDA_ASSERT(cudaMemcpy(dcu_q, pr.cu_q.data(), pr.cu_q.size() * 4, cudaMemcpyHostToDevice));
    FC_CUDA_ASSERT(cudaMemcpy(dcu_k, pr.cu_k.data(), pr.cu_k.size() * 4, cudaMemcpyHostToDevice));
    dp.cu_seqlens_q = dcu_q;
    dp.cu_seqlens_k = dcu_k;
  }
  if (!pr.used_k.empty()) {
    FC_CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&dused), pr.used_k.size() * 4));
    FC_CUDA_ASSERT(cudaMemcpy(dused, pr.used_k.data(), pr.used_k.size() * 4, cudaMemcpyHostToDevice));
    dp.seqused_k = dused;
  }
  if (!pr.alibi.empty()) {
    FC_CUDA_ASSERT(cudaMalloc(reinterpret_cast<void**>(&dalibi), pr.alibi.size() * 4));
    FC_CUDA_ASSERT(cudaMemcpy(dalibi, pr.alibi.data(), pr.alibi.size() * 4, cudaMemcpyHostToDevice));
    dp.alibi_slopes = dalibi;
  }

  const Support sup = supports(dp, KernelPath::kSm80);
  ASSERT_TRUE(sup.supported) << sup.reason;
  const Status st = attention_forward(dp, nullptr);
  ASSERT_TRUE(st.ok()) << st.message;
  FC_CUDA_ASSERT(cudaDeviceSynchronize());
  FC_CUDA_ASSERT(cudaGetLastError());

  std::vector<uint16_t> out_bits(size_t(pr.o_elems + kGuard));
  std::vector<float> lse(size_t(pr.lse_elems + kGuard));
  FC_CUDA_ASSERT(cudaMemcpy(out_bits.data(), dout, out_bits.size() * 2, cudaMemcpyDeviceToHost));
  FC_CUDA_ASSERT(cudaMemcpy(lse.data(), dlse, lse.size() * 4, cudaMemcpyDeviceToHost));
  for (void* ptr : {dq, dk, dv, dout, static_cast<void*>(dlse), static_cast<void*>(dcu_q),
                    static_cast<void*>(dcu_k), static_cast<void*>(dused), static_cast<void*>(dalibi)}) {
    if (ptr) cudaFree(ptr);
  }

  // Nothing past the end was touched.
  for (int g = 0; g < kGuard; ++g) {
    ASSERT_EQ(out_bits[size_t(pr.o_elems + g)], kPoison16) << "O written past its end at +" << g;
    uint32_t bits;
    std::memcpy(&bits, &lse[size_t(pr.lse_elems + g)], 4);
    ASSERT_EQ(bits, 0xFFFFFFFFu) << "LSE written past its end at +" << g;
  }
  // Every element written, no NaN.
  std::vector<float> out(size_t(pr.o_elems));
  int64_t nan_count = 0;
  for (int64_t i = 0; i < pr.o_elems; ++i) {
    out[size_t(i)] = load_as_float(out_bits.data(), i, c.dtype);
    nan_count += std::isnan(out[size_t(i)]) ? 1 : 0;
  }
  ASSERT_EQ(nan_count, 0) << "O elements left unwritten (poison) or NaN";

  const Errors ours = errors_vs(ref.o64, out);
  const Errors naive = errors_vs(ref.o64, ref.o_naive);
  EXPECT_LE(ours.rel_fro, 2.0 * naive.rel_fro + 1e-6)
      << "relative Frobenius error " << ours.rel_fro << " vs naive same-dtype " << naive.rel_fro;
  EXPECT_LE(ours.max_abs, 2.0 * naive.max_abs + 1e-6)
      << "max-abs error " << ours.max_abs << " vs naive same-dtype " << naive.max_abs;

  // LSE: -inf exactly where the reference has no visible key, otherwise close to fp64.
  int64_t lse_bad = 0;
  double worst = 0;
  for (int64_t i = 0; i < pr.lse_elems; ++i) {
    const double r = ref.lse64[size_t(i)];
    const double got = lse[size_t(i)];
    bool ok;
    if (std::isinf(r)) {
      ok = std::isinf(got) && got < 0;
    } else {
      const double naive_err = std::fabs(double(ref.lse_naive[size_t(i)]) - r);
      const double tol = std::max(2.0 * naive_err, 1e-3 * (1.0 + std::fabs(r)));
      ok = std::isfinite(got) && std::fabs(got - r) <= tol;
      if (std::isfinite(got)) worst = std::max(worst, std::fabs(got - r));
    }
    if (!ok && lse_bad++ < 3) ADD_FAILURE() << "lse[" << i << "] = " << got << ", fp64 reference " << r;
  }
  EXPECT_EQ(lse_bad, 0) << "LSE mismatches (worst finite abs error " << worst << ")";
}

// Head-dim pairs and dtypes the sm80 path instantiates (the test skips what the build pruned).
struct Variant {
  int dqk, dv;
  DType dtype;
};
std::vector<Variant> all_variants() {
  const int pairs[][2] = {{32, 32}, {64, 64}, {96, 96}, {128, 128}, {192, 192}, {256, 256}, {192, 128}};
  std::vector<Variant> out;
  for (const auto& pr : pairs)
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) out.push_back({pr[0], pr[1], dt});
  return out;
}
std::string variant_name(const ::testing::TestParamInfo<Variant>& info) {
  return "d" + std::to_string(info.param.dqk) + "_" + std::to_string(info.param.dv) + "_" +
         (info.param.dtype == DType::kFloat16 ? "fp16" : "bf16");
}

// Skips when the build or the device lacks this variant; returns false then.
bool variant_available(const Variant& v, std::string* why) {
  AttentionParams p;
  p.head_dim_qk = v.dqk;
  p.head_dim_v = v.dv;
  p.dtype = v.dtype;
  detail::DeviceInfo info;
  info.has_device = true;
  info.cc_major = testing::gpu_compute_capability() / 10;
  info.cc_minor = testing::gpu_compute_capability() % 10;
  info.max_smem_per_block_optin = 1u << 30;
  int dev = 0;
  cudaGetDevice(&dev);
  int optin = 0;
  cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  info.max_smem_per_block_optin = size_t(optin);
  // Pointers are null: 16-byte aligned, so only dtype / head dims / arch / smem can refuse.
  *why = detail::sm80_path().supports(p, info);
  return why->empty();
}

// First statement of every sweep test: needs sm_80+, skips (saying why) what the build pruned.
#define FC_REQUIRE_SM80_VARIANT(v)                                 \
  do {                                                             \
    FC_REQUIRE_SM(80);                                             \
    std::string why_;                                              \
    if (!variant_available(v, &why_)) GTEST_SKIP() << why_;        \
  } while (0)

Case case_for(const Variant& v) {
  Case c;
  c.dqk = v.dqk;
  c.dv = v.dv;
  c.dtype = v.dtype;
  return c;
}

class Sm80Sweep : public ::testing::TestWithParam<Variant> {};

// Every mask mode with random GQA ratio, lengths (tails, Sq != Sk both ways) and input scale.
TEST_P(Sm80Sweep, MatchesFp64ReferenceForEveryMaskMode) {
  const Variant v = GetParam();
  FC_REQUIRE_SM80_VARIANT(v);
  const int lengths[] = {1, 7, 63, 65, 257, 1023};
  const int ratios[] = {1, 4, 8};
  std::mt19937 rng(uint32_t(v.dqk * 7919 + v.dv * 31 + int(v.dtype)));
  const MaskMode modes[] = {MaskMode::kNone,   MaskMode::kCausalBottomRight, MaskMode::kCausalTopLeft,
                            MaskMode::kWindow, MaskMode::kSoftcap,           MaskMode::kAlibi};
  int index = 0;
  for (MaskMode mode : modes) {
    for (int rep = 0; rep < 2; ++rep, ++index) {
      Case c = case_for(v);
      c.mode = mode;
      // Alternate Sq < Sk and Sq > Sk; lengths drawn from the list (never tile multiples).
      int a = lengths[rng() % 6], b = lengths[rng() % 6];
      if (a == b) b = lengths[(std::find(lengths, lengths + 6, b) - lengths + 1) % 6];
      c.seqlen_q = rep == 0 ? std::min(a, b) : std::max(a, b);
      c.seqlen_k = rep == 0 ? std::max(a, b) : std::min(a, b);
      const int ratio = ratios[index % 3];
      // Keep the fp64 reference affordable: fewer heads for the longest pairs.
      const double work = double(c.seqlen_q) * c.seqlen_k * (c.dqk + c.dv);
      c.heads_kv = work * ratio * 2 <= 3e8 ? 2 : 1;
      c.heads_q = c.heads_kv * ratio;
      c.batch = work * c.heads_q * 2 <= 3e8 ? 2 : 1;
      c.input_scale = (index % 2 == 0) ? 1.0f : 10.0f;
      if (mode == MaskMode::kWindow) {
        c.window_left = int(rng() % 100);
        c.window_right = int(rng() % 40);
      }
      run_and_check(c, 1000u + uint32_t(index));
      if (HasFatalFailure()) return;
    }
  }
}

// Packed sequences with cu_seqlens (and seqused_k shortening the keys), causal and not.
TEST_P(Sm80Sweep, VarlenWithSequsedKMatchesFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_SM80_VARIANT(v);
  for (int variant = 0; variant < 3; ++variant) {
    Case c = case_for(v);
    c.layout = Layout::kVarlen;
    c.batch = 4;
    c.heads_kv = 2;
    c.heads_q = variant == 2 ? 8 : 2;
    c.varlen_q = {1, 130, 7, 65};
    c.varlen_k = {63, 129, 0, 200};
    if (variant >= 1) c.used_k = {40, 129, 0, 77};
    c.mode = variant == 1 ? MaskMode::kCausalBottomRight : (variant == 2 ? MaskMode::kWindow : MaskMode::kNone);
    c.window_left = 20;
    c.window_right = 5;
    c.input_scale = variant == 1 ? 10.0f : 1.0f;
    run_and_check(c, 77u + uint32_t(variant));
    if (HasFatalFailure()) return;
  }
}

// PyTorch's [B, H, S, D] layout through explicit strides.
TEST_P(Sm80Sweep, BhsdStridedLayoutMatchesFp64Reference) {
  const Variant v = GetParam();
  FC_REQUIRE_SM80_VARIANT(v);
  Case c = case_for(v);
  c.layout = Layout::kBHSD;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seqlen_q = 200;
  c.seqlen_k = 131;
  c.mode = MaskMode::kCausalTopLeft;
  run_and_check(c, 5u);
}

INSTANTIATE_TEST_SUITE_P(AllHeadDims, Sm80Sweep, ::testing::ValuesIn(all_variants()), variant_name);

// Small shapes for compute-sanitizer (memcheck / racecheck): tails, causal, window, varlen.
TEST(Sm80Sanitizer, SmallShapesEveryFeature) {
  FC_REQUIRE_SM(80);
  for (Variant v : {Variant{64, 64, DType::kFloat16}, Variant{128, 128, DType::kBFloat16},
                    Variant{192, 128, DType::kFloat16}}) {
    std::string why;
    if (!variant_available(v, &why)) continue;
    Case c = case_for(v);
    c.batch = 1;
    c.heads_q = 2;
    c.heads_kv = 1;
    c.seqlen_q = 65;
    c.seqlen_k = 97;
    for (MaskMode m : {MaskMode::kNone, MaskMode::kCausalBottomRight, MaskMode::kWindow, MaskMode::kAlibi}) {
      c.mode = m;
      c.window_left = 10;
      c.window_right = 3;
      run_and_check(c, 9u);
      if (HasFatalFailure()) return;
    }
    Case vl = c;
    vl.layout = Layout::kVarlen;
    vl.mode = MaskMode::kCausalBottomRight;
    vl.batch = 2;
    vl.varlen_q = {5, 70};
    vl.varlen_k = {33, 66};
    vl.used_k = {20, 66};
    run_and_check(vl, 10u);
    if (HasFatalFailure()) return;
  }
}

// supports() names the reason: fp32 is not an sm80 dtype; pruned head dims are "not in this build".
TEST(Sm80Supports, SaysWhyNot) {
  AttentionParams p;
  p.head_dim_qk = 128;
  p.head_dim_v = 128;
  p.dtype = DType::kFloat32;
  detail::DeviceInfo info;
  info.has_device = true;
  info.cc_major = 9;
  info.cc_minor = 0;
  info.max_smem_per_block_optin = 227 * 1024;
  EXPECT_NE(detail::sm80_path().supports(p, info).find("fp32 not supported by sm80 path"), std::string::npos);
  p.dtype = DType::kFloat16;
  p.head_dim_qk = p.head_dim_v = 80;
  EXPECT_NE(detail::sm80_path().supports(p, info).find("not in this build"), std::string::npos);
  p.head_dim_qk = p.head_dim_v = 128;
  info.cc_major = 7;
  info.cc_minor = 5;
  EXPECT_NE(detail::sm80_path().supports(p, info).find("compute capability >= 8.0"), std::string::npos);
  info.cc_major = 9;
  info.cc_minor = 0;
  const std::string built = detail::sm80_path().supports(p, info);
  if (built.empty()) {  // this build has d128 fp16 for sm_90: misaligned strides are refused by name
    p.q_seq_stride = 100;
    EXPECT_NE(detail::sm80_path().supports(p, info).find("q: the sm80 path needs"), std::string::npos);
  }
  info.has_device = false;
  EXPECT_NE(detail::sm80_path().supports(p, info).find("needs a CUDA device"), std::string::npos);
}

}  // namespace
}  // namespace flashcore
