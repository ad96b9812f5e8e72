// A fast path's table of the (Dqk, Dv, dtype) kernels this build compiled. Each path lists its
// instantiation units under the CMake FLASHCORE_HAS_<PATH>_D<QK>_<V>_<DTYPE> guards, ending with a
// {0, 0, ..., nullptr} marker so a pruned table is never empty; supports() and run() look up here.
#pragma once

#include <cstddef>
#include <string>

#include "flashcore/flashcore.hpp"

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
