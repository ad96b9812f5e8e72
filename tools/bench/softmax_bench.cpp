// flashcore-softmax-bench: every softmax ladder variant on the standard shapes, in GB/s against
// the device-to-device copy bandwidth measured in the same run.
//
// Protocol (docs/softmax.md): bytes = read x + write y + write lse. Each timed run replays a CUDA
// graph of one call per input set; the sets together are >= 3x the L2, so every call reads x from
// DRAM, and the graph removes host launch overhead (small shapes take only a few microseconds).
// Warm-up replays, then the median over --runs (default 30) replays, each timed with CUDA events.
//
//   flashcore-softmax-bench [--runs N] [--json PATH] [--dtypes fp32,bf16,fp16] [--shapes 4096x4096,...]
//                           [--variants row_per_block,row_in_smem,...]
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "common/dtype.hpp"
#include "flashcore/softmax.hpp"

namespace {

using flashcore::DType;
using flashcore::SoftmaxVariant;

#define BENCH_CHECK(call)                                                                        \
  do {                                                                                           \
    const cudaError_t bench_err_ = (call);                                                       \
    if (bench_err_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(bench_err_)); \
      std::exit(1);                                                                              \
    }                                                                                            \
  } while (0)

struct Shape {
  int64_t rows, cols;
  std::string name() const { return std::to_string(rows) + "x" + std::to_string(cols); }
};

// The brief's three shapes plus few very long rows (where kMultiBlock matters).
const Shape kShapes[] = {{1024, 1024}, {4096, 4096}, {8192, 32000}, {16, 1 << 20}};
const SoftmaxVariant kVariants[] = {
    SoftmaxVariant::kSharedMemReduction, SoftmaxVariant::kWarpShuffle, SoftmaxVariant::kVectorized,
    SoftmaxVariant::kOnline,             SoftmaxVariant::kRowPerWarp,  SoftmaxVariant::kRowPerBlock,
    SoftmaxVariant::kMultiBlock,         SoftmaxVariant::kRowInSharedMem, SoftmaxVariant::kAuto};

constexpr int kWarmupReplays = 3;
constexpr double kL2Multiple = 3.0;  // input sets together at least this many L2s

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Times `enqueue` (which issues work on `stream`) `runs` times after warm-up; milliseconds each.
template <typename Fn>
std::vector<double> time_runs(cudaStream_t stream, int runs, Fn&& enqueue) {
  cudaEvent_t start, stop;
  BENCH_CHECK(cudaEventCreate(&start));
  BENCH_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmupReplays; ++i) enqueue();
  BENCH_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    BENCH_CHECK(cudaEventRecord(start, stream));
    enqueue();
    BENCH_CHECK(cudaEventRecord(stop, stream));
    BENCH_CHECK(cudaEventSynchronize(stop));
    float elapsed = 0.0f;
    BENCH_CHECK(cudaEventElapsedTime(&elapsed, start, stop));
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// Median seconds of one call: a CUDA graph holds call(s) for every input set s (so each call reads
// its inputs from DRAM and no host launch overhead is timed), replayed `runs` times.
template <typename Call>
double seconds_per_call(cudaStream_t stream, int runs, int sets, Call&& call) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  flashcore::Status captured = flashcore::Status::Ok();
  for (int s = 0; s < sets && captured.ok(); ++s) captured = call(s);
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  if (!captured.ok()) {
    std::fprintf(stderr, "capture failed: %s\n", captured.message.c_str());
    std::exit(1);
  }
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  const std::vector<double> ms = time_runs(stream, runs, [&] { BENCH_CHECK(cudaGraphLaunch(exec, stream)); });
  BENCH_CHECK(cudaStreamSynchronize(stream));
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return median(ms) * 1e-3 / sets;
}

// Device-to-device copy bandwidth (bytes read + written), the ceiling for a streaming kernel.
double copy_bandwidth_gbs(cudaStream_t stream, int runs) {
  const size_t bytes = size_t(1) << 30;
  void *src, *dst;
  BENCH_CHECK(cudaMalloc(&src, bytes));
  BENCH_CHECK(cudaMalloc(&dst, bytes));
  BENCH_CHECK(cudaMemset(src, 1, bytes));
  const std::vector<double> ms = time_runs(stream, runs, [&] {
    BENCH_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
  });
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * double(bytes) / (median(ms) * 1e-3) / 1e9;
}

// Uniform random values in [-4, 4) (xorshift: the largest shape has 262M elements).
void fill_random(std::vector<uint8_t>& bytes, int64_t count, DType dtype, uint64_t seed) {
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float value = float(state >> 40) / float(1 << 24) * 8.0f - 4.0f;
    flashcore::store_from_float(bytes.data(), i, value, dtype);
  }
}

