// flashcore-bench configurations: one struct per benchmark row, the standard suite of the design
// doc, and the FLOP count of the benchmark protocol.
#pragma once

#include <string>
#include <vector>

#include "flashcore/flashcore.hpp"

namespace flashcore::bench {

struct BenchConfig {
  std::string family;            // groups rows in the report ("d128", "gqa", ...)
  int batch = 4, seqlen_q = 1024, seqlen_k = 1024, heads_q = 32, heads_kv = 32;
  int head_dim_qk = 128, head_dim_v = 128;
  DType dtype = DType::kFloat16;
  bool causal = false;
  MaskAlign align = MaskAlign::kBottomRight;
  int window_left = kWindowInfinite, window_right = kWindowInfinite;
  float softcap = 0.0f;
  std::vector<int> varlen_q;     // non-empty: a varlen batch with these query lengths
  std::vector<int> varlen_k;     // key lengths (same count), defaults to varlen_q
  int page_size = 0;             // > 0: K/V in a pool of pages of this many rows, read through a block table
  bool pages_in_order = false;   // the table lists the pool's pages in order (default: a fixed shuffle)
  KernelPath path = KernelPath::kAuto;

  bool is_varlen() const { return !varlen_q.empty(); }
  bool is_paged() const { return page_size > 0; }
  std::string label() const;
};

// Forward FLOPs: 2*B*Hq*Sq*Sk*(Dqk+Dv), halved for causal with Sq == Sk (flash-attn's convention);
// windows and other causal shapes count the visible (i, j) pairs exactly; varlen sums sequences.
double forward_flops(const BenchConfig& c);

// The fewest bytes a forward pass must move: q, k, v read once, o (and lse) written once.
double forward_min_bytes(const BenchConfig& c);

std::vector<BenchConfig> standard_suite();
std::vector<BenchConfig> quick_suite();

}  // namespace flashcore::bench
