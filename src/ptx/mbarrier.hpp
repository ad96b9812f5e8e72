// mbarrier wrappers (shared-memory transaction barriers) for TMA producer/consumer pipelines.
// Phase/parity rules (docs tensor-core-notes §4): a phase completes when the pending arrivals and the
// transaction count both reach zero; try_wait.parity(P) succeeds once the phase with parity P has
// completed, so on a fresh barrier parity 1 is already "complete" and parity 0 is not.
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace flashcore::ptx {

FC_DEVICE uint32_t smem_addr(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }

FC_DEVICE void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
}
// Makes barrier initialisation visible to the async proxy (TMA) and other threads; follow with a
// CTA-wide barrier before any thread uses the mbarriers.
FC_DEVICE void mbarrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }

// One arrival, and `bytes` more expected from async copies completing on this barrier.
FC_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
FC_DEVICE void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}

// `addr` (a shared::cta address of this CTA) as the shared::cluster address of the same offset in
// cluster CTA `cta_rank`. A pure mapping (no memory access), so not volatile.
FC_DEVICE uint32_t map_shared_to_cta(uint32_t addr, uint32_t cta_rank) {
  uint32_t remote;
  asm("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(addr), "r"(cta_rank));
  return remote;
}
// One arrival on the barrier at shared::cluster address `cluster_addr` (map_shared_to_cta), with
// the default (CTA-scope) release. Enough where the accesses being released are async-proxy reads
// already retired by a wgmma wait (a consumer freeing a stage); a cluster-scope release
// (.release.cluster) made the arriving warp wait for its memory operations at cluster scope and
// cost the cluster kernel ~30% (H200).
FC_DEVICE void mbarrier_arrive_mapped(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(cluster_addr) : "memory");
}

// One try_wait: returns whether the phase with `parity` has completed. While it has not, the thread
// may be suspended in hardware until the phase completes or `suspend_ns` passes. Without a hint the
// hardware's own limit applies, and it is short: in the d128 S=16k profile (H200) each
// try returned after about 30 cycles, and the producer warp's wait loop (YIELD, try_wait, branch)
// was 4.7 % of all instructions issued, on a scheduler it shares with three consumer warps.
FC_DEVICE bool mbarrier_try_wait(uint64_t* bar, uint32_t parity, uint32_t suspend_ns) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2, %3;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity), "r"(suspend_ns)
      : "memory");
  return done != 0;
}
// How long a waiter may sleep per try. A suspended thread wakes when the phase completes, so a long
// hint costs no latency: same-call A/Bs (H200) of 20 us for every wait against the
// default, two machines: d128 S=16k fp16 +0.5-0.7 %, bf16 +0.3-0.5 %, causal -0.1 to +0.3 %, d256
// S=8k +0-0.3 %, S=1k unchanged.
inline constexpr uint32_t kWaitSuspendHintNs = 20000;
// Blocks until the phase with `parity` has completed.
FC_DEVICE void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait(bar, parity, kWaitSuspendHintNs)) {
  }
}

// A ring position: which stage, and the parity of the phase a waiter expects there. The parity flips
// each time the index wraps around the ring.
template <int kStages>
struct PipelineState {
  int index = 0;
  uint32_t phase = 0;
  FC_DEVICE void advance() {
    if (++index == kStages) {
      index = 0;
      phase ^= 1u;
    }
  }
};

}  // namespace flashcore::ptx
