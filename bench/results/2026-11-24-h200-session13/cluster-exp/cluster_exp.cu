// Session 13 experiment: why step 6's cluster split (row_per_cluster.cuh) read 54 % of copy at
// 4096x4096 bf16. Copy kernels of 4 KiB blocks, launched plain or in clusters of 2, with 0-2 block
// or cluster barriers between load and store; the library's cluster kernel; a variant whose
// exchange is st.async into the peer's slots completing on an mbarrier (no cluster barrier per
// row); persistent grids of clusters. Same protocol as the ladder benchmark: PDL launches, input
// sets >= 3x L2, median of 30 timed runs, % of a 1 GiB cudaMemcpyAsync (read + write).
//
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a -I include -I src \
//        bench/results/2026-11-24-h200-session13/cluster-exp/cluster_exp.cu -o cluster_exp
#include <algorithm>
#include <cstring>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "softmax/row_per_cluster.cuh"

namespace fs = flashcore::softmax;
namespace ptx = flashcore::ptx;
using bf16 = __nv_bfloat16;

#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) { std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); std::exit(1); } } while (0)

constexpr int kThreads = 256;

// One 16-byte vector per thread; block b holds bytes [b * 4 KiB, ...). kSyncs barriers (block or
// cluster) between the load and the store; kPersistent: grid-stride over the blocks' work.
template <int kSyncs, bool kCluster>
__global__ void __launch_bounds__(kThreads) copy_kernel(const uint4* x, uint4* y, int64_t work_blocks) {
  fs::wait_for_previous_grid();
  for (int64_t b = blockIdx.x; b < work_blocks; b += gridDim.x) {
    const uint4 v = x[b * kThreads + threadIdx.x];
#pragma unroll
    for (int s = 0; s < kSyncs; ++s) {
      if constexpr (kCluster) ptx::cluster_sync(); else __syncthreads();
    }
    y[b * kThreads + threadIdx.x] = v;
  }
}

// The aligned cluster barrier (every thread of the warp executes it together).
__device__ __forceinline__ void cluster_sync_aligned() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}
template <int kSyncs>
__global__ void __launch_bounds__(kThreads) copy_cluster_aligned_kernel(const uint4* x, uint4* y, int64_t work_blocks) {
  fs::wait_for_previous_grid();
  for (int64_t b = blockIdx.x; b < work_blocks; b += gridDim.x) {
    const uint4 v = x[b * kThreads + threadIdx.x];
#pragma unroll
    for (int s = 0; s < kSyncs; ++s) cluster_sync_aligned();
    y[b * kThreads + threadIdx.x] = v;
  }
}

// ---- softmax with the exchange on mbarriers: st.async into every block's slot, complete_tx ----
__device__ __forceinline__ void st_async_f32(uint32_t remote_addr, float value, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote_addr),
               "r"(__float_as_uint(value)), "r"(remote_bar)
               : "memory");
}

