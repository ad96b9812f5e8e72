// Device building blocks shared by the softmax ladder: dtype conversion, 16-byte packs, the
// NaN-propagating row statistics (max, sum of exp) and their warp / block reductions.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "attention/constants.hpp"
#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "common/dependent_launch.hpp"
#include "common/device_dtype.cuh"
#include "common/host_device.hpp"
#include "ptx/barrier.hpp"
#include "ptx/math.hpp"
#include "softmax/launch.hpp"

namespace flashcore::softmax {

inline constexpr int kWarpSize = 32;
inline constexpr unsigned kFullWarpMask = 0xffffffffu;
// Grid-stride loops cover any row count; more blocks than this would only add scheduling work.
inline constexpr int64_t kMaxGridBlocks = int64_t(1) << 20;

// ---- dtype ------------------------------------------------------------------------------------
using flashcore::from_float;
using flashcore::to_float;

// Elements of T in one 16-byte vector.
template <typename T> inline constexpr int kFullVec = kVectorBytes / int(sizeof(T));

// kVec consecutive elements moved as one load/store (one 16-byte instruction when kVec is kFullVec).
template <typename T, int kVec>
struct alignas(sizeof(T) * kVec) Pack {
  T elems[kVec];
};

template <typename T, int kVec>
FC_DEVICE Pack<T, kVec> load_raw(const T* src) {
  return *reinterpret_cast<const Pack<T, kVec>*>(src);
}

template <typename T, int kVec>
FC_DEVICE void unpack(const Pack<T, kVec>& pack, float (&out)[kVec]) {
#pragma unroll
  for (int i = 0; i < kVec; ++i) out[i] = to_float(pack.elems[i]);
}

template <typename T, int kVec>
FC_DEVICE void load_pack(const T* src, float (&out)[kVec]) {
  unpack(load_raw<T, kVec>(src), out);
}

// Two floats to one 16-bit pair in one conversion instruction (F2FP), round to nearest even.
FC_DEVICE void convert_pair(float a, float b, __half* dst) {
  *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(a, b);
}
FC_DEVICE void convert_pair(float a, float b, __nv_bfloat16* dst) {
  *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(a, b);
}

template <typename T, int kVec>
FC_DEVICE void store_pack(T* dst, const float (&in)[kVec]) {
  Pack<T, kVec> pack;
  if constexpr (sizeof(T) == 2 && kVec % 2 == 0) {
#pragma unroll
    for (int i = 0; i < kVec; i += 2) convert_pair(in[i], in[i + 1], &pack.elems[i]);
  } else {
#pragma unroll
    for (int i = 0; i < kVec; ++i) pack.elems[i] = from_float<T>(in[i]);
  }
  *reinterpret_cast<Pack<T, kVec>*>(dst) = pack;
}

// ---- the row math -----------------------------------------------------------------------------
// max that keeps a NaN (fmaxf would drop it): a NaN anywhere makes the row max, hence the row, NaN,
// as torch's max reduction does.
FC_DEVICE float max_nan(float a, float b) {
  float result;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(result) : "f"(a), "f"(b));
  return result;
}

// e^x as 2^(x * log2 e) on the SFU: one multiply and one MUFU.EX2 instead of expf's ~8
// instructions (which made the 16-bit kernels instruction-bound). ex2.approx is within 2 ulp; the
// rounding of x * log2e adds |x| * 6e-8 relative, which only matters for terms e^x below e^-20
// whose absolute contribution is negligible. Subnormal results flush to 0. exp(-inf) = 0,
// exp(NaN) = NaN, as softmax needs.
FC_DEVICE float fast_exp(float x) { return ptx::exp2_approx(x * attn::kLog2e); }

// exp(value - row_max) as a term of a running sum whose max may still be -inf. A -inf value adds
// exactly 0 even when row_max is -inf too (an all -inf chunk must not poison the other chunks of
// its row when partial sums merge); +inf - +inf stays NaN.
FC_DEVICE float exp_term(float value, float row_max) {
  return value == -INFINITY ? 0.0f : fast_exp(value - row_max);
}

// The probability written for `value`: exp(value - row_max) / row_sum. Not exp_term: an all -inf
// row has row_max = -inf and must give NaN, like torch (0/0).
FC_DEVICE float probability(float value, float row_max, float inv_row_sum) {
  return fast_exp(value - row_max) * inv_row_sum;
}

