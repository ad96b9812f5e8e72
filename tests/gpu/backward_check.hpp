// The GPU backward check shared by the naive, sm80 and sm90 backward tests: one call on the device
// against the fp64 CPU reference backward on the same inputs (CPU-reference forward's o and lse),
// gradients poisoned with NaN before every launch and every element checked, ||g - ref|| / ||ref||
// within the dtype's tolerance, and two launches bitwise equal when `expect_repeatable`.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "common/gpu.hpp"
#include "common/tensor_util.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::testing {

template <typename V>
void* upload(const V& host) {
  if (host.empty()) return nullptr;
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, host.size() * sizeof(host[0])), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice), cudaSuccess);
  return dev;
}

struct BackwardCase {
  const char* name;
  TestCase tc;
};

struct BackwardRun {
  KernelPath path = KernelPath::kAuto;
  bool deterministic = false;
  bool expect_repeatable = true;  // two launches must give bitwise-equal gradients
  const char* tag = "bwd";        // prefix of the printed error lines
  double tolerance_scale = 1.0;   // multiplies the dtype's relative-error tolerance
  // Call attention_backward from a new thread that has made no CUDA call (no current context), as
  // PyTorch's autograd threads call it.
  bool on_fresh_thread = false;
};

// The path select_backward_path picks for a call of this shape (device placement only: one buffer
// stands in for every tensor; nothing is launched). Pinned to `pinned` when given.
inline KernelPath chosen_backward_path(const TestCase& c, KernelPath pinned = KernelPath::kAuto,
                                       Status* status = nullptr) {
  HostProblem host = make_problem(c);
  BackwardParams bp;
  bp.forward = host.params;
  bp.forward.path = pinned;
  set_grad_strides_like_forward(bp);
  void* dev = nullptr;
  EXPECT_EQ(cudaMalloc(&dev, 1 << 20), cudaSuccess);
  bp.forward.q = bp.forward.k = bp.forward.v = dev;
  bp.forward.o = dev, bp.forward.lse = static_cast<float*>(dev);
  bp.dout = bp.dq = bp.dk = bp.dv = dev;
  KernelPath path = KernelPath::kAuto;
  const Status st = select_backward_path(bp, &path);
  if (status != nullptr) *status = st;
  cudaFree(dev);
  return path;
}

// Whether `path` takes a dense (dqk, dv) call in dt in this build on this device (FLASHCORE_HEAD_DIMS /
// _DTYPES may prune it; the device preset builds all); prints why not under `tag`.
inline bool backward_path_takes(KernelPath path, int dqk, int dv, DType dt, const char* tag) {
  TestCase tc;
  tc.dtype = dt, tc.seqlen_q = tc.seqlen_k = 16, tc.head_dim_qk = dqk, tc.head_dim_v = dv;
  Status st;
  chosen_backward_path(tc, path, &st);
  if (!st.ok()) std::printf("[%s] %d/%d %s not run: %s\n", tag, dqk, dv, dtype_name(dt), st.message.c_str());
  return st.ok();
}

// The sm80 backward's feature cases for one head-dim pair: dense with Sq != Sk, causal GQA, top-left
// causal with Sq > Sk and ALiBi, window + softcap on scaled inputs, rows without keys, MQA one past a
// block, varlen with seqused_k and tokens past the last sequence.
inline std::vector<BackwardCase> backward_feature_cases(DType dt, int d, int dv = 0) {
  std::vector<BackwardCase> out;
  auto base = [&] {
    TestCase tc;
    tc.dtype = dt;
    tc.batch = 2, tc.seqlen_q = 200, tc.seqlen_k = 333, tc.heads_q = tc.heads_kv = 2;
    tc.head_dim_qk = d, tc.head_dim_v = dv > 0 ? dv : d;
    tc.seed = 100 + d;
    return tc;
  };
  TestCase tc = base();
  out.push_back({"dense Sq 200 Sk 333", tc});
  tc.causal = true, tc.heads_q = 6, tc.heads_kv = 2;
  out.push_back({"causal GQA 6/2", tc});
  tc = base();
  tc.causal = true, tc.align = MaskAlign::kTopLeft, tc.seqlen_q = 300, tc.seqlen_k = 140;
  tc.alibi = testing::AlibiLayout::kPerHead;
  out.push_back({"causal top-left Sq > Sk, ALiBi", tc});
  tc = base();
  tc.window_left = 40, tc.window_right = 7, tc.softcap = 3.0f, tc.input_scale = 2.0f;
  out.push_back({"window, softcap, inputs x2", tc});
  tc = base();
  tc.causal = true, tc.seqlen_q = 260, tc.seqlen_k = 100;  // bottom-right: rows 0..159 see no key
  out.push_back({"rows without keys", tc});
  tc = base();
  tc.heads_q = 4, tc.heads_kv = 1, tc.seqlen_q = tc.seqlen_k = 129;
  out.push_back({"MQA 4/1, one past a block", tc});
  tc = base();
  tc.varlen_q = {33, 0, 171, 64}, tc.varlen_k = {40, 5, 300, 64}, tc.seqused_k = {31, 5, 290, 64}, tc.batch = 4;
  tc.causal = true, tc.varlen_tail_q = 5, tc.varlen_tail_k = 9;  // tokens no sequence owns: zero gradients
  out.push_back({"varlen + seqused_k, tail tokens", tc});
  return out;
}

