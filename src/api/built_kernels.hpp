// A fast path's table of the (Dqk, Dv, dtype) kernels this build compiled, made from the kernel
// list (cmake/KernelList.cmake) that the build generates as <path>_<op>_kernels.inc:
//   FLASHCORE_KERNEL(<head dim QK>, <head dim V>, <DType enumerator>, <element type>, <built: 0/1>)
// per declared kernel. A path defines FLASHCORE_KERNEL before including the list, e.g. with
// FLASHCORE_BUILT_ENTRY below for its table of built kernels, which ends with a {0, 0, ..., nullptr}
// marker so a pruned table is never empty; supports() and run() look up here.
#pragma once

#include <cstddef>
#include <string>

#include "flashcore/flashcore.hpp"

// FLASHCORE_BUILT_ENTRY(built, launch-function expression, dqk, dv, DType enumerator): a table row
// {dqk, dv, dtype, launch} for a built kernel, nothing for one that this build pruned.
#define FLASHCORE_BUILT_ENTRY(BUILT, LAUNCH, DQK, DV, DTYPE) FLASHCORE_BUILT_ENTRY_##BUILT(LAUNCH, DQK, DV, DTYPE)
#define FLASHCORE_BUILT_ENTRY_1(LAUNCH, DQK, DV, DTYPE) {DQK, DV, ::flashcore::DType::DTYPE, LAUNCH},
#define FLASHCORE_BUILT_ENTRY_0(LAUNCH, DQK, DV, DTYPE)

namespace flashcore::detail {

template <typename LaunchFn>
struct BuiltKernel {
  int head_dim_qk;
  int head_dim_v;
  DType dtype;
  LaunchFn launch;  // nullptr: the end marker
};

template <typename LaunchFn, size_t N>
const BuiltKernel<LaunchFn>* find_built_kernel(const BuiltKernel<LaunchFn> (&table)[N], int head_dim_qk,
                                               int head_dim_v, DType dtype) {
  for (const BuiltKernel<LaunchFn>& k : table) {
    if (k.launch != nullptr && k.head_dim_qk == head_dim_qk && k.head_dim_v == head_dim_v && k.dtype == dtype) {
      return &k;
    }
  }
  return nullptr;
}

// Padding: a call whose head dims have no kernel of their own runs on the kernel with the least
// padding that covers them (Dqk >= head_dim_qk and Dv >= head_dim_v, smallest Dqk + Dv, which the
// tile's work grows with). Such a kernel loads zeros past the call's head dims (they add nothing
// to Q K^T, and give O columns it never stores) and writes only the call's columns; the call's
// head dims must be multiples of kPaddedHeadDimMultiple (whole 16-byte row chunks in 16-bit types).
// The kernel list declares a pair of its own where padding costs too much (cmake/KernelList.cmake).
inline constexpr int kPaddedHeadDimMultiple = 8;

inline bool covers(int kernel_dqk, int kernel_dv, int head_dim_qk, int head_dim_v) {
  if (kernel_dqk == head_dim_qk && kernel_dv == head_dim_v) return true;
  return kernel_dqk >= head_dim_qk && kernel_dv >= head_dim_v && head_dim_qk % kPaddedHeadDimMultiple == 0 &&
         head_dim_v % kPaddedHeadDimMultiple == 0;
}

// The entry of `table` (BuiltKernel rows, or DeclaredKernel ones) a call of (head_dim_qk, head_dim_v,
// dtype) runs on: its own pair, else the covering one with the least padding; nullptr if none.
template <typename Entry, size_t N>
const Entry* find_covering_kernel(const Entry (&table)[N], int head_dim_qk, int head_dim_v, DType dtype) {
  const Entry* best = nullptr;
  for (const Entry& k : table) {
    if (k.head_dim_qk == 0 || k.dtype != dtype || !covers(k.head_dim_qk, k.head_dim_v, head_dim_qk, head_dim_v)) continue;
    if (k.head_dim_qk == head_dim_qk && k.head_dim_v == head_dim_v) return &k;
    if (best == nullptr || k.head_dim_qk + k.head_dim_v < best->head_dim_qk + best->head_dim_v) best = &k;
  }
  return best;
}

// Dv in parts: a call that no kernel covers may run as ceil(Dv / kernel Dv) launches (or CTAs per
// query block) of a kernel with Dqk >= its own, part z computing O's columns [z kernel Dv,
// (z + 1) kernel Dv) and S again; the last part is padded like a covered call. The entry with the
// least work per query block, parts x (kernel Dqk + kernel Dv), and its part count; nullptr if none.
template <typename Entry, size_t N>
const Entry* find_dv_parts_kernel(const Entry (&table)[N], int head_dim_qk, int head_dim_v, DType dtype,
                                  int* parts) {
  const Entry* best = nullptr;
  long best_cost = 0;
  *parts = 0;
  if (head_dim_qk % kPaddedHeadDimMultiple != 0 || head_dim_v % kPaddedHeadDimMultiple != 0) return nullptr;
  for (const Entry& k : table) {
    if (k.head_dim_qk == 0 || k.dtype != dtype || k.head_dim_qk < head_dim_qk) continue;
    const int n = (head_dim_v + k.head_dim_v - 1) / k.head_dim_v;
    const long cost = long(n) * (k.head_dim_qk + k.head_dim_v);
    if (best == nullptr || cost < best_cost) best = &k, best_cost = cost, *parts = n;
  }
  return best;
}

// A kernel the list declares for a path, built or not: what the path can run in some build.
struct DeclaredKernel {
  int head_dim_qk;
  int head_dim_v;
  DType dtype;
};

// "64/64 fp16, 128/128 bf16, ..." or "none", for supports()' messages.
template <typename LaunchFn, size_t N>
std::string built_kernels_list(const BuiltKernel<LaunchFn> (&table)[N]) {
  std::string out;
  for (const BuiltKernel<LaunchFn>& k : table) {
    if (k.launch == nullptr) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(k.head_dim_qk) + "/" + std::to_string(k.head_dim_v) + " " + dtype_name(k.dtype);
  }
  return out.empty() ? "none" : out;
}

}  // namespace flashcore::detail