template <int kCtas>
__global__ void __launch_bounds__(kThreads, 8) mbar_softmax_kernel(const bf16* x, bf16* y, float* lse, int64_t rows, int cols) {
  constexpr int kVec = 8;
  constexpr int kWarps = kThreads / 32;
  constexpr int kSlots = kCtas * kWarps;
  __shared__ alignas(16) float max_slots[kSlots];
  __shared__ alignas(16) float sum_slots[kSlots];
  __shared__ alignas(8) uint64_t bars[2];
  const uint32_t cta = ptx::cluster_ctarank();
  const int rank = threadIdx.x, lane = rank % 32, warp = rank / 32;
  const bool publisher = lane < kCtas;
  const uint32_t peer = uint32_t(lane % kCtas);
  const int slot = int(cta) * kWarps + warp;
  const uint32_t max_slot = ptx::map_shared_to_cta(ptx::smem_addr(&max_slots[slot]), peer);
  const uint32_t sum_slot = ptx::map_shared_to_cta(ptx::smem_addr(&sum_slots[slot]), peer);
  const uint32_t max_bar = ptx::map_shared_to_cta(ptx::smem_addr(&bars[0]), peer);
  const uint32_t sum_bar = ptx::map_shared_to_cta(ptx::smem_addr(&bars[1]), peer);
  if (rank == 0) {
    ptx::mbarrier_init(&bars[0], 1);
    ptx::mbarrier_init(&bars[1], 1);
    ptx::mbarrier_init_fence();
  }
  ptx::cluster_sync();  // barriers initialized before any peer completes bytes on them
  const int col = (int(cta) * kThreads + rank) * kVec;
  const int64_t clusters = int64_t(gridDim.x) / kCtas;
  uint32_t phase = 0;
  fs::wait_for_previous_grid();
  for (int64_t row = int64_t(blockIdx.x) / kCtas; row < rows; row += clusters) {
    float values[kVec];
    if (col < cols) fs::load_pack<bf16, kVec>(x + row * cols + col, values);
    else for (int i = 0; i < kVec; ++i) values[i] = -INFINITY;
    float thread_max = values[0];
#pragma unroll
    for (int i = 1; i < kVec; ++i) thread_max = fs::max_nan(thread_max, values[i]);
    const float warp_max = fs::from_ordered_image(__reduce_max_sync(~0u, fs::ordered_image(thread_max)));
    if (rank == 0) ptx::mbarrier_arrive_expect_tx(&bars[0], kSlots * 4);
    if (publisher) st_async_f32(max_slot, warp_max, max_bar);
    ptx::mbarrier_wait(&bars[0], phase);
    float row_max = -INFINITY;
#pragma unroll
    for (int s = 0; s < kSlots; s += 4) {
      const float4 p = *reinterpret_cast<const float4*>(&max_slots[s]);
      row_max = fs::max_nan(fs::max_nan(row_max, p.x), fs::max_nan(p.y, fs::max_nan(p.z, p.w)));
    }
    float thread_sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      values[i] = fs::fast_exp(values[i] - row_max);
      thread_sum += col < cols ? values[i] : 0.0f;
    }
    const float warp_sum = fs::warp_allreduce(thread_sum, fs::SumOp{});
    if (rank == 0) ptx::mbarrier_arrive_expect_tx(&bars[1], kSlots * 4);
    if (publisher) st_async_f32(sum_slot, warp_sum, sum_bar);
    ptx::mbarrier_wait(&bars[1], phase);
    phase ^= 1;
    float row_sum = 0.0f;
#pragma unroll
    for (int s = 0; s < kSlots; s += 4) {
      const float4 p = *reinterpret_cast<const float4*>(&sum_slots[s]);
      row_sum += p.x; row_sum += p.y; row_sum += p.z; row_sum += p.w;
    }
    if (col < cols) {
      const float factor = 1.0f / row_sum;
      for (int i = 0; i < kVec; ++i) values[i] *= factor;
      fs::store_pack<bf16, kVec>(y + row * cols + col, values);
    }
    if (lse != nullptr && cta == 0 && rank == 0) lse[row] = fs::lse_from_stats(row_max, row_sum);
  }
}

template <typename K, typename... Args>
void launch(K kernel, unsigned grid, int cluster, cudaStream_t s, Args... args) {
  CK(fs::launch_softmax_kernel_in_clusters("k", kernel, grid, kThreads, 0, s, true, cluster, args...).ok() ? cudaSuccess : cudaErrorUnknown);
}

