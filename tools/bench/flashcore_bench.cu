// flashcore-bench: times flashcore's forward pass on the standard suite (or one configuration from
// the command line) following the benchmark protocol of docs: CUDA events, warm-up, the median of
// >= 30 runs over rotated input buffers, TFLOPS and achieved bandwidth, and a correctness column
// (max error against the naive GPU reference on a slice of the problem). Writes a terminal table and
// optionally JSON / CSV / Markdown. With no GPU it says so and runs the CPU reference on a small case.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_config.hpp"
#include "common/dtype.hpp"
#include "flashcore/flashcore.hpp"

namespace fb = flashcore::bench;
using flashcore::AttentionParams;
using flashcore::BackwardParams;
using flashcore::DType;
using flashcore::KernelPath;
using flashcore::Status;

namespace {

#define BENCH_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorName(e_), __FILE__, __LINE__, #call); \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------
struct Options {
  bool suite_given = false;
  std::string suite = "standard";  // standard | quick | single
  fb::BenchConfig single;
  bool single_given = false;
  int iters = 30;
  int warmup = 5;
  bool check = true;
  std::string json_path, csv_path, md_path;
  double naive_flop_limit = 2e12;  // auto-picked naive path above this many FLOPs is skipped
  std::string command;
  KernelPath path = KernelPath::kAuto;  // applied to every configuration
  std::string pass = "fwd";             // fwd | bwd | fwd+bwd
  bool deterministic = false;           // the backward's deterministic mode (BackwardParams)
};

void usage() {
  std::printf(
      "usage: flashcore-bench [--suite standard|quick] [options for one configuration]\n"
      "  one configuration (any of these switches to a single run):\n"
      "    --batch N --seqlen-q N --seqlen-k N --seqlen N --heads-q N --heads-kv N --heads N\n"
      "    --dqk N --dv N --dim N --dtype fp16|bf16|fp32 --causal [--align br|tl]\n"
      "    --window L,R --softcap C --varlen L1,L2,... (query=key lengths) --varlen-k L1,L2,... (key lengths)\n"
      "    --page-size N [--pages-in-order]   K/V in a pool of N-row pages read through a block table\n"
      "      (the table's pages shuffled unless --pages-in-order; forward only)\n"
      "  --path auto|sm90|sm80|naive|cpu   kernel path (default auto)\n"
      "  --pass fwd|bwd|fwd+bwd   what is timed (backward FLOPs = 2.5x forward; fwd+bwd 3.5x)\n"
      "  --deterministic   the backward in deterministic mode (bitwise-repeatable dQ)\n"
      "  --override KEY=N[,KEY=N...]   force the sm90 plan's choices (A/B runs; flashcore::ForwardOverrides):\n"
      "    schedule, block_n, always_rescale, cluster, long_tiles, short_tiles, pair_tiles,\n"
      "    heads_per_group, stream_k, max_grid_units\n"
      "  --iters N (>= 30 recommended; default 30)   --warmup N   --no-check\n"
      "  --json FILE --csv FILE --md FILE\n");
}

std::vector<int> parse_int_list(const char* s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::atoi(item.c_str()));
  return out;
}

// --override: the plan overrides every call of this run gets (make_params).
flashcore::ForwardOverrides g_overrides;

void parse_overrides(const char* s) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    const int value = eq == std::string::npos ? 1 : std::atoi(item.c_str() + eq + 1);
    flashcore::ForwardOverrides& o = g_overrides;
    int* field = key == "schedule" ? &o.schedule : key == "block_n" ? &o.block_n
               : key == "always_rescale" ? &o.always_rescale : key == "cluster" ? &o.cluster
               : key == "long_tiles" ? &o.long_tiles : key == "short_tiles" ? &o.short_tiles
               : key == "pair_tiles" ? &o.pair_tiles : key == "heads_per_group" ? &o.heads_per_group
               : key == "stream_k" ? &o.stream_k : key == "max_grid_units" ? &o.max_grid_units : nullptr;
    if (field == nullptr) {
      std::fprintf(stderr, "--override: unknown key '%s'\n", key.c_str());
      std::exit(2);
    }
    *field = value;
  }
}

KernelPath parse_path(const std::string& s) {
  if (s == "auto") return KernelPath::kAuto;
  if (s == "sm90") return KernelPath::kSm90;
  if (s == "sm80") return KernelPath::kSm80;
  if (s == "naive") return KernelPath::kNaiveGpu;
  if (s == "cpu") return KernelPath::kCpuReference;
  std::fprintf(stderr, "--path: unknown path '%s'\n", s.c_str());
  std::exit(2);
}

