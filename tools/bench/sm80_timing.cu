// Standalone timing of the sm80 forward path (the lead's flashcore-bench is the full harness).
// Rows: fp16/bf16 x causal/non-causal x
//   D=128: B=4, H=32, S in {1k, 2k, 4k, 8k, 16k}
//   D=64:  B*S = 16k tokens, H=32, S in {1k, ..., 16k}
// Timing: CUDA events around each call, 10 warm-up calls, median of 30, inputs rotated over 3
// buffer sets (random values, never zeros). FLOPs = 4*B*H*S*S*D (halved for causal).
// Calls the sm80 path's run() directly (validation and device queries stay out of the timing).
// Tuning: for fp16 at S in {4k, 16k} the tool also times other tile shapes than the table's
// (kernels compiled into this tool, named flashcore-sm80-MxNxWsS: tile M x N, W warps, S K/V stages)
// to retune src/sm80/fwd/tile_config.hpp.
// Output: CSV on stdout (impl,dtype,causal,batch,heads,seqlen,dim,ms,tflops).
#include <algorithm>
#include <cstdio>
#include <string>
#include <cstdint>
#include <functional>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "api/paths.hpp"
#include "flashcore/flashcore.hpp"
#include "sm80/fwd/kernel.cuh"

namespace {

#define CHECK(call)                                                                      \
  do {                                                                                   \
    cudaError_t e_ = (call);                                                             \
    if (e_ != cudaSuccess) {                                                             \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                      \
    }                                                                                    \
  } while (0)

// Pseudo-random values in [-2, 2) as 16-bit floats (hash of the index; fp16 and bf16 bit layouts).
__global__ void fill_random(uint16_t* out, int64_t n, uint32_t seed, bool bf16) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 16; h *= 0x85ebca6bu; h ^= h >> 13; h *= 0xc2b2ae35u; h ^= h >> 16;
    const float f = (float(h & 0xFFFFFF) / float(1 << 24)) * 4.0f - 2.0f;
    const uint32_t bits = __float_as_uint(f);
    out[i] = bf16 ? uint16_t(bits >> 16) : __half_as_ushort(__float2half_rn(f));
  }
}

using LaunchFn = flashcore::Status (*)(const flashcore::AttentionParams&, cudaStream_t);
struct TuneVariant {
  const char* name;
  int dim;
  LaunchFn launch;
};
template <int kDim, int kM, int kN, int kW, int kStages>
flashcore::Status launch_variant(const flashcore::AttentionParams& p, cudaStream_t stream) {
  using Traits = flashcore::sm80::FwdTraits<kDim, kDim, __half, flashcore::sm80::TileShape{kM, kN, kW, kStages}>;
  return flashcore::sm80::launch_with_traits<Traits>(p, stream);
}
const TuneVariant kTuneVariants[] = {
    {"flashcore-sm80-128x32x4s1", 128, &launch_variant<128, 128, 32, 4, 1>},
    {"flashcore-sm80-128x32x4s2", 128, &launch_variant<128, 128, 32, 4, 2>},
    {"flashcore-sm80-128x64x4s2", 128, &launch_variant<128, 128, 64, 4, 2>},
    {"flashcore-sm80-128x64x4s1", 64, &launch_variant<64, 128, 64, 4, 1>},
    {"flashcore-sm80-128x128x4s1", 64, &launch_variant<64, 128, 128, 4, 1>},
    {"flashcore-sm80-128x128x4s2", 64, &launch_variant<64, 128, 128, 4, 2>},
    {"flashcore-sm80-128x64x4s2", 64, &launch_variant<64, 128, 64, 4, 2>},
    {"flashcore-sm80-128x96x4s2", 64, &launch_variant<64, 128, 96, 4, 2>},
};

struct Row {
  flashcore::DType dtype;
  bool causal;
  int batch, heads, seqlen, dim;
};

}  // namespace