int main() {
  const int64_t rows = 4096, cols = 4096;
  const size_t bytes = size_t(rows * cols) * 2;
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int sets = 6;  // 6 x 32 MiB in + out >= 3x the 60 MB L2
  std::vector<bf16*> xs(sets), ys(sets);
  std::vector<float*> lses(sets);
  std::vector<uint16_t> host(rows * cols);
  for (size_t i = 0; i < host.size(); ++i) host[i] = uint16_t(0x3f80 + (i * 2654435761u >> 20) % 200 - 100);  // bf16 ~ [0.5, 2)
  for (int i = 0; i < sets; ++i) {
    CK(cudaMalloc(&xs[i], bytes)); CK(cudaMalloc(&ys[i], bytes)); CK(cudaMalloc(&lses[i], rows * 4));
    CK(cudaMemcpy(xs[i], host.data(), bytes, cudaMemcpyHostToDevice));
  }
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  // 1 GiB copy rate
  void *big_in, *big_out; const size_t big = size_t(1) << 30;
  CK(cudaMalloc(&big_in, big)); CK(cudaMalloc(&big_out, big));
  auto time_it = [&](const std::function<void(int)>& call) {
    for (int w = 0; w < 3; ++w) for (int i = 0; i < sets; ++i) call(i);
    std::vector<float> ms;
    for (int r = 0; r < 30; ++r) {
      CK(cudaEventRecord(e0, s));
      for (int i = 0; i < sets; ++i) call(i);
      CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
      float t; CK(cudaEventElapsedTime(&t, e0, e1)); ms.push_back(t / sets);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  std::vector<float> big_ms;
  for (int r = 0; r < 10; ++r) {
    CK(cudaEventRecord(e0, s)); CK(cudaMemcpyAsync(big_out, big_in, big, cudaMemcpyDeviceToDevice, s));
    CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); float t; CK(cudaEventElapsedTime(&t, e0, e1)); big_ms.push_back(t);
  }
  std::sort(big_ms.begin(), big_ms.end());
  const double copy_gbs = 2.0 * big / (big_ms[5] * 1e-3) / 1e9;
  std::printf("1 GiB copy %.1f GB/s\n", copy_gbs);
  const int64_t work_blocks = int64_t(bytes) / (kThreads * 16);  // 4 KiB blocks
  const unsigned resident2 = unsigned(sms) * 8;                   // 8 blocks of 256 per SM
  struct Case { std::string name; std::function<void(int)> call; bool softmax; };
  std::vector<Case> cases;
  auto X = [&](int i) { return reinterpret_cast<const uint4*>(xs[i]); };
  auto Y = [&](int i) { return reinterpret_cast<uint4*>(ys[i]); };
  cases.push_back({"memcpy", [&](int i) { CK(cudaMemcpyAsync(ys[i], xs[i], bytes, cudaMemcpyDeviceToDevice, s)); }, false});
  cases.push_back({"copy_plain_0sync", [&](int i) { launch(copy_kernel<0, false>, unsigned(work_blocks), 1, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_plain_2sync", [&](int i) { launch(copy_kernel<2, false>, unsigned(work_blocks), 1, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_cluster2_0sync", [&](int i) { launch(copy_kernel<0, true>, unsigned(work_blocks), 2, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_cluster2_1sync", [&](int i) { launch(copy_kernel<1, true>, unsigned(work_blocks), 2, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_cluster2_2sync", [&](int i) { launch(copy_kernel<2, true>, unsigned(work_blocks), 2, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_cluster2_2sync_aligned", [&](int i) { launch(copy_cluster_aligned_kernel<2>, unsigned(work_blocks), 2, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_cluster2_0sync_persist", [&](int i) { launch(copy_kernel<0, true>, resident2, 2, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_cluster2_2sync_persist", [&](int i) { launch(copy_kernel<2, true>, resident2, 2, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"copy_plain_2sync_persist", [&](int i) { launch(copy_kernel<2, false>, resident2, 1, s, X(i), Y(i), work_blocks); }, false});
  cases.push_back({"softmax_lib_cluster2", [&](int i) { launch(fs::row_per_cluster_kernel<bf16, 2>, unsigned(rows * 2), 2, s, (const bf16*)xs[i], ys[i], lses[i], rows, int(cols)); }, true});
  cases.push_back({"softmax_lib_cluster2_persist", [&](int i) { launch(fs::row_per_cluster_kernel<bf16, 2>, resident2, 2, s, (const bf16*)xs[i], ys[i], lses[i], rows, int(cols)); }, true});
  cases.push_back({"softmax_mbar_cluster2", [&](int i) { launch(mbar_softmax_kernel<2>, unsigned(rows * 2), 2, s, (const bf16*)xs[i], ys[i], lses[i], rows, int(cols)); }, true});
  cases.push_back({"softmax_mbar_cluster2_persist", [&](int i) { launch(mbar_softmax_kernel<2>, resident2, 2, s, (const bf16*)xs[i], ys[i], lses[i], rows, int(cols)); }, true});
  cases.push_back({"softmax_mbar_cluster2_persist_half", [&](int i) { launch(mbar_softmax_kernel<2>, resident2 / 2, 2, s, (const bf16*)xs[i], ys[i], lses[i], rows, int(cols)); }, true});
  for (int round = 0; round < 3; ++round) {
    for (const Case& c : cases) {
      const float ms = time_it(c.call);
      double extra = c.softmax ? rows * 4.0 : 0.0;
      const double gbs = (2.0 * bytes + extra) / (ms * 1e-3) / 1e9;
      std::printf("r%d %-36s %8.2f us %8.1f GB/s %5.1f%% of copy\n", round, c.name.c_str(), ms * 1e3, gbs, 100.0 * gbs / copy_gbs);
    }
    CK(cudaStreamSynchronize(s));
  }
  // correctness of the two softmax kernels: row sums and equality of the two outputs
  for (int which = 0; which < 2; ++which) {
    if (which == 0) launch(fs::row_per_cluster_kernel<bf16, 2>, resident2, 2, s, (const bf16*)xs[0], ys[0], lses[0], rows, int(cols));
    else launch(mbar_softmax_kernel<2>, resident2, 2, s, (const bf16*)xs[0], ys[1], lses[1], rows, int(cols));
  }
  launch(fs::row_per_cluster_kernel<bf16, 2>, unsigned(rows * 2), 2, s, (const bf16*)xs[0], ys[2], lses[2], rows, int(cols));
  CK(cudaStreamSynchronize(s));
  std::vector<uint16_t> a(rows * cols), b(rows * cols), c(rows * cols);
  CK(cudaMemcpy(a.data(), ys[0], bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), ys[1], bytes, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(c.data(), ys[2], bytes, cudaMemcpyDeviceToHost));
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < cols; ++j) { uint32_t bits = uint32_t(a[r * cols + j]) << 16; float f; std::memcpy(&f, &bits, 4); sum += f; }
    worst = std::max(worst, std::abs(sum - 1.0));
  }
  std::printf("check: worst |row sum - 1| %.3g; mbar == lib: %s; persistent == one-row grid: %s\n", worst,
              a == b ? "yes" : "NO", a == c ? "yes" : "NO");
  return 0;
}