DType parse_dtype(const std::string& s) {
  if (s == "fp16") return DType::kFloat16;
  if (s == "bf16") return DType::kBFloat16;
  if (s == "fp32") return DType::kFloat32;
  std::fprintf(stderr, "--dtype: unknown dtype '%s' (fp16, bf16, fp32)\n", s.c_str());
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 0; i < argc; ++i) o.command += (i ? " " : "") + std::string(argv[i]);
  fb::BenchConfig& c = o.single;
  c.family = "custom";
  KernelPath path = KernelPath::kAuto;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) { std::fprintf(stderr, "%s needs a value\n", a.c_str()); std::exit(2); }
      return argv[++i];
    };
    auto single = [&]() { o.single_given = true; };
    if (a == "--help" || a == "-h") { usage(); std::exit(0); }
    else if (a == "--suite") { o.suite = next(); o.suite_given = true; }
    else if (a == "--batch") { c.batch = std::atoi(next()); single(); }
    else if (a == "--seqlen") { c.seqlen_q = c.seqlen_k = std::atoi(next()); single(); }
    else if (a == "--seqlen-q") { c.seqlen_q = std::atoi(next()); single(); }
    else if (a == "--seqlen-k") { c.seqlen_k = std::atoi(next()); single(); }
    else if (a == "--heads") { c.heads_q = c.heads_kv = std::atoi(next()); single(); }
    else if (a == "--heads-q") { c.heads_q = std::atoi(next()); single(); }
    else if (a == "--heads-kv") { c.heads_kv = std::atoi(next()); single(); }
    else if (a == "--dim") { c.head_dim_qk = c.head_dim_v = std::atoi(next()); single(); }
    else if (a == "--dqk") { c.head_dim_qk = std::atoi(next()); single(); }
    else if (a == "--dv") { c.head_dim_v = std::atoi(next()); single(); }
    else if (a == "--dtype") { c.dtype = parse_dtype(next()); single(); }
    else if (a == "--causal") { c.causal = true; single(); }
    else if (a == "--align") { c.align = std::string(next()) == "tl" ? flashcore::MaskAlign::kTopLeft : flashcore::MaskAlign::kBottomRight; single(); }
    else if (a == "--window") { auto w = parse_int_list(next()); c.window_left = w.at(0); c.window_right = w.size() > 1 ? w[1] : w[0]; single(); }
    else if (a == "--softcap") { c.softcap = float(std::atof(next())); single(); }
    else if (a == "--varlen") { c.varlen_q = parse_int_list(next()); single(); }
    else if (a == "--varlen-k") { c.varlen_k = parse_int_list(next()); single(); }
    else if (a == "--page-size") { c.page_size = std::atoi(next()); single(); }
    else if (a == "--pages-in-order") { c.pages_in_order = true; single(); }
    else if (a == "--path") { path = parse_path(next()); }
    else if (a == "--override") { parse_overrides(next()); }
    else if (a == "--iters") { o.iters = std::max(1, std::atoi(next())); }
    else if (a == "--warmup") { o.warmup = std::max(0, std::atoi(next())); }
    else if (a == "--no-check") { o.check = false; }
    else if (a == "--deterministic") { o.deterministic = true; }
    else if (a == "--pass") {
      o.pass = next();
      if (o.pass != "fwd" && o.pass != "bwd" && o.pass != "fwd+bwd") {
        std::fprintf(stderr, "--pass: unknown pass '%s' (fwd, bwd, fwd+bwd)\n", o.pass.c_str());
        std::exit(2);
      }
    }
    else if (a == "--json") { o.json_path = next(); }
    else if (a == "--csv") { o.csv_path = next(); }
    else if (a == "--md") { o.md_path = next(); }
    else { std::fprintf(stderr, "unknown argument '%s'\n", a.c_str()); usage(); std::exit(2); }
  }
  if (!c.varlen_k.empty() && c.varlen_k.size() != c.varlen_q.size()) {
    std::fprintf(stderr, "--varlen-k: needs --varlen with as many lengths (got %zu and %zu)\n", c.varlen_k.size(),
                 c.varlen_q.size());
    std::exit(2);
  }
  if (c.is_varlen()) {
    c.batch = int(c.varlen_q.size());
    c.seqlen_q = c.seqlen_k = *std::max_element(c.varlen_q.begin(), c.varlen_q.end());
    if (!c.varlen_k.empty()) c.seqlen_k = *std::max_element(c.varlen_k.begin(), c.varlen_k.end());
  }
  if (c.page_size < 0 || (c.is_paged() && o.pass != "fwd")) {
    std::fprintf(stderr, "--page-size: a positive page size, with --pass fwd (the backward takes no block table)\n");
    std::exit(2);
  }
  c.path = path;
  if (o.single_given && !o.suite_given) o.suite = "single";
  o.path = path;
  return o;
}


// ---------------------------------------------------------------------------------------------
// Device buffers for one configuration
// ---------------------------------------------------------------------------------------------

// Deterministic pseudo-normal values (hash -> Box-Muller), so inputs are random but reproducible.
__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return uint32_t(x);
}

__global__ void fill_normal(void* out, int64_t n, DType dtype, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float u1 = (hash32(seed * 0x9E3779B97F4A7C15ull + 2 * i) + 1.0f) * 2.3283064e-10f;
    const float u2 = hash32(seed * 0x9E3779B97F4A7C15ull + 2 * i + 1) * 2.3283064e-10f;
    const float z = scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);
    if (dtype == DType::kFloat32) static_cast<float*>(out)[i] = z;
    else if (dtype == DType::kFloat16) static_cast<__half*>(out)[i] = __float2half_rn(z);
    else static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(z);
  }
}