namespace flashcore::detail {

// "64/64, 96/96, ..." (each head-dim pair once), for supports()' messages.
template <size_t N>
std::string declared_pairs_list(const DeclaredKernel (&list)[N]) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    bool seen = false;
    for (size_t j = 0; j < i; ++j) {
      seen = seen || (list[j].head_dim_qk == list[i].head_dim_qk && list[j].head_dim_v == list[i].head_dim_v);
    }
    if (seen) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(list[i].head_dim_qk) + "/" + std::to_string(list[i].head_dim_v);
  }
  return out;
}

}  // namespace flashcore::detail

namespace flashcore::detail {

// Whether code built for `archs` (a comma-separated list like "80,90a") runs on compute capability
// major.minor: SASS for sm_8x runs on 8.y with y >= x; sm_90a only on 9.0. `ptx_arch` ("80", or
// empty when the build embeds no PTX) is the virtual architecture whose PTX the build embeds: the
// driver compiles it for any device of that compute capability or newer.
inline bool arch_list_runs_on(const std::string& archs, const std::string& ptx_arch, int major, int minor) {
  const int device = 10 * major + minor;
  if (ptx_arch.size() >= 2 && device >= 10 * (ptx_arch[0] - '0') + (ptx_arch[1] - '0')) return true;
  size_t pos = 0;
  while (pos <= archs.size()) {
    const size_t end = archs.find(',', pos) == std::string::npos ? archs.size() : archs.find(',', pos);
    const std::string arch = archs.substr(pos, end - pos);
    pos = end + 1;
    if (arch.size() < 2) continue;
    const int a_major = arch[0] - '0';
    const int a_minor = arch[1] - '0';
    if (a_major == major && a_minor <= minor && (major == 8 || a_minor == minor)) return true;
  }
  return false;
}

#ifdef FLASHCORE_ARCHS
// This build's kernels (FLASHCORE_ARCHS, FLASHCORE_PTX_ARCH: set by cmake/FlashcoreKernels.cmake).
inline bool build_has_code_for(int major, int minor) {
  return arch_list_runs_on(FLASHCORE_ARCHS, FLASHCORE_PTX_ARCH, major, minor);
}

// Empty when this build's kernels run on compute capability major.minor; otherwise why not, naming
// `what` (e.g. "the sm80 path"), for supports(): an Unsupported error before any launch instead of
// the CUDA runtime's "no kernel image".
inline std::string missing_code_reason(const char* what, int major, int minor) {
  if (build_has_code_for(major, minor)) return "";
  const std::string ptx = FLASHCORE_PTX_ARCH;
  return std::string("this build has no ") + what + " code for sm_" + std::to_string(major) + std::to_string(minor) +
         " (built archs: " + FLASHCORE_ARCHS + (ptx.empty() ? "; no PTX embedded" : "; PTX compute_" + ptx) + ")";
}
#endif

}  // namespace flashcore::detail