int main(int argc, char** argv) {
  using namespace flashcore;
  const int iters = 30, warmup = 10, sets = 3;
  std::vector<Row> rows;
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (bool causal : {false, true}) {
      for (int s : {1024, 2048, 4096, 8192, 16384}) rows.push_back({dt, causal, 4, 32, s, 128});
      for (int s : {1024, 2048, 4096, 8192, 16384}) rows.push_back({dt, causal, 16384 / s, 32, s, 64});
    }
  bool only_d128 = false, only_d64 = false, no_tune = false, tune_all = false;
  for (int a = 1; a < argc; ++a) {
    only_d128 = only_d128 || std::string(argv[a]) == "--d128";
    only_d64 = only_d64 || std::string(argv[a]) == "--d64";
    no_tune = no_tune || std::string(argv[a]) == "--no-tune";
    tune_all = tune_all || std::string(argv[a]) == "--tune-all";  // tuning variants at every S, not only 4k/16k
  }
  std::printf("impl,dtype,causal,batch,heads,seqlen,dim,ms,tflops\n");
  for (const Row& r : rows) {
    if ((only_d128 && r.dim != 128) || (only_d64 && r.dim != 64)) continue;
    const int64_t elems = int64_t(r.batch) * r.seqlen * r.heads * r.dim;
    std::vector<void*> bufs;
    std::vector<AttentionParams> params;
    for (int s = 0; s < sets; ++s) {
      AttentionParams p;
      void *q, *k, *v, *o;
      CHECK(cudaMalloc(&q, elems * 2)); CHECK(cudaMalloc(&k, elems * 2));
      CHECK(cudaMalloc(&v, elems * 2)); CHECK(cudaMalloc(&o, elems * 2));
      float* lse;
      CHECK(cudaMalloc(&lse, int64_t(r.batch) * r.heads * r.seqlen * 4));
      int idx = 0;
      for (void* t : {q, k, v}) {
        fill_random<<<1024, 256>>>(static_cast<uint16_t*>(t), elems, uint32_t(s * 3 + idx++), r.dtype == DType::kBFloat16);
      }
      CHECK(cudaGetLastError());
      bufs.insert(bufs.end(), {q, k, v, o, lse});
      p.q = q; p.k = k; p.v = v; p.o = o; p.lse = lse;
      p.batch = r.batch; p.seqlen_q = p.seqlen_k = r.seqlen; p.heads_q = p.heads_kv = r.heads;
      p.head_dim_qk = p.head_dim_v = r.dim; p.dtype = r.dtype; p.causal = r.causal;
      p.path = KernelPath::kSm80;
      set_dense_strides(p);
      params.push_back(p);
    }
    CHECK(cudaDeviceSynchronize());
    detail::DeviceInfo info;
    Status st = detail::query_device(params[0], &info);
    const detail::PathOps ops = detail::sm80_path();
    std::string why = st.ok() ? ops.supports(params[0], info) : st.message;
    if (!why.empty()) {
      std::fprintf(stderr, "skip row: %s\n", why.c_str());
      continue;
    }
    struct Impl {
      std::string name;
      std::function<Status(const AttentionParams&)> run;
    };
    std::vector<Impl> impls = {{"flashcore-sm80", [&](const AttentionParams& p) { return ops.run(p, info, nullptr); }}};
    if (r.dtype == DType::kFloat16 && (tune_all || r.seqlen == 4096 || r.seqlen == 16384) && !no_tune) {
      for (const TuneVariant& tv : kTuneVariants) {
        if (tv.dim != r.dim) continue;
        impls.push_back({tv.name, [&tv](const AttentionParams& p) { return tv.launch(p, nullptr); }});
      }
    }
    for (const Impl& impl : impls) {
      cudaEvent_t start, stop;
      CHECK(cudaEventCreate(&start)); CHECK(cudaEventCreate(&stop));
      std::vector<float> times;
      for (int it = 0; it < warmup + iters; ++it) {
        const AttentionParams& p = params[size_t(it % sets)];
        CHECK(cudaEventRecord(start));
        st = impl.run(p);
        CHECK(cudaEventRecord(stop));
        if (!st.ok()) { std::fprintf(stderr, "run failed: %s\n", st.message.c_str()); return 1; }
        CHECK(cudaEventSynchronize(stop));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        if (it >= warmup) times.push_back(ms);
      }
      std::sort(times.begin(), times.end());
      const float median = times[times.size() / 2];
      const double flops = 4.0 * r.batch * r.heads * double(r.seqlen) * r.seqlen * r.dim * (r.causal ? 0.5 : 1.0);
      std::printf("%s,%s,%d,%d,%d,%d,%d,%.4f,%.1f\n", impl.name.c_str(), dtype_name(r.dtype), int(r.causal), r.batch,
                  r.heads, r.seqlen, r.dim, median, flops / (median * 1e-3) / 1e12);
      std::fflush(stdout);
      CHECK(cudaEventDestroy(start)); CHECK(cudaEventDestroy(stop));
    }
    for (void* b : bufs) CHECK(cudaFree(b));
  }
  return 0;
}