// Counts elements that are not finite (poison left unwritten, or NaN/Inf produced).
__global__ void count_nonfinite(const void* data, int64_t n, DType dtype, unsigned long long* count) {
  unsigned long long local = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float x;
    if (dtype == DType::kFloat32) x = static_cast<const float*>(data)[i];
    else if (dtype == DType::kFloat16) x = __half2float(static_cast<const __half*>(data)[i]);
    else x = __bfloat162float(static_cast<const __nv_bfloat16*>(data)[i]);
    local += isfinite(x) ? 0 : 1;
  }
  if (local) atomicAdd(count, local);
}

struct DeviceProblem {
  std::vector<void*> q, k, v;  // rotated input sets
  void* o = nullptr;
  float* lse = nullptr;
  int32_t* cu_seqlens = nullptr;
  int32_t* block_table = nullptr;  // paged: [batch, pages_per_seq]
  int pages_per_seq = 0, num_pages = 0;
  int64_t total_q = 0, total_k = 0;
  int64_t q_elems = 0, k_elems = 0, v_elems = 0, o_elems = 0, lse_elems = 0;

  void release() {
    for (void* p : q) cudaFree(p);
    for (void* p : k) cudaFree(p);
    for (void* p : v) cudaFree(p);
    cudaFree(o); cudaFree(lse); cudaFree(cu_seqlens); cudaFree(block_table);
    q.clear(); k.clear(); v.clear(); o = nullptr; lse = nullptr; cu_seqlens = nullptr; block_table = nullptr;
  }
};

AttentionParams make_params(const fb::BenchConfig& c, const DeviceProblem& dp, int set) {
  AttentionParams p;
  p.overrides = &g_overrides;
  p.q = dp.q[set]; p.k = dp.k[set]; p.v = dp.v[set]; p.o = dp.o; p.lse = dp.lse;
  p.batch = c.batch; p.seqlen_q = c.seqlen_q; p.seqlen_k = c.seqlen_k;
  p.heads_q = c.heads_q; p.heads_kv = c.heads_kv;
  p.head_dim_qk = c.head_dim_qk; p.head_dim_v = c.head_dim_v;
  p.dtype = c.dtype; p.causal = c.causal; p.mask_align = c.align;
  p.window_left = c.window_left; p.window_right = c.window_right; p.softcap = c.softcap;
  p.path = c.path;
  if (c.is_varlen()) {
    p.cu_seqlens_q = dp.cu_seqlens;
    p.cu_seqlens_k = dp.cu_seqlens + (c.batch + 1);
    p.total_q = dp.total_q;
    p.total_k = dp.total_k;
  }
  flashcore::set_dense_strides(p);
  if (c.is_paged()) {  // k, v: [num_pages, page_size, Hkv, D]
    p.block_table = dp.block_table;
    p.block_table_batch_stride = dp.pages_per_seq;
    p.pages_per_seq = dp.pages_per_seq;
    p.page_size = c.page_size;
    p.num_pages = dp.num_pages;
    p.k_batch_stride = int64_t(c.page_size) * p.k_seq_stride;
    p.v_batch_stride = int64_t(c.page_size) * p.v_seq_stride;
  }
  return p;
}

int rotation_sets(const fb::BenchConfig& c, size_t l2_bytes, size_t set_bytes, size_t free_bytes) {
  // Enough input sets that one pass over all of them is >= 4x the L2, so no run starts warm.
  int sets = int(std::ceil(4.0 * double(l2_bytes) / double(std::max<size_t>(set_bytes, 1))));
  sets = std::clamp(sets, 1, 32);
  while (sets > 1 && double(sets) * set_bytes > 0.5 * double(free_bytes)) --sets;
  (void)c;
  return sets;
}