// Natural-log LSE of a row from its max and sum(exp(x - max)); torch.logsumexp's special values.
FC_DEVICE float lse_from_stats(float row_max, float row_sum) {
  if (row_max == -INFINITY) return -INFINITY;  // every entry -inf: log(0)
  if (row_max == INFINITY) return INFINITY;    // a +inf entry (and no NaN: max would be NaN)
  return row_max + logf(row_sum);              // NaN max or sum stays NaN
}

// Running statistics of part of a row: its max and sum(exp(x - max)).
struct RowStats {
  float max;
  float sum;
};

FC_DEVICE RowStats empty_stats() { return {-INFINITY, 0.0f}; }

// Statistics of the union of two parts: rescale both sums to the larger max.
FC_DEVICE RowStats merge_stats(RowStats a, RowStats b) {
  const float row_max = max_nan(a.max, b.max);
  return {row_max, a.sum * exp_term(a.max, row_max) + b.sum * exp_term(b.max, row_max)};
}

// Adds kVec values to running statistics: one rescale per vector, not per element.
template <int kVec>
FC_DEVICE void accumulate_stats(RowStats& stats, const float (&values)[kVec]) {
  float row_max = stats.max;
#pragma unroll
  for (int i = 0; i < kVec; ++i) row_max = max_nan(row_max, values[i]);
  float row_sum = stats.sum * exp_term(stats.max, row_max);
#pragma unroll
  for (int i = 0; i < kVec; ++i) row_sum += exp_term(values[i], row_max);
  stats = {row_max, row_sum};
}

// ---- reductions -------------------------------------------------------------------------------
struct MaxOp {
  FC_DEVICE float operator()(float a, float b) const { return max_nan(a, b); }
  static FC_DEVICE float identity() { return -INFINITY; }
};
struct SumOp {
  FC_DEVICE float operator()(float a, float b) const { return a + b; }
  static FC_DEVICE float identity() { return 0.0f; }
};
struct MergeOp {
  FC_DEVICE RowStats operator()(RowStats a, RowStats b) const { return merge_stats(a, b); }
  static FC_DEVICE RowStats identity() { return empty_stats(); }
};

FC_DEVICE float shuffle_xor(float value, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, value, lane_mask);
}
FC_DEVICE RowStats shuffle_xor(RowStats value, int lane_mask) {
  return {shuffle_xor(value.max, lane_mask), shuffle_xor(value.sum, lane_mask)};
}

// Butterfly reduction: every lane ends with the result of all 32.
template <typename V, typename Op>
FC_DEVICE V warp_allreduce(V value, Op op) {
#pragma unroll
  for (int lane_mask = kWarpSize / 2; lane_mask > 0; lane_mask /= 2) {
    value = op(value, shuffle_xor(value, lane_mask));
  }
  return value;
}

// Every thread of the block ends with the result. `scratch` holds one V per warp (32 suffice for
// 1024 threads). Each warp reduces the per-warp partials itself, so one barrier publishes them;
// the trailing barrier lets the caller reuse `scratch` for the next reduction.
template <typename V, typename Op>
FC_DEVICE V block_allreduce(V value, Op op, V* scratch) {
  const int lane = threadIdx.x % kWarpSize;
  const int warp = threadIdx.x / kWarpSize;
  const int num_warps = (blockDim.x + kWarpSize - 1) / kWarpSize;
  value = warp_allreduce(value, op);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();  // per-warp partials visible to every warp
  value = lane < num_warps ? scratch[lane] : Op::identity();
  value = warp_allreduce(value, op);
  __syncthreads();  // everyone has read scratch before it is written again
  return value;
}

// A float's bits as an int whose signed order is the floats' order (-inf lowest, -0 below +0), with
// every NaN the largest int: an integer max (redux.sync, one instruction for the warp) then keeps a
// NaN as max_nan does.
FC_DEVICE int ordered_image(float value) {
  const int bits = __float_as_int(value);
  if (value != value) return 0x7fffffff;
  return bits >= 0 ? bits : bits ^ 0x7fffffff;
}
FC_DEVICE float from_ordered_image(int image) { return __int_as_float(image >= 0 ? image : image ^ 0x7fffffff); }

// The warp's max_nan in one redux.sync (sm_80+) instead of a five-shuffle butterfly.
FC_DEVICE float warp_max(float value) {
  return from_ordered_image(__reduce_max_sync(kFullWarpMask, ordered_image(value)));
}

