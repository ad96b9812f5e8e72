// Thin wrappers over sm_90a warpgroup MMA (wgmma): shared-memory matrix descriptors, the
// async-ordering instructions, and the m64nNk16 instructions themselves (generated, wgmma_shapes.inc).
// Facts used here (bit positions, LBO/SBO, swizzle placement) are in docs tensor-core-notes §2.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace flashcore::ptx {

enum class WgmmaType { kHalf, kBFloat16 };

// ---- Shared-memory matrix descriptors ----------------------------------------------------------
// Every operand tile flashcore hands to wgmma uses the 128-byte swizzle with 64 16-bit elements per
// 128-byte row, stored as [cols/64][rows][64], each tile 1024-byte aligned (so base offset = 0).
inline constexpr uint64_t kDescSwizzle128B = 1ull << 62;

FC_DEVICE uint64_t desc_encode(uint32_t bytes) { return (uint64_t)((bytes & 0x3FFFFu) >> 4); }

// A descriptor for a tile starting at shared address `smem_addr` (a 32-bit shared-window address).
// K-major operand (Q as A, K as B): LBO is unused by the hardware for swizzled K-major tiles (16 by
// convention), SBO = 1024 bytes between 8-row groups.
// MN-major operand (V as B with trans-b = 1): LBO = byte stride between 64-column blocks of N,
// SBO = 1024 bytes between 8-row groups of K.
FC_DEVICE uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return desc_encode(smem_addr) | (desc_encode(lbo_bytes) << 16) | (desc_encode(sbo_bytes) << 32) |
         kDescSwizzle128B;
}
// Moving a descriptor's start by `bytes` (16-byte multiple) only touches the start-address field;
// adding the encoded offset is exact as long as the start stays inside the 256 KiB window.
FC_DEVICE uint64_t desc_advance(uint64_t desc, uint32_t bytes) { return desc + (uint64_t)(bytes >> 4); }

// Hides a value's origin from the optimizer: values derived from it after this point are computed
// where they are used, not hoisted out of loops (where they would hold registers for the loop).
FC_DEVICE void opaque(uint64_t& value) { asm volatile("" : "+l"(value)); }
FC_DEVICE void opaque(uint32_t& value) { asm volatile("" : "+r"(value)); }

// ---- Ordering -------------------------------------------------------------------------------------
// Orders this warpgroup's earlier register accesses (accumulators, A fragments) before the next
// wgmma reads them. Needed before the first wgmma and after any non-wgmma access to those registers.
FC_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
// Closes the batch of wgmmas issued since the last commit into one group.
FC_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most `kPending` committed groups are still running.
template <int kPending>
FC_DEVICE void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory"); }

// The compiler does not know wgmma writes its registers asynchronously. Tying each register to an
// empty volatile asm (after a wait, before a fence) keeps plain reads and writes of the fragment
// from being moved across the wait/fence instructions.
template <int kCount>
FC_DEVICE void fence_registers(float* regs) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(regs[i])::"memory");
}
template <int kCount>
FC_DEVICE void fence_registers(uint32_t* regs) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(regs[i])::"memory");
}

// ---- The instructions -----------------------------------------------------------------------------
template <int N, WgmmaType T> struct WgmmaSS;  // D(64xN) (+)= A(64x16, smem) * B(16xN, smem, K-major)
template <int N, WgmmaType T> struct WgmmaRS;  // D(64xN) (+)= A(64x16, regs) * B(16xN, smem, MN-major)
template <int N, WgmmaType T> struct WgmmaSSTrans;  // D(64xN) (+)= A(64x16, smem, MN-major) * B(16xN, smem, MN-major)
template <int N, WgmmaType T> struct WgmmaSSTransB;  // D(64xN) (+)= A(64x16, smem, K-major) * B(16xN, smem, MN-major)
template <int N, WgmmaType T> struct WgmmaSSTransA;  // D(64xN) (+)= A(64x16, smem, MN-major) * B(16xN, smem, K-major)

#if defined(__CUDACC__)
#include "ptx/wgmma_shapes.inc"
#endif

}  // namespace flashcore::ptx