// True when `name` is one of the comma-separated entries of `list`.
bool listed(const std::string& list, const std::string& name) {
  size_t begin = 0;
  while (begin <= list.size()) {
    const size_t end = std::min(list.find(',', begin), list.size());
    if (list.compare(begin, end - begin, name) == 0) return true;
    begin = end + 1;
  }
  return false;
}

struct Result {
  std::string shape, dtype, variant, chosen;
  double us = 0.0, gbs = 0.0, copy_fraction = 0.0;
  double same_size_copy_gbs = 0.0;  // cudaMemcpyAsync of x -> y, same input sets and graph: this shape's practical ceiling
  bool rows_sum_to_one = false;
  std::string note;
};

// Sums of the first rows of y (set 0) are 1 and finite: a cheap check that the timed call computed.
bool first_rows_sum_to_one(const void* y_dev, int64_t rows, int64_t cols, DType dtype) {
  const int64_t check_rows = std::min<int64_t>(rows, 2);
  std::vector<uint8_t> host(size_t(check_rows * cols * flashcore::dtype_size(dtype)));
  BENCH_CHECK(cudaMemcpy(host.data(), y_dev, host.size(), cudaMemcpyDeviceToHost));
  for (int64_t r = 0; r < check_rows; ++r) {
    double sum = 0.0;
    for (int64_t c = 0; c < cols; ++c) sum += flashcore::load_as_float(host.data(), r * cols + c, dtype);
    if (!std::isfinite(sum) || std::fabs(sum - 1.0) > 2e-2) return false;
  }
  return true;
}