// Every thread of a block of exactly kWarps warps ends with op over the warps' `warp_value`s (each
// already reduced over its warp). One barrier: lane 0 of each warp publishes into `slots`, then
// every thread combines the kWarps slots itself, in slot order (bitwise the same result
// everywhere). No trailing barrier, so a caller alternates two slot arrays: it may write one again
// only after every thread has passed a barrier of the other, placed after its reads of the first
// (softmax: the next row's max slots are written after this row's sum barrier).
template <int kWarps, typename Op>
FC_DEVICE float block_allreduce_one_barrier(float warp_value, Op op, float* slots) {
  if (threadIdx.x % kWarpSize == 0) slots[threadIdx.x / kWarpSize] = warp_value;
  __syncthreads();  // every warp's value visible to every thread
  float value = slots[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) value = op(value, slots[w]);
  return value;
}

// ---- launch helpers ---------------------------------------------------------------------------
inline unsigned grid_for(int64_t work_blocks) {
  return unsigned(work_blocks < 1 ? 1 : (work_blocks < kMaxGridBlocks ? work_blocks : kMaxGridBlocks));
}

// Launches kernel<<<grid, threads, shared_bytes, stream>>>(args...) and checks the launch (`name`
// in the error). With `programmatic_launch` (sm_90+) it uses programmatic dependent launch (PDL):
// the kernel may be scheduled while the previous kernel in the stream drains, and waits
// (griddepcontrol.wait, wait_for_previous_grid) before touching memory, so the result is that of a
// plain launch. H200, 4096x4096 16-bit, back-to-back calls: 19.15 -> 18.6-18.9 us.
template <typename... Params, typename... Args>
Status launch_softmax_kernel(const char* name, void (*kernel)(Params...), unsigned grid, int threads,
                             size_t shared_bytes, cudaStream_t stream, bool programmatic_launch, Args... args) {
  return cuda_status(
      launch_kernel(kernel, dim3(grid), dim3(unsigned(threads)), shared_bytes, stream, programmatic_launch, args...),
      name);
}

using ptx::allow_next_grid_to_start;  // ptx/barrier.hpp: programmatic dependent launch
using ptx::wait_for_previous_grid;

// Threads an SM holds on every architecture with PDL (sm_90+), the only ones that run the prologue:
// with rows * threads per row at most sm_count times this, a one-row-per-block grid is resident all
// at once ("one wave"), registers and shared memory permitting. The launchers of steps 6 and 8
// choose the PDL prologue by it (measured, see there).
inline constexpr int64_t kMaxThreadsPerSm = 2048;
inline bool grid_is_one_wave(int64_t blocks, int threads, int sm_count) {
  return blocks * threads <= int64_t(sm_count) * kMaxThreadsPerSm;
}

// Rows longer than this are not prefetched: H200, 8192x32000 fp32 (125 KiB rows) was 8-11 % slower
// with the prefetch, bf16 (62.5 KiB) 1.6 % faster.
inline constexpr uint32_t kPrefetchMaxRowBytes = 64 * 1024;

// Asks L2 for a row's bytes [ptr, ptr + bytes) in one bulk prefetch when `active` (ptr and bytes
// multiples of 16: the vectorized kernels' rows). Called before wait_for_previous_grid: a prefetch
// is only a cache hint, and L2 is where every SM's writes meet, so if the previous grid still
// writes x, L2 ends up with its writes, not stale bytes; the loads that read x into registers or
// shared memory still wait (and do). What it buys: a block that starts during the previous call's
// tail has its row on the way from DRAM while that call drains, instead of after it.
FC_DEVICE void prefetch_row_to_l2(const void* ptr, uint32_t bytes, bool active) {
  active = active && bytes <= kPrefetchMaxRowBytes;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.u32 p, %2, 0;\n\t@p cp.async.bulk.prefetch.L2.global [%0], %1;\n\t}" ::"l"(ptr),
               "r"(bytes), "r"(uint32_t(active))
               : "memory");
#else
  (void)ptr;
  (void)bytes;
  (void)active;
#endif
}

// Calls fn(T{}) with T the element type of `dtype`.
template <typename Fn>
Status dispatch_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kFloat32: return fn(float{});
    case DType::kFloat16: return fn(__half{});
    case DType::kBFloat16: return fn(__nv_bfloat16{});
  }
  return Status::Internal("softmax: unknown dtype");
}

}  // namespace flashcore::softmax