// Relative error of each gradient (dq, dk, dv) into rel_out when given.
inline void check_backward(const BackwardCase& c, const BackwardRun& run, double* rel_out = nullptr) {
  HostProblem host = make_problem(c.tc);
  ASSERT_TRUE(attention_forward(host.params).ok()) << c.name;  // CPU reference: o, lse
  const int es = dtype_size(c.tc.dtype);
  std::vector<uint8_t> dout(host.o.size());
  std::mt19937 rng(uint32_t(c.tc.seed));
  std::normal_distribution<float> normal;
  for (size_t n = 0; n < dout.size() / es; ++n) {
    const float x = normal(rng);
    if (es == 4) std::memcpy(&dout[n * 4], &x, 4);
    else {  // round to the dtype (bf16: to nearest even)
      uint16_t bits;
      if (c.tc.dtype == DType::kBFloat16) {
        uint32_t u;
        std::memcpy(&u, &x, 4);
        bits = uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
      } else {
        bits = __builtin_bit_cast(uint16_t, static_cast<_Float16>(x));
      }
      std::memcpy(&dout[n * 2], &bits, 2);
    }
  }
  // CPU reference backward on host buffers.
  BackwardParams ref;
  ref.forward = host.params;
  set_grad_strides_like_forward(ref);
  std::vector<uint8_t> dq_ref(host.q.size(), 0xff), dk_ref(host.k.size(), 0xff), dv_ref(host.v.size(), 0xff);
  ref.dout = dout.data(), ref.dq = dq_ref.data(), ref.dk = dk_ref.data(), ref.dv = dv_ref.data();
  ASSERT_TRUE(attention_backward(ref).ok()) << c.name;
  // The same call on the device.
  BackwardParams dev = ref;
  AttentionParams& f = dev.forward;
  f.q = upload(host.q), f.k = upload(host.k), f.v = upload(host.v), f.o = upload(host.o);
  f.lse = static_cast<float*>(upload(host.lse));
  f.cu_seqlens_q = static_cast<const int32_t*>(upload(host.cu_seqlens_q));
  f.cu_seqlens_k = static_cast<const int32_t*>(upload(host.cu_seqlens_k));
  f.seqused_k = static_cast<const int32_t*>(upload(host.seqused_k));
  f.alibi_slopes = static_cast<const float*>(upload(host.alibi_slopes));
  dev.dout = upload(dout);
  std::vector<uint8_t> poison_q(host.q.size(), 0xff), poison_k(host.k.size(), 0xff), poison_v(host.v.size(), 0xff);
  dev.dq = upload(poison_q), dev.dk = upload(poison_k), dev.dv = upload(poison_v);
  f.path = run.path;
  dev.deterministic = run.deterministic;
  std::vector<uint8_t> got[3], again[3];
  for (auto* out : {got, again}) {
    ASSERT_EQ(cudaMemcpy(dev.dq, poison_q.data(), poison_q.size(), cudaMemcpyHostToDevice), cudaSuccess);
    Status st;
    if (run.on_fresh_thread) {
      std::thread caller([&] { st = attention_backward(dev); });
      caller.join();
    } else {
      st = attention_backward(dev);
    }
    ASSERT_TRUE(st.ok()) << c.name << ": " << st.message;
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    void* ptrs[3] = {dev.dq, dev.dk, dev.dv};
    const size_t sizes[3] = {host.q.size(), host.k.size(), host.v.size()};
    for (int t = 0; t < 3; ++t) {
      out[t].resize(sizes[t]);
      ASSERT_EQ(cudaMemcpy(out[t].data(), ptrs[t], sizes[t], cudaMemcpyDeviceToHost), cudaSuccess);
    }
  }
  const std::vector<uint8_t>* refs[3] = {&dq_ref, &dk_ref, &dv_ref};
  const char* names[3] = {"dq", "dk", "dv"};
  for (int t = 0; t < 3; ++t) {
    if (run.expect_repeatable) EXPECT_EQ(got[t], again[t]) << c.name << ": " << names[t] << " differs between two runs";
    double err2 = 0, ref2 = 0, max_abs = 0;
    size_t unwritten = 0;
    for (size_t n = 0; n < got[t].size() / es; ++n) {
      auto value = [&](const std::vector<uint8_t>& v) -> double {
        if (es == 4) { float x; std::memcpy(&x, &v[n * 4], 4); return x; }
        uint16_t bits; std::memcpy(&bits, &v[n * 2], 2);
        if (c.tc.dtype == DType::kBFloat16) { const uint32_t u = uint32_t(bits) << 16; float x; std::memcpy(&x, &u, 4); return x; }
        return double(__builtin_bit_cast(_Float16, bits));
      };
      const double r = value(*refs[t]), g = value(got[t]);
      if (std::isnan(r)) continue;  // padding, never written by either
      if (std::isnan(g)) { ++unwritten; continue; }
      err2 += (g - r) * (g - r), ref2 += r * r, max_abs = std::max(max_abs, std::fabs(g - r));
    }
    EXPECT_EQ(unwritten, 0u) << c.name << ": " << names[t] << " elements left unwritten (NaN poison)";
    const double rel = std::sqrt(err2 / std::max(ref2, 1e-30));
    const double tol = run.tolerance_scale * (es == 4 ? 1e-5 : c.tc.dtype == DType::kBFloat16 ? 2e-2 : 3e-3);
    EXPECT_LE(rel, tol) << c.name << " " << dtype_name(c.tc.dtype) << ": " << names[t] << " rel " << rel
                        << " max_abs " << max_abs;
    if (rel_out != nullptr) rel_out[t] = rel;
    std::printf("[%s] %-32s %-5s %s rel %.2e max_abs %.2e\n", run.tag, c.name, dtype_name(c.tc.dtype), names[t], rel,
                max_abs);
  }
  for (const void* ptr : {f.q, f.k, f.v, static_cast<const void*>(f.o), static_cast<const void*>(f.lse),
                          static_cast<const void*>(f.cu_seqlens_q), static_cast<const void*>(f.cu_seqlens_k),
                          static_cast<const void*>(f.seqused_k), static_cast<const void*>(f.alibi_slopes), dev.dout,
                          static_cast<const void*>(dev.dq), static_cast<const void*>(dev.dk),
                          static_cast<const void*>(dev.dv)}) {
    cudaFree(const_cast<void*>(ptr));
  }
}

// A deterministic-mode case: bf16, B2, GQA 4/2, Sq = Sk = seqlen, head dim d, causal or not.
inline BackwardCase deterministic_case(int d, bool causal, int seqlen, uint64_t seed) {
  TestCase tc;
  tc.dtype = DType::kBFloat16;
  tc.batch = 2, tc.heads_q = 4, tc.heads_kv = 2;
  tc.seqlen_q = tc.seqlen_k = seqlen;
  tc.head_dim_qk = tc.head_dim_v = d;
  tc.causal = causal;
  tc.seed = seed;
  return {causal ? "deterministic causal" : "deterministic", tc};
}

// Every case through check_backward, each traced with its description; returns how many ran.
inline int check_backward_cases(const std::vector<BackwardCase>& cases, const BackwardRun& run) {
  for (const BackwardCase& c : cases) {
    SCOPED_TRACE(TestCase(c.tc).describe());
    check_backward(c, run);
  }
  return int(cases.size());
}

}  // namespace flashcore::testing
