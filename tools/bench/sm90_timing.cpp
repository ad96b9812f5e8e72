// sm90_timing: times the sm90 forward path (and, for comparison, any FLASHCORE_SM90_SCHEDULE
// variant) on the shapes of the sm90 performance targets, following the benchmark protocol: CUDA
// events, warm-up, median of >= 30 runs over rotated input buffers, FLOPs = 4 B Hq Sq Sk D
// (halved for causal). Each row also checks the last (batch, head) of a full launch against the naive
// GPU path on that slice.
//
//   sm90_timing [--iters N] [--schedule serial|overlap] [--quick] [--fp16] [--dim D] [--seqlen S]
// Other tuning knobs are environment variables read by the path (tile_config.hpp).
// Prints one line per configuration: shape, TFLOPS, ms, error vs naive GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "flashcore/flashcore.hpp"

using namespace flashcore;

namespace {

#define TIMING_CUDA(call)                                                                        \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      std::fprintf(stderr, "CUDA error %s at %s:%d (%s)\n", cudaGetErrorString(e_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                              \
    }                                                                                            \
  } while (0)

struct Shape {
  int batch, heads, seqlen, head_dim;
  bool causal;
  DType dtype;
};

struct Buffers {
  void *q, *k, *v, *o;
};

// Random normal fp16/bf16 bits, generated once on the host and copied.
void fill_random(void* dst, size_t count, DType dtype, unsigned seed) {
  std::vector<uint16_t> host(std::min<size_t>(count, (size_t)1 << 24));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : host) {
    const float f = normal(rng);
    x = dtype == DType::kFloat16 ? float_to_fp16(f) : float_to_bf16(f);
  }
  for (size_t off = 0; off < count; off += host.size()) {
    const size_t n = std::min(host.size(), count - off);
    TIMING_CUDA(cudaMemcpy(static_cast<uint16_t*>(dst) + off, host.data(), n * 2, cudaMemcpyHostToDevice));
  }
}