void bench_shape(const Shape& shape, DType dtype, const std::string& variant_filter, int runs, double copy_gbs, size_t l2_bytes, cudaStream_t stream,
                 std::vector<Result>& results) {
  const int64_t elems = shape.rows * shape.cols;
  const size_t tensor_bytes = size_t(elems) * size_t(flashcore::dtype_size(dtype));
  const size_t set_bytes = 2 * tensor_bytes + size_t(shape.rows) * sizeof(float);
  const int sets = int(std::clamp<double>(std::ceil(kL2Multiple * double(l2_bytes) / double(set_bytes)), 2.0, 64.0));
  std::vector<void*> xs(static_cast<size_t>(sets)), ys(static_cast<size_t>(sets));
  std::vector<float*> lses(static_cast<size_t>(sets));
  std::vector<uint8_t> host(tensor_bytes);
  fill_random(host, elems, dtype, uint64_t(shape.cols));
  for (int s = 0; s < sets; ++s) {
    BENCH_CHECK(cudaMalloc(&xs[size_t(s)], tensor_bytes));
    BENCH_CHECK(cudaMalloc(&ys[size_t(s)], tensor_bytes));
    BENCH_CHECK(cudaMalloc(reinterpret_cast<void**>(&lses[size_t(s)]), size_t(shape.rows) * sizeof(float)));
    BENCH_CHECK(cudaMemcpy(xs[size_t(s)], host.data(), tensor_bytes, cudaMemcpyHostToDevice));
  }
  const std::string shape_name = shape.name();
  // The same bytes moved by a device-to-device copy (x -> y per input set, one graph): what any
  // kernel of this size can reach, launch ramp-up and tail included (the 1 GiB copy rate hides them).
  const double copy_seconds = seconds_per_call(stream, runs, sets, [&](int s) {
    BENCH_CHECK(cudaMemcpyAsync(ys[size_t(s)], xs[size_t(s)], tensor_bytes, cudaMemcpyDeviceToDevice, stream));
    return flashcore::Status::Ok();
  });
  const double same_size_copy_gbs = 2.0 * double(tensor_bytes) / copy_seconds / 1e9;
  std::printf("%-12s %-8s %-22s %10.2f us %8.1f GB/s %5.1f%% of copy\n", shape_name.c_str(), flashcore::dtype_name(dtype),
              "(same-size D2D copy)", copy_seconds * 1e6, same_size_copy_gbs, 100.0 * same_size_copy_gbs / copy_gbs);
  for (SoftmaxVariant variant : kVariants) {
    if (!variant_filter.empty() && !listed(variant_filter, flashcore::softmax_variant_name(variant))) continue;
    Result r{shape_name, flashcore::dtype_name(dtype), flashcore::softmax_variant_name(variant), "", 0, 0, 0, 0, false, ""};
    SoftmaxVariant chosen = variant;
    const flashcore::Status can_run =
        flashcore::softmax_select_variant(xs[0], ys[0], shape.rows, shape.cols, dtype, variant, &chosen);
    r.chosen = flashcore::softmax_variant_name(chosen);
    if (!can_run.ok()) {
      r.note = "n/a: " + can_run.message.substr(0, can_run.message.find(':'));
      results.push_back(r);
      std::printf("%-12s %-8s %-22s n/a (%s)\n", r.shape.c_str(), r.dtype.c_str(), r.variant.c_str(), can_run.message.c_str());
      continue;
    }
    const double seconds = seconds_per_call(stream, runs, sets, [&](int s) {
      return flashcore::softmax_forward(xs[size_t(s)], ys[size_t(s)], lses[size_t(s)], shape.rows, shape.cols, dtype,
                                        variant, stream);
    });
    r.us = seconds * 1e6;
    r.gbs = double(set_bytes) / seconds / 1e9;
    r.copy_fraction = r.gbs / copy_gbs;
    r.same_size_copy_gbs = same_size_copy_gbs;
    r.rows_sum_to_one = first_rows_sum_to_one(ys[0], shape.rows, shape.cols, dtype);
    std::printf("%-12s %-8s %-22s %10.2f us %8.1f GB/s %5.1f%% of copy%s%s\n", r.shape.c_str(), r.dtype.c_str(),
                r.variant.c_str(), r.us, r.gbs, 100.0 * r.copy_fraction,
                variant == SoftmaxVariant::kAuto ? (" -> " + r.chosen).c_str() : "",
                r.rows_sum_to_one ? "" : "  ROW SUMS WRONG");
    std::fflush(stdout);
    results.push_back(r);
  }
  for (int s = 0; s < sets; ++s) {
    cudaFree(xs[size_t(s)]);
    cudaFree(ys[size_t(s)]);
    cudaFree(lses[size_t(s)]);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 30;
  std::string json_path, shape_filter, variant_filter;
  std::vector<DType> dtypes = {DType::kFloat32, DType::kBFloat16};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (arg == "--shapes" && i + 1 < argc) {
      shape_filter = argv[++i];
    } else if (arg == "--variants" && i + 1 < argc) {
      variant_filter = argv[++i];
    } else if (arg == "--dtypes" && i + 1 < argc) {
      const std::string list = argv[++i];
      dtypes.clear();
      if (list.find("fp32") != std::string::npos) dtypes.push_back(DType::kFloat32);
      if (list.find("bf16") != std::string::npos) dtypes.push_back(DType::kBFloat16);
      if (list.find("fp16") != std::string::npos) dtypes.push_back(DType::kFloat16);
    } else {
      std::fprintf(stderr, "usage: %s [--runs N] [--json PATH] [--dtypes fp32,bf16,fp16] [--shapes RxC,...] [--variants NAME,...]\n", argv[0]);
      return 2;
    }
  }
  int device = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&device) != cudaSuccess || cudaGetDeviceProperties(&prop, device) != cudaSuccess) {
    std::fprintf(stderr, "flashcore-softmax-bench: no usable CUDA device\n");
    return 1;
  }
  cudaStream_t stream;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const double copy_gbs = copy_bandwidth_gbs(stream, runs);
  std::printf("device: %s, %d SMs, L2 %d MB; D2D copy %.1f GB/s (read + write, median of %d)\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, copy_gbs, runs);
  std::vector<Result> results;
  for (const Shape& shape : kShapes) {
    if (!shape_filter.empty() && !listed(shape_filter, shape.name())) continue;
    for (DType dtype : dtypes) bench_shape(shape, dtype, variant_filter, runs, copy_gbs, size_t(prop.l2CacheSize), stream, results);
  }
  if (!json_path.empty()) {
    FILE* f = std::fopen(json_path.c_str(), "w");
    if (f == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", json_path.c_str());
      return 1;
    }
    std::fprintf(f, "{\"device\": \"%s\", \"copy_gbs\": %.2f, \"runs\": %d, \"results\": [\n", prop.name, copy_gbs, runs);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      std::fprintf(f,
                   "  {\"shape\": \"%s\", \"dtype\": \"%s\", \"variant\": \"%s\", \"chosen\": \"%s\", \"us\": %.3f, "
                   "\"gbs\": %.2f, \"copy_fraction\": %.4f, \"same_size_copy_gbs\": %.2f, \"rows_sum_to_one\": %s, \"note\": \"%s\"}%s\n",
                   r.shape.c_str(), r.dtype.c_str(), r.variant.c_str(), r.chosen.c_str(), r.us, r.gbs, r.copy_fraction,
                   r.same_size_copy_gbs,
                   r.rows_sum_to_one ? "true" : "false", r.note.c_str(), i + 1 < results.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    std::fclose(f);
  }
  cudaStreamDestroy(stream);
  return 0;
}
