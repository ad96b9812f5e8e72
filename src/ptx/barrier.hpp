// Named barriers (bar.sync / bar.arrive with an id and a thread count), setmaxnreg, and the
// shared-memory writes that feed the async proxy (zero stores, proxy fence).
// Barrier 0 is __syncthreads; flashcore's ids start at kFirstNamedBarrier so they never collide
// with it or with library code that reserves the low ids.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace flashcore::ptx {

inline constexpr int kFirstNamedBarrier = 8;

// Waits until `threads` threads (a multiple of 32; counted per warp) have arrived at barrier `id`.
FC_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Arrives at barrier `id` without waiting.
FC_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// Re-balances registers between warpgroups. Every warp of the warpgroup executes it; the kernel
// needs __launch_bounds__(threads, 1) or ptxas ignores it (C7508).
template <int kRegs>
FC_DEVICE void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
FC_DEVICE void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256, "setmaxnreg: multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// This CTA's rank in its thread block cluster.
FC_DEVICE uint32_t cluster_ctarank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every CTA in the cluster arrives (release) and waits for all the others (acquire):
// the cluster-wide __syncthreads. Not .aligned: callers may reach it from diverged lanes.
FC_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}

// 16 zero bytes at shared-window address `addr` (16-byte aligned).
FC_DEVICE void st_shared_zero16(uint32_t addr) {
  asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};\n" ::"r"(addr), "r"(0u) : "memory");
}

// Four floats at shared-window address `addr` (16-byte aligned).
FC_DEVICE void st_shared_f32x4(uint32_t addr, float x, float y, float z, float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}

// Two floats at shared-window address `addr` (8-byte aligned).
FC_DEVICE void st_shared_f32x2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

FC_DEVICE void st_shared_b32(uint32_t addr, uint32_t value) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(value) : "memory");
}

// Four 8x8 16-bit matrices, transposed (sm_90): register j of every lane holds row lane / 4, columns
// 2 (lane % 4) and + 1 of matrix j, and lanes 8 j .. 8 j + 7 give the 16-byte row addresses of matrix
// j in shared memory, where row r receives column r of the fragment.
FC_DEVICE void stmatrix_x4_trans(uint32_t addr, uint32_t m0, uint32_t m1, uint32_t m2, uint32_t m3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(m0),
               "r"(m1), "r"(m2), "r"(m3)
               : "memory");
}

// 32 bits at shared-window address `addr` (4-byte aligned). Volatile with a memory clobber: it stays
// after the barrier wait that made the data visible.
FC_DEVICE uint32_t ld_shared_b32(uint32_t addr) {
  uint32_t value;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(value) : "r"(addr) : "memory");
  return value;
}

// 16 bytes at shared-window address `addr` (16-byte aligned); volatile as ld_shared_b32.
FC_DEVICE uint4 ld_shared_b128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

// Generic-proxy writes to shared memory made visible to the async proxy (TMA store, wgmma reads).
FC_DEVICE void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// A flag in global memory between CTAs (the stream-K tail's partials, sm90/stream_k.cuh). The
// writer's CTA-mates order their stores before the flag with a barrier; the release at GPU scope
// then carries them (cumulativity). The reader's acquire orders its CTA-mates' later loads the same
// way, after a barrier.
FC_DEVICE void st_release_gpu(int* flag, int value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}
FC_DEVICE void red_release_gpu_add(int* counter, int value) {
  asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(counter), "r"(value) : "memory");
}
// Orders this thread's generic-proxy global accesses with its async-proxy ones (TMA) around it.
FC_DEVICE void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;\n" ::: "memory"); }
FC_DEVICE int ld_acquire_gpu(const int* flag) {
  int value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

// Programmatic dependent launch (PDL, sm_90 on; older targets are launched without it and compile
// neither instruction).
// The first statement of every PDL-launched kernel: returns once the previous grid in the stream
// has completed and its writes are visible (immediately when launched without PDL).
FC_DEVICE void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next PDL-launched grid in the stream be scheduled once every block of this grid has
// called it (or exited). The next grid still waits in wait_for_previous_grid for this one to
// complete, so this only decides when its blocks may start their prologue.
FC_DEVICE void allow_next_grid_to_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace flashcore::ptx
