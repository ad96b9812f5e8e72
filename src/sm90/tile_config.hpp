// THE tuning table of the sm90 forward path: tile sizes, pipeline depth, register split and schedule
// per (QK head dim, V head dim). Nothing else in src/sm90 hard-codes these numbers.
//
// Fixed by the kernel's structure (not tunable here):
//   * one producer warpgroup + kConsumerWarpgroups consumer warpgroups of 64 query rows each, so
//     kBlockM = 64 * kConsumerWarpgroups;
//   * operand tiles use the 128-byte swizzle: head dims must be multiples of 64.
// Budgets to respect when editing:
//   * shared memory: Q (kBlockM x Dqk) + kStages x (K kBlockN x Dqk + V kBlockN x Dv), 16-bit, plus
//     1 KiB alignment slack, must fit the 227 KiB opt-in limit;
//   * consumer registers: O (Dv/2) + S (kBlockN/2) + P (kBlockN/4) fp32/b32 registers per thread, plus
//     addressing and softmax state, must fit kConsumerRegs without spills (check -Xptxas -v);
//   * kProducerRegs * 128 + kConsumerRegs * 128 * kConsumerWarpgroups <= 65536.
#pragma once

namespace flashcore::sm90 {

// How a consumer warpgroup orders its GEMMs and softmax.
enum class Schedule : int {
  // S_j = Q K_j^T, wait, softmax, O += P_j V_j, wait: simplest, nothing overlaps inside a warpgroup.
  kSerial = 0,
  // Issue S_{j+1} = Q K_{j+1}^T and O += P_j V_j together, softmax S_{j+1} while P_j V_j runs, and
  // alternate the two consumer warpgroups' GEMM issue (ping-pong) so one's softmax hides under the
  // other's tensor-core work.
  kOverlapPingPong = 1,
};

template <int kDqk, int kDv>
struct TileConfig;  // only the listed pairs are built; launch.cu's supports() names the others

template <>
struct TileConfig<64, 64> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 3;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr Schedule kSchedule = Schedule::kOverlapPingPong;
};

template <>
struct TileConfig<128, 128> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 2;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr Schedule kSchedule = Schedule::kOverlapPingPong;
};

template <>
struct TileConfig<256, 256> {
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kBlockN = 48;
  static constexpr int kStages = 3;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs = 240;
  static constexpr Schedule kSchedule = Schedule::kOverlapPingPong;
};

// Whether O is rescaled after every KV block (true) or only when some row's running max moved
// (false, a warpgroup-uniform vote). See docs/perf-notes-sm90.md for the measurement behind it.
inline constexpr bool kAlwaysRescaleO = true;

}  // namespace flashcore::sm90
