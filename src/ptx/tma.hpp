// TMA (cp.async.bulk.tensor) wrappers. Tensor maps are built on the host (src/sm90/common/tensor_map.cu) and
// passed as `const __grid_constant__ CUtensorMap`; device code only takes their address.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "ptx/mbarrier.hpp"

namespace flashcore::ptx {

// Pulls a tensor map into the descriptor cache ahead of its first use.
FC_DEVICE void tma_prefetch_descriptor(const void* tensor_map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(tensor_map)) : "memory");
}

// Loads the 5-D box at coordinates (c0 innermost .. c4) into shared memory at `dst`; completion adds
// the box's bytes to `bar`'s transaction count. Elements outside the tensor arrive as zeros and are
// still counted, so expect_tx is always the full box size.
FC_DEVICE void tma_load_5d_addr(uint32_t dst_addr, const void* tensor_map, uint32_t bar_addr, int c0, int c1, int c2,
                                int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n" ::"r"(dst_addr),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar_addr)
      : "memory");
}
// The same with generic pointers to the box and the barrier.
FC_DEVICE void tma_load_5d(void* dst, const void* tensor_map, uint64_t* bar, int c0, int c1, int c2, int c3,
                           int c4) {
  tma_load_5d_addr(smem_addr(dst), tensor_map, smem_addr(bar), c0, c1, c2, c3, c4);
}

// tma_load_5d into every CTA of the cluster named in `cta_mask` (bit r = cluster rank r): the box
// lands at `dst`'s shared-memory offset in each of them, and each one's barrier at `bar`'s offset
// receives the transaction bytes it got. Each destination CTA expects those bytes on its own barrier.
// (Shared-window addresses, as smem_addr gives: 32-bit arithmetic keeps a 24-register producer
// from spilling.)
FC_DEVICE void tma_load_5d_multicast(uint32_t dst_addr, const void* tensor_map, uint32_t bar_addr, uint16_t cta_mask,
                                     int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8;\n" ::"r"(dst_addr),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar_addr),
      "h"(cta_mask)
      : "memory");
}

// The same for a 4-D box, with shared-window addresses (smem_addr) for the box and the barrier.
FC_DEVICE void tma_load_4d_addr(uint32_t dst_addr, const void* tensor_map, uint32_t bar_addr, int c0, int c1, int c2,
                                int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst_addr),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar_addr)
      : "memory");
}
FC_DEVICE void tma_load_4d(void* dst, const void* tensor_map, uint64_t* bar, int c0, int c1, int c2, int c3) {
  tma_load_4d_addr(smem_addr(dst), tensor_map, smem_addr(bar), c0, c1, c2, c3);
}

// Stores the 5-D box from shared memory at `src`; elements outside the tensor are not written.
FC_DEVICE void tma_store_5d(const void* tensor_map, const void* src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(tensor_map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}
FC_DEVICE void tma_store_4d(const void* tensor_map, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(tensor_map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}
// global box at (c0 innermost, c1) += the shared-memory box at `src`, element-wise (fp32 add, atomic
// in L2); a bulk group like the stores.
FC_DEVICE void tma_reduce_add_2d(const void* tensor_map, const void* src, int c0, int c1) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(tensor_map)),
      "r"(smem_addr(src)), "r"(c0), "r"(c1)
      : "memory");
}
// `bytes` (a multiple of 16) of fp32 at global `dst` += those at shared `src` (both 16-byte
// aligned), element-wise (atomic in L2); a bulk group like the stores.
FC_DEVICE void bulk_reduce_add_f32(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
               "r"(smem_addr(src)), "r"(bytes)
               : "memory");
}
// The 1-D box at coordinate c0 into shared memory at `dst` (completion as tma_load_5d).
FC_DEVICE void tma_load_1d(void* dst, const void* tensor_map, uint64_t* bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2}], [%3];\n" ::"r"(
          smem_addr(dst)),
      "l"(reinterpret_cast<uint64_t>(tensor_map)), "r"(c0), "r"(smem_addr(bar))
      : "memory");
}

FC_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until the committed stores have finished reading shared memory (the tile may be reused).
FC_DEVICE void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
// Waits until the committed stores are complete (visible in global memory).
FC_DEVICE void tma_store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

}  // namespace flashcore::ptx