double run_shape(const Shape& s, int iters, const char* schedule) {
  const size_t elems = (size_t)s.batch * s.seqlen * s.heads * s.head_dim;
  // Rotate enough input sets that consecutive runs do not find their inputs in L2 (50 MB).
  const int sets = elems * 2 * 4 >= ((size_t)512 << 20) ? 1 : 3;
  std::vector<Buffers> bufs(sets);
  for (int i = 0; i < sets; ++i) {
    TIMING_CUDA(cudaMalloc(&bufs[i].q, elems * 2));
    TIMING_CUDA(cudaMalloc(&bufs[i].k, elems * 2));
    TIMING_CUDA(cudaMalloc(&bufs[i].v, elems * 2));
    TIMING_CUDA(cudaMalloc(&bufs[i].o, elems * 2));
    fill_random(bufs[i].q, elems, s.dtype, 1 + 3 * i);
    fill_random(bufs[i].k, elems, s.dtype, 2 + 3 * i);
    fill_random(bufs[i].v, elems, s.dtype, 3 + 3 * i);
  }
  AttentionParams p;
  p.batch = s.batch, p.seqlen_q = p.seqlen_k = s.seqlen, p.heads_q = p.heads_kv = s.heads;
  p.head_dim_qk = p.head_dim_v = s.head_dim, p.dtype = s.dtype, p.causal = s.causal;
  p.path = KernelPath::kSm90;
  auto bind = [&](int i) {
    p.q = bufs[i].q, p.k = bufs[i].k, p.v = bufs[i].v, p.o = bufs[i].o;
    set_dense_strides(p);
  };
  if (*schedule) setenv("FLASHCORE_SM90_SCHEDULE", schedule, 1);
  bind(0);
  Status st = attention_forward(p);
  if (!st.ok()) {
    std::printf("  sm90 failed: %s\n", st.message.c_str());
    return 0;
  }
  for (int w = 0; w < 3; ++w) {
    bind(w % sets);
    attention_forward(p);
  }
  std::vector<cudaEvent_t> ev(iters + 1);
  for (auto& e : ev) TIMING_CUDA(cudaEventCreate(&e));
  std::vector<float> ms(iters);
  for (int it = 0; it < iters; ++it) {
    bind(it % sets);
    TIMING_CUDA(cudaEventRecord(ev[it]));
    attention_forward(p);
    TIMING_CUDA(cudaEventRecord(ev[it + 1]));
  }
  TIMING_CUDA(cudaDeviceSynchronize());
  TIMING_CUDA(cudaGetLastError());
  for (int it = 0; it < iters; ++it) TIMING_CUDA(cudaEventElapsedTime(&ms[it], ev[it], ev[it + 1]));
  for (auto& e : ev) cudaEventDestroy(e);
  unsetenv("FLASHCORE_SM90_SCHEDULE");
  std::sort(ms.begin(), ms.end());
  const double median_ms = ms[iters / 2];
  double flops = 4.0 * s.batch * s.heads * (double)s.seqlen * s.seqlen * s.head_dim;
  if (s.causal) flops /= 2;
  const double tflops = flops / (median_ms * 1e-3) / 1e12;

  // Correctness slice: the last (batch, head) of a full launch (computed in the last wave of the
  // persistent scheduler) against the naive GPU path run on that slice alone into a scratch output.
  bind(0);
  st = attention_forward(p);
  void* scratch = nullptr;
  TIMING_CUDA(cudaMalloc(&scratch, elems * 2));
  AttentionParams slice = p;
  const int64_t q_off = (int64_t)(s.batch - 1) * p.q_batch_stride + (int64_t)(s.heads - 1) * p.q_head_stride;
  const int64_t k_off = (int64_t)(s.batch - 1) * p.k_batch_stride + (int64_t)(s.heads - 1) * p.k_head_stride;
  const int64_t o_off = (int64_t)(s.batch - 1) * p.o_batch_stride + (int64_t)(s.heads - 1) * p.o_head_stride;
  slice.q = static_cast<const uint16_t*>(p.q) + q_off;
  slice.k = static_cast<const uint16_t*>(p.k) + k_off;
  slice.v = static_cast<const uint16_t*>(p.v) + k_off;
  slice.o = static_cast<uint16_t*>(scratch) + o_off;
  slice.lse = nullptr;
  slice.batch = 1, slice.heads_q = slice.heads_kv = 1;
  slice.path = KernelPath::kNaiveGpu;
  std::vector<uint16_t> fast((size_t)s.seqlen * s.head_dim), naive(fast.size());
  double max_err = NAN, rel = NAN;
  if (st.ok()) st = attention_forward(slice);
  if (st.ok()) {
    TIMING_CUDA(cudaDeviceSynchronize());
    TIMING_CUDA(cudaMemcpy2D(fast.data(), s.head_dim * 2, static_cast<uint16_t*>(p.o) + o_off, p.o_seq_stride * 2,
                             s.head_dim * 2, s.seqlen, cudaMemcpyDeviceToHost));
    TIMING_CUDA(cudaMemcpy2D(naive.data(), s.head_dim * 2, slice.o, p.o_seq_stride * 2, s.head_dim * 2, s.seqlen,
                             cudaMemcpyDeviceToHost));
    double num = 0, den = 0;
    max_err = 0;
    for (size_t i = 0; i < fast.size(); ++i) {
      auto f = [&](uint16_t b) { return s.dtype == DType::kFloat16 ? fp16_to_float(b) : bf16_to_float(b); };
      const double a = f(fast[i]), b = f(naive[i]);
      max_err = std::max(max_err, std::fabs(a - b));
      num += (a - b) * (a - b), den += b * b;
      if (std::isnan(a)) max_err = NAN;
    }
    rel = std::sqrt(num / den);
  }
  cudaFree(scratch);
  std::printf("sm90%s%-8s d%-3d %s B=%d H=%d S=%-5d %-10s %8.1f TFLOPS %9.3f ms   vs naive: max %.2e rel %.2e\n",
              *schedule ? "/" : "", schedule, s.head_dim, dtype_name(s.dtype), s.batch, s.heads, s.seqlen,
              s.causal ? "causal" : "non-causal", tflops, median_ms, max_err, rel);
  std::fflush(stdout);
  for (auto& b : bufs) cudaFree(b.q), cudaFree(b.k), cudaFree(b.v), cudaFree(b.o);
  return tflops;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 30;
  const char* schedule = "";
  bool quick = false;
  bool fp16_only = false;
  int only_dim = 0;
  int only_seqlen = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) iters = std::max(30, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--schedule") && i + 1 < argc) schedule = argv[++i];
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--fp16")) fp16_only = true;
    else if (!std::strcmp(argv[i], "--dim") && i + 1 < argc) only_dim = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seqlen") && i + 1 < argc) only_seqlen = std::atoi(argv[++i]);
  }
  std::vector<Shape> shapes;
  for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
    for (int s : {1024, 2048, 4096, 8192, 16384}) {
      if (quick && s != 1024 && s != 16384) continue;
      for (bool causal : {false, true}) shapes.push_back({4, 32, s, 128, causal, dt});
    }
    if (quick && dt == DType::kBFloat16) continue;
    // B*S = 16k tokens, H*D = 2048.
    for (bool causal : {false, true}) {
      shapes.push_back({2, 32, 8192, 64, causal, dt});
      shapes.push_back({2, 8, 8192, 256, causal, dt});
    }
  }
  for (const Shape& s : shapes) {
    if (fp16_only && s.dtype != DType::kFloat16) continue;
    if (only_dim != 0 && s.head_dim != only_dim) continue;
    if (only_seqlen != 0 && s.seqlen != only_seqlen) continue;
    run_shape(s, iters, schedule);
  }
  return 0;
}