void allocate(const fb::BenchConfig& c, DeviceProblem& dp, size_t l2_bytes) {
  const int es = flashcore::dtype_size(c.dtype);
  if (c.is_varlen()) {
    std::vector<int32_t> cu(2 * (c.batch + 1), 0);
    for (int b = 0; b < c.batch; ++b) {
      cu[b + 1] = cu[b] + c.varlen_q[b];
      const int lk = c.varlen_k.empty() ? c.varlen_q[b] : c.varlen_k[b];
      cu[c.batch + 1 + b + 1] = cu[c.batch + 1 + b] + lk;
    }
    dp.total_q = cu[c.batch];
    dp.total_k = cu[2 * c.batch + 1];
    BENCH_CUDA(cudaMalloc(&dp.cu_seqlens, cu.size() * sizeof(int32_t)));
    BENCH_CUDA(cudaMemcpy(dp.cu_seqlens, cu.data(), cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  } else {
    dp.total_q = int64_t(c.batch) * c.seqlen_q;
    dp.total_k = int64_t(c.batch) * c.seqlen_k;
  }
  int64_t key_rows = dp.total_k;  // rows of k and v
  if (c.is_paged()) {
    // Each entry's table row holds ceil(longest sequence / page_size) pages of a pool of
    // batch x that many pages; the table is the pool's pages in order or in a fixed shuffle.
    dp.pages_per_seq = (c.seqlen_k + c.page_size - 1) / c.page_size;
    dp.num_pages = c.batch * dp.pages_per_seq;
    key_rows = int64_t(dp.num_pages) * c.page_size;
    std::vector<int32_t> table(size_t(dp.num_pages));
    std::iota(table.begin(), table.end(), 0);
    if (!c.pages_in_order) std::shuffle(table.begin(), table.end(), std::mt19937(7));
    BENCH_CUDA(cudaMalloc(&dp.block_table, table.size() * sizeof(int32_t)));
    BENCH_CUDA(cudaMemcpy(dp.block_table, table.data(), table.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  }
  dp.q_elems = dp.total_q * c.heads_q * c.head_dim_qk;
  dp.k_elems = key_rows * c.heads_kv * c.head_dim_qk;
  dp.v_elems = key_rows * c.heads_kv * c.head_dim_v;
  dp.o_elems = dp.total_q * c.heads_q * c.head_dim_v;
  dp.lse_elems = dp.total_q * c.heads_q;
  const size_t set_bytes = size_t(es) * (dp.q_elems + dp.k_elems + dp.v_elems);
  size_t free_bytes = 0, total_bytes = 0;
  BENCH_CUDA(cudaMemGetInfo(&free_bytes, &total_bytes));
  const int sets = rotation_sets(c, l2_bytes, set_bytes, free_bytes);
  uint64_t seed = 1234;
  for (int s = 0; s < sets; ++s) {
    void *q, *k, *v;
    BENCH_CUDA(cudaMalloc(&q, size_t(es) * dp.q_elems));
    BENCH_CUDA(cudaMalloc(&k, size_t(es) * dp.k_elems));
    BENCH_CUDA(cudaMalloc(&v, size_t(es) * dp.v_elems));
    fill_normal<<<1024, 256>>>(q, dp.q_elems, c.dtype, seed++, 1.0f);
    fill_normal<<<1024, 256>>>(k, dp.k_elems, c.dtype, seed++, 1.0f);
    fill_normal<<<1024, 256>>>(v, dp.v_elems, c.dtype, seed++, 1.0f);
    BENCH_CUDA(cudaGetLastError());
    dp.q.push_back(q); dp.k.push_back(k); dp.v.push_back(v);
  }
  BENCH_CUDA(cudaMalloc(&dp.o, size_t(es) * dp.o_elems));
  BENCH_CUDA(cudaMalloc(&dp.lse, sizeof(float) * dp.lse_elems));
  BENCH_CUDA(cudaDeviceSynchronize());
}

// ---------------------------------------------------------------------------------------------
// One row of results
// ---------------------------------------------------------------------------------------------
struct Result {
  fb::BenchConfig config;
  std::string impl;         // flashcore-<path>
  std::string pass = "fwd";
  bool ran = false;
  double ms = 0, tflops = 0, gbps = 0;
  double max_err = -1;      // < 0: not measured
  std::string note;
};

// Correctness on a slice: batch entry 0 (or every varlen sequence) and the query heads of the first
// KV head, against the naive GPU reference. Also checks that every output element was written
// (outputs are poisoned with NaN first) and that nothing is NaN/Inf.
std::string check_against_reference(const fb::BenchConfig& c, const DeviceProblem& dp, KernelPath chosen,
                                    double* max_err) {
  const int es = flashcore::dtype_size(c.dtype);
  AttentionParams p = make_params(c, dp, 0);
  p.path = chosen;
  BENCH_CUDA(cudaMemset(dp.o, 0xff, size_t(es) * dp.o_elems));  // NaN in fp16, bf16 and fp32
  Status st = flashcore::attention_forward(p, nullptr);
  if (!st.ok()) return "run failed: " + st.message;
  BENCH_CUDA(cudaDeviceSynchronize());
  unsigned long long* bad;
  BENCH_CUDA(cudaMalloc(&bad, sizeof(*bad)));
  BENCH_CUDA(cudaMemset(bad, 0, sizeof(*bad)));
  count_nonfinite<<<1024, 256>>>(dp.o, dp.o_elems, c.dtype, bad);
  unsigned long long bad_host = 0;
  BENCH_CUDA(cudaMemcpy(&bad_host, bad, sizeof(bad_host), cudaMemcpyDeviceToHost));
  cudaFree(bad);
  if (bad_host) return std::to_string(bad_host) + " output elements not finite (unwritten or NaN)";
  if (chosen == KernelPath::kNaiveGpu) return "";  // it is the reference

  // Reference slice.
  const int group = c.heads_q / c.heads_kv;
  AttentionParams r = p;
  r.path = KernelPath::kNaiveGpu;
  r.heads_q = group;
  r.heads_kv = 1;
  if (!c.is_varlen()) r.batch = 1;
  const int64_t rows = c.is_varlen() ? dp.total_q : c.seqlen_q;
  const int64_t slice_elems = rows * p.o_seq_stride;  // rows x (all heads) x Dv, o's layout
  void* o_ref;
  BENCH_CUDA(cudaMalloc(&o_ref, size_t(es) * slice_elems));
  r.o = o_ref;
  r.lse = nullptr;
  st = flashcore::attention_forward(r, nullptr);
  if (!st.ok()) { cudaFree(o_ref); return "reference failed: " + st.message; }
  std::vector<uint16_t> got(size_t(slice_elems) * es / 2), want(size_t(slice_elems) * es / 2);
  BENCH_CUDA(cudaMemcpy(got.data(), dp.o, size_t(es) * slice_elems, cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaMemcpy(want.data(), o_ref, size_t(es) * slice_elems, cudaMemcpyDeviceToHost));
  cudaFree(o_ref);
  double err = 0;
  for (int64_t row = 0; row < rows; ++row)
    for (int h = 0; h < group; ++h)
      for (int d = 0; d < c.head_dim_v; ++d) {
        const int64_t idx = row * p.o_seq_stride + h * p.o_head_stride + d;
        const float a = flashcore::load_as_float(got.data(), idx, c.dtype);
        const float b = flashcore::load_as_float(want.data(), idx, c.dtype);
        err = std::max(err, double(std::fabs(a - b)));
      }
  *max_err = err;
  return "";
}

// Times `iters` calls call(i) as the benchmark protocol does: an event pair around each call and one
// synchronization after the last, so the host enqueues ahead of the GPU and a call's time is its GPU
// time (and the stream-ordered pool keeps workspaces between calls instead of returning them at
// each sync). Stops at the first failed call and returns its status; `times` holds the calls before.
Status time_each_call(int iters, const std::function<Status(int)>& call, std::vector<float>* times) {
  std::vector<cudaEvent_t> start(static_cast<size_t>(iters)), stop(static_cast<size_t>(iters));
  for (int i = 0; i < iters; ++i) {
    BENCH_CUDA(cudaEventCreate(&start[size_t(i)]));
    BENCH_CUDA(cudaEventCreate(&stop[size_t(i)]));
  }
  Status st = Status::Ok();
  int done = 0;
  for (; done < iters; ++done) {
    BENCH_CUDA(cudaEventRecord(start[size_t(done)]));
    st = call(done);
    BENCH_CUDA(cudaEventRecord(stop[size_t(done)]));
    if (!st.ok()) break;
  }
  BENCH_CUDA(cudaDeviceSynchronize());
  times->clear();
  for (int i = 0; i < iters; ++i) {
    if (i < done) {
      float ms = 0;
      BENCH_CUDA(cudaEventElapsedTime(&ms, start[size_t(i)], stop[size_t(i)]));
      times->push_back(ms);
    }
    cudaEventDestroy(start[size_t(i)]);
    cudaEventDestroy(stop[size_t(i)]);
  }
  return st;
}

// The backward (or forward + backward) of one configuration: the forward runs once for o and lse,
// then the gradients are checked for being written and finite (NaN poison first; their values are
// the tests' business) and timed. The backward runs on --path where that path has a backward (sm80,
// naive, cpu), else on automatic selection; the row is named after the path that ran
// (flashcore-<path>, with "-det" in deterministic mode).
Result run_backward_config(const fb::BenchConfig& c, const Options& opt, const cudaDeviceProp& prop) {
  Result res;
  res.config = c;
  res.pass = opt.pass;
  const double flops = fb::forward_flops(c) * (opt.pass == "bwd" ? 2.5 : 3.5);
  DeviceProblem dp;
  allocate(c, dp, prop.l2CacheSize);
  const int es = flashcore::dtype_size(c.dtype);
  AttentionParams f = make_params(c, dp, 0);
  f.path = c.path == KernelPath::kNaiveGpu ? KernelPath::kAuto : c.path;
  f.check_device_metadata = false;
  Status st = flashcore::attention_forward(f, nullptr);
  void *dout = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  BENCH_CUDA(cudaMalloc(&dout, size_t(es) * dp.o_elems));
  BENCH_CUDA(cudaMalloc(&dq, size_t(es) * dp.q_elems));
  BENCH_CUDA(cudaMalloc(&dk, size_t(es) * dp.k_elems));
  BENCH_CUDA(cudaMalloc(&dv, size_t(es) * dp.v_elems));
  fill_normal<<<1024, 256>>>(dout, dp.o_elems, c.dtype, 99, 1.0f);
  BackwardParams bp;
  bp.forward = f;
  const bool path_has_backward = c.path == KernelPath::kSm80 || c.path == KernelPath::kNaiveGpu ||
                                 c.path == KernelPath::kCpuReference;
  bp.forward.path = path_has_backward ? c.path : KernelPath::kAuto;
  bp.deterministic = opt.deterministic;
  flashcore::set_grad_strides_like_forward(bp);
  bp.dout = dout, bp.dq = dq, bp.dk = dk, bp.dv = dv;
  auto release = [&] { cudaFree(dout); cudaFree(dq); cudaFree(dk); cudaFree(dv); dp.release(); };
  KernelPath chosen = KernelPath::kAuto;
  if (st.ok()) st = flashcore::select_backward_path(bp, &chosen);
  res.impl = std::string("flashcore-") + flashcore::kernel_path_name(chosen) + (opt.deterministic ? "-det" : "");
  if (st.ok() && c.path == KernelPath::kAuto && chosen == KernelPath::kNaiveGpu && flops > opt.naive_flop_limit) {
    res.note = "skipped: only the naive GPU backward runs this call (use --path naive to time it anyway)";
    release();
    return res;
  }
  if (st.ok() && opt.check) {
    BENCH_CUDA(cudaMemset(dq, 0xff, size_t(es) * dp.q_elems));
    BENCH_CUDA(cudaMemset(dk, 0xff, size_t(es) * dp.k_elems));
    BENCH_CUDA(cudaMemset(dv, 0xff, size_t(es) * dp.v_elems));
    st = flashcore::attention_backward(bp, nullptr);
    BENCH_CUDA(cudaDeviceSynchronize());
    unsigned long long* bad;
    BENCH_CUDA(cudaMalloc(&bad, sizeof(*bad)));
    BENCH_CUDA(cudaMemset(bad, 0, sizeof(*bad)));
    count_nonfinite<<<1024, 256>>>(dq, dp.q_elems, c.dtype, bad);
    count_nonfinite<<<1024, 256>>>(dk, dp.k_elems, c.dtype, bad);
    count_nonfinite<<<1024, 256>>>(dv, dp.v_elems, c.dtype, bad);
    unsigned long long bad_host = 0;
    BENCH_CUDA(cudaMemcpy(&bad_host, bad, sizeof(bad_host), cudaMemcpyDeviceToHost));
    cudaFree(bad);
    if (st.ok() && bad_host) {
      res.note = "FAILED check: " + std::to_string(bad_host) + " gradient elements not finite (unwritten or NaN)";
      release();
      return res;
    }
  }
  auto step = [&] {
    Status s = Status::Ok();
    if (opt.pass == "fwd+bwd") s = flashcore::attention_forward(f, nullptr);
    return s.ok() ? flashcore::attention_backward(bp, nullptr) : s;
  };
  for (int i = 0; st.ok() && i < opt.warmup; ++i) st = step();
  std::vector<float> times;
  if (st.ok()) st = time_each_call(opt.iters, [&](int) { return step(); }, &times);
  if (!st.ok()) {
    res.note = "run failed: " + st.message;
    std::replace(res.note.begin(), res.note.end(), '\n', ' ');
  } else {
    std::sort(times.begin(), times.end());
    res.ms = times[times.size() / 2];
    res.tflops = flops / (res.ms * 1e-3) / 1e12;
    res.ran = true;
    res.note = "one input set (no rotation)";
  }
  release();
  return res;
}

Result run_config(const fb::BenchConfig& c, const Options& opt, const cudaDeviceProp& prop) {
  if (opt.pass != "fwd") return run_backward_config(c, opt, prop);
  Result res;
  res.config = c;
  DeviceProblem dp;
  allocate(c, dp, prop.l2CacheSize);
  AttentionParams p = make_params(c, dp, 0);
  KernelPath chosen = KernelPath::kAuto;
  Status st = flashcore::select_path(p, &chosen);
  if (!st.ok()) {
    res.impl = std::string("flashcore-") + flashcore::kernel_path_name(c.path);
    res.note = "n/a: " + st.message;
    std::replace(res.note.begin(), res.note.end(), '\n', ' ');
    dp.release();
    return res;
  }
  res.impl = std::string("flashcore-") + flashcore::kernel_path_name(chosen);
  const double flops = fb::forward_flops(c);
  if (c.path == KernelPath::kAuto && chosen == KernelPath::kNaiveGpu && flops > opt.naive_flop_limit) {
    res.note = "skipped: only the naive reference path supports this row in this build (use --path naive)";
    dp.release();
    return res;
  }
  if (opt.check) {
    const std::string problem = check_against_reference(c, dp, chosen, &res.max_err);
    if (!problem.empty()) {
      res.note = "FAILED check: " + problem;
      dp.release();
      return res;
    }
  }
  const int sets = int(dp.q.size());
  std::vector<AttentionParams> params;
  for (int s = 0; s < sets; ++s) {
    params.push_back(make_params(c, dp, s));
    params.back().path = chosen;
    params.back().check_device_metadata = false;  // checked once above; no per-call sync while timing
  }
  for (int i = 0; i < opt.warmup; ++i) {
    st = flashcore::attention_forward(params[i % sets], nullptr);
    if (!st.ok()) { res.note = "run failed: " + st.message; dp.release(); return res; }
  }
  std::vector<float> times;
  st = time_each_call(opt.iters, [&](int i) { return flashcore::attention_forward(params[i % sets], nullptr); },
                      &times);
  if (!st.ok()) res.note = "run failed: " + st.message;
  if (st.ok()) {
    std::sort(times.begin(), times.end());
    res.ms = times[times.size() / 2];
    res.tflops = flops / (res.ms * 1e-3) / 1e12;
    res.gbps = fb::forward_min_bytes(c) / (res.ms * 1e-3) / 1e9;
    res.ran = true;
    if (sets > 1) res.note = std::to_string(sets) + " rotated input sets";
  }
  dp.release();
  return res;
}

// ---------------------------------------------------------------------------------------------
// Output
// ---------------------------------------------------------------------------------------------
std::string json_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') { out += '\\'; out += ch; }
    else if (ch == '\n') out += "\\n";
    else out += ch;
  }
  return out;
}

std::string window_str(const fb::BenchConfig& c) {
  if (c.window_left < 0 && c.window_right < 0) return "null";
  return "[" + std::to_string(c.window_left) + ", " + std::to_string(c.window_right) + "]";
}

std::string now_utc() {
  std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

std::string commit_id() {
  const char* env = std::getenv("FLASHCORE_COMMIT");
  return env ? env : "unknown";
}

void write_json(const std::string& path, const std::vector<Result>& results, const Options& opt,
                const std::string& device) {
  std::ofstream f(path);
  f << "{\n  \"device\": \"" << json_escape(device) << "\",\n  \"date\": \"" << now_utc() << "\",\n"
    << "  \"commit\": \"" << json_escape(commit_id()) << "\",\n  \"command\": \"" << json_escape(opt.command)
    << "\",\n  \"rows\": [\n";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const fb::BenchConfig& c = r.config;
    char num[256];
    f << "    {\"impl\": \"" << r.impl << "\", \"pass\": \"" << r.pass << "\", \"family\": \"" << c.family << "\", \"dtype\": \""
      << flashcore::dtype_name(c.dtype) << "\", \"B\": " << c.batch << ", \"Hq\": " << c.heads_q
      << ", \"Hkv\": " << c.heads_kv << ", \"Sq\": " << c.seqlen_q << ", \"Sk\": " << c.seqlen_k
      << ", \"Dqk\": " << c.head_dim_qk << ", \"Dv\": " << c.head_dim_v << ", \"causal\": "
      << (c.causal ? "true" : "false") << ", \"window\": " << window_str(c) << ", \"page_size\": " << c.page_size
      << ", ";
    if (r.ran) std::snprintf(num, sizeof(num), "\"ms\": %.5f, \"tflops\": %.2f, \"gbps\": %.1f", r.ms, r.tflops, r.gbps);
    else std::snprintf(num, sizeof(num), "\"ms\": null, \"tflops\": null, \"gbps\": null");
    f << num << ", \"max_err\": ";
    if (r.max_err >= 0) { std::snprintf(num, sizeof(num), "%.6g", r.max_err); f << num; } else f << "null";
    f << ", \"note\": \"" << json_escape(r.note) << "\"}" << (i + 1 < results.size() ? "," : "") << "\n";
  }
  f << "  ]\n}\n";
}

void write_csv(const std::string& path, const std::vector<Result>& results) {
  std::ofstream f(path);
  f << "impl,pass,family,dtype,B,Hq,Hkv,Sq,Sk,Dqk,Dv,causal,ms,tflops,gbps,max_err,note\n";
  for (const Result& r : results) {
    const fb::BenchConfig& c = r.config;
    f << r.impl << "," << r.pass << "," << c.family << "," << flashcore::dtype_name(c.dtype) << "," << c.batch << "," << c.heads_q
      << "," << c.heads_kv << "," << c.seqlen_q << "," << c.seqlen_k << "," << c.head_dim_qk << "," << c.head_dim_v
      << "," << (c.causal ? 1 : 0) << ",";
    if (r.ran) f << r.ms << "," << r.tflops << "," << r.gbps;
    else f << ",,";
    f << "," << (r.max_err >= 0 ? std::to_string(r.max_err) : "") << ",\"" << r.note << "\"\n";
  }
}

std::string table_row(const Result& r, bool markdown) {
  const fb::BenchConfig& c = r.config;
  const std::string impl = r.pass == "fwd" ? r.impl : r.impl + " (" + r.pass + ")";
  char buf[512];
  char err[32] = "-";
  if (r.max_err >= 0) std::snprintf(err, sizeof(err), "%.2e", r.max_err);
  if (r.ran) {
    std::snprintf(buf, sizeof(buf), markdown ? "| %s | %s | %d | %d | %d/%d | %d/%d | %s | %.3f | %.1f | %.0f | %s | %s |"
                                             : "%-22s %-16s %3d %6d %3d/%-3d %3d/%-3d %-5s %9.3f %8.1f %8.0f %9s  %s",
                  c.family.c_str(), impl.c_str(), c.batch, c.seqlen_q, c.heads_q, c.heads_kv, c.head_dim_qk,
                  c.head_dim_v, c.causal ? "yes" : "no", r.ms, r.tflops, r.gbps, err, r.note.c_str());
  } else {
    std::snprintf(buf, sizeof(buf), markdown ? "| %s | %s | %d | %d | %d/%d | %d/%d | %s | - | - | - | %s | %s |"
                                             : "%-22s %-16s %3d %6d %3d/%-3d %3d/%-3d %-5s %9s %8s %8s %9s  %s",
                  c.family.c_str(), impl.c_str(), c.batch, c.seqlen_q, c.heads_q, c.heads_kv, c.head_dim_qk,
                  c.head_dim_v, c.causal ? "yes" : "no", markdown ? "" : "-", markdown ? "" : "-",
                  markdown ? "" : "-", err, r.note.c_str());
  }
  return buf;
}

void print_table(const std::vector<Result>& results, const std::string& device) {
  std::printf("\nflashcore-bench on %s (commit %s)\n", device.c_str(), commit_id().c_str());
  std::printf("%-22s %-16s %3s %6s %7s %7s %-5s %9s %8s %8s %9s  %s\n", "family", "impl", "B", "S", "Hq/Hkv",
              "Dqk/Dv", "causal", "ms", "TFLOPS", "GB/s", "max_err", "note");
  for (const Result& r : results) std::printf("%s\n", table_row(r, false).c_str());
}

void write_md(const std::string& path, const std::vector<Result>& results, const Options& opt,
              const std::string& device) {
  std::ofstream f(path);
  f << "# flashcore-bench\n\n- device: " << device << "\n- date: " << now_utc() << "\n- commit: " << commit_id()
    << "\n- command: `" << opt.command << "`\n\n"
    << "| family | impl | B | S | Hq/Hkv | Dqk/Dv | causal | ms | TFLOPS | GB/s | max_err | note |\n"
    << "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const Result& r : results) f << table_row(r, true) << "\n";
}

// No GPU: say so, then show the CPU reference working on a small case.
int run_without_gpu(const std::string& why) {
  std::printf("flashcore-bench: no CUDA device available (%s).\n"
              "Running the fp64 CPU reference path on a small case instead; GPU figures need a GPU.\n", why.c_str());
  fb::BenchConfig c;
  c.family = "cpu";
  c.batch = 1; c.heads_q = c.heads_kv = 4; c.seqlen_q = c.seqlen_k = 256; c.head_dim_qk = c.head_dim_v = 64;
  c.causal = true;
  const int64_t nq = int64_t(c.batch) * c.seqlen_q * c.heads_q * c.head_dim_qk;
  std::vector<uint16_t> q(nq), k(nq), v(nq), o(nq, 0xffff);
  std::vector<float> lse(int64_t(c.batch) * c.heads_q * c.seqlen_q);
  uint64_t state = 42;
  auto next_normal = [&]() {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u1 = ((state >> 11) + 1.0) / 9007199254740993.0;
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const double u2 = (state >> 11) / 9007199254740992.0;
    return float(std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  };
  for (int64_t i = 0; i < nq; ++i) { q[i] = flashcore::float_to_fp16(next_normal()); k[i] = flashcore::float_to_fp16(next_normal()); v[i] = flashcore::float_to_fp16(next_normal()); }
  AttentionParams p;
  p.q = q.data(); p.k = k.data(); p.v = v.data(); p.o = o.data(); p.lse = lse.data();
  p.batch = c.batch; p.seqlen_q = c.seqlen_q; p.seqlen_k = c.seqlen_k; p.heads_q = c.heads_q; p.heads_kv = c.heads_kv;
  p.head_dim_qk = c.head_dim_qk; p.head_dim_v = c.head_dim_v; p.causal = true;
  flashcore::set_dense_strides(p);
  const auto t0 = std::chrono::steady_clock::now();
  Status st = flashcore::attention_forward(p, nullptr);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) { std::printf("CPU reference failed: %s\n", st.message.c_str()); return 1; }
  int64_t unwritten = 0;
  for (uint16_t x : o) unwritten += std::isfinite(flashcore::fp16_to_float(x)) ? 0 : 1;
  std::printf("\n%-50s %-24s %8s %8s %10s\n", "case", "impl", "ms", "GFLOPS", "unwritten");
  std::printf("%-50s %-24s %8.1f %8.2f %10lld\n", c.label().c_str(), "flashcore-cpu-reference", ms,
              fb::forward_flops(c) / (ms * 1e-3) / 1e9, (long long)unwritten);
  return unwritten == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  std::printf("%s\n", flashcore::build_info().c_str());
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    return run_without_gpu(err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device");
  }
  cudaDeviceProp prop{};
  BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
  const std::string device = std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                             ", " + std::to_string(prop.multiProcessorCount) + " SMs)";

  std::vector<fb::BenchConfig> configs;
  if (opt.suite == "single") configs.push_back(opt.single);
  else if (opt.suite == "quick") configs = fb::quick_suite();
  else if (opt.suite == "standard") configs = fb::standard_suite();
  else { std::fprintf(stderr, "--suite: unknown suite '%s' (standard, quick)\n", opt.suite.c_str()); return 2; }
  for (auto& c : configs) c.path = opt.path;

  std::vector<Result> results;
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < configs.size(); ++i) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[config %zu/%zu, %.0f s elapsed] %s\n", i + 1, configs.size(), elapsed, configs[i].label().c_str());
    results.push_back(run_config(configs[i], opt, prop));
  }
  print_table(results, device);
  if (!opt.json_path.empty()) write_json(opt.json_path, results, opt, device);
  if (!opt.csv_path.empty()) write_csv(opt.csv_path, results);
  if (!opt.md_path.empty()) write_md(opt.md_path, results, opt, device);
  int failures = 0;
  for (const Result& r : results) failures += r.note.rfind("FAILED", 0) == 0 ? 1 : 0;
  if (failures) std::printf("\n%d configuration(s) FAILED their correctness check\n", failures);
  return failures ? 1 : 0;
}
