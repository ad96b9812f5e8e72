// Thin inline-PTX wrappers for the sm80 (Ampere) tensor-core path: mma.sync m16n8k16 (16-bit) and
// m16n8k8 (tf32), ldmatrix, cp.async. One instruction each; fragment layouts are in docs tensor-core-notes section 1.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/host_device.hpp"

namespace flashcore::ptx {

// Shared-memory address (32-bit, .shared window) of a generic pointer into shared memory.
FC_DEVICE uint32_t smem_address(const void* ptr) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
}

// Four 8x8 b16 matrices; lanes 8j..8j+7 give the row addresses of matrix j, which lands in reg j.
FC_DEVICE void ldmatrix_x4(uint32_t (&regs)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(smem_addr));
}

// The same, each matrix transposed on the way (V stored [key][dim] used as the k-major B operand).
FC_DEVICE void ldmatrix_x4_trans(uint32_t (&regs)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(regs[0]), "=r"(regs[1]), "=r"(regs[2]), "=r"(regs[3])
               : "r"(smem_addr));
}

// 16-byte global -> shared copy that bypasses L1. When `valid` is false no byte is read and the
// 16 destination bytes are zero-filled (src_size = 0): this is how sequence tails are padded.
FC_DEVICE void cp_async_16(uint32_t smem_addr, const void* gmem_ptr, bool valid) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr), "l"(gmem_ptr),
               "r"(src_size));
}

// L2 cache policies for cp_async_16's hint (sm_80+): lines of data read once are evicted first;
// evict-normal is the default policy, for data other CTAs read again.
FC_DEVICE uint64_t l2_policy_evict_first() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}
FC_DEVICE uint64_t l2_policy_evict_normal() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

// cp_async_16 with an L2 cache policy (l2_policy_*).
FC_DEVICE void cp_async_16(uint32_t smem_addr, const void* gmem_ptr, bool valid, uint64_t l2_policy) {
  const int src_size = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smem_addr), "l"(gmem_ptr),
               "r"(src_size), "l"(l2_policy));
}

// This thread's threadIdx.x, read from the special register at this point of the program. A
// volatile read is never merged with another or hoisted out of a loop, so values derived from it
// are recomputed where they are used instead of being kept in registers from the kernel's start
// (see load_tile_async in sm80/common/gemm.cuh).
FC_DEVICE int thread_index_x_here() {
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  return tid;
}

// Closes the group of cp.async issued since the previous commit.
FC_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Waits until at most `kPending` committed groups are still in flight (this thread's copies only;
// a barrier must follow before other threads read the data).
template <int kPending>
FC_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// D += A * B for one m16n8k16 tile, fp32 accumulators. A: 4 regs (row-major 16x16),
// B: 2 regs (col-major 16x8), C/D: 4 floats.
FC_DEVICE void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], __half) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

FC_DEVICE void mma_m16n8k16(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                            __nv_bfloat16) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D += A * B for one m16n8k8 tile, tf32 inputs (32-bit registers whose low 13 mantissa bits the
// tensor core ignores), fp32 accumulators. Fragments (PTX ISA "mma.m16n8k8", .tf32), g = lane / 4,
// t = lane % 4: A a0 (row g, k t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4);
// B b0 (k t, col g), b1 (k t + 4, col g); C as for m16n8k16.
FC_DEVICE void mma_m16n8k8_tf32(float (&acc)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D = A * B (C = 0) for one m16n8k8 tf32 tile: a fresh partial sum (see gemm_*_tf32x3).
FC_DEVICE void mma_m16n8k8_tf32_zero_c(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%10, %10, %10, %10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(0.0f));
}

// fp32 -> tf32 (10 explicit mantissa bits), round to nearest with ties away from zero; the result
// is a valid fp32 bit pattern with the low 13 bits zero.
FC_DEVICE uint32_t cvt_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// Two floats -> one register of two 16-bit values, `lo` in the low half (lower column), RN.
FC_DEVICE uint32_t pack2(float lo, float hi, __half) {
  const __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}
FC_DEVICE uint32_t pack2(float lo, float hi, __nv_bfloat16) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The inverse of pack2: the two 16-bit values of a register as floats (exact).
FC_DEVICE float2 unpack2(uint32_t packed, __half) {
  return __half22float2(*reinterpret_cast<const __half2*>(&packed));
}
FC_DEVICE float2 unpack2(uint32_t packed, __nv_bfloat16) {
  return make_float2(__uint_as_float(packed << 16), __uint_as_float(packed & 0xffff0000u));
}

}  // namespace flashcore::ptx
