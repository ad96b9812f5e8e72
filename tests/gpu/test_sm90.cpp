// The sm90 (wgmma/TMA) forward path against the fp64 CPU reference (tests/common/gpu_check), with
// the fp16/bf16 tolerance rule:
// the path's error (relative Frobenius and max-abs, vs fp64) must be no worse than 2x the error of a
// naive computation in the same dtype (fp32 accumulation, inputs and probabilities P rounded to the
// dtype, output rounded). Outputs are poisoned with NaN before each run; every element must be
// written. The sweep covers head dims (64, 96, 128, 192/128, 256) x dtypes x masks (causal both
// alignments, window) x GQA x tails x Sq != Sk x input scale 1 and 10 x softcap x both memory
// layouts x both schedules, and varlen (packed sequences of length 0, 1 and uneven lengths,
// seqused_k) with every mask rule.
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "api/paths.hpp"
#include "common/gpu.hpp"
#include "common/gpu_check.hpp"
#include "flashcore/flashcore.hpp"
#include "reference/cpu_reference.hpp"
#include "sm90/fwd/tile_config.hpp"

namespace flashcore {
namespace {

struct Case {
  int batch = 1, heads_q = 2, heads_kv = 2, seqlen_q = 128, seqlen_k = 128, head_dim = 128;
  int head_dim_v = 0;  // 0: head_dim
  // Varlen when non-empty (batch = their size; seqlen_q/k unused): one length per sequence.
  std::vector<int> varlen_q, varlen_k, seqused_k;
  DType dtype = DType::kBFloat16;
  bool causal = false;
  MaskAlign align = MaskAlign::kBottomRight;
  int window_left = kWindowInfinite, window_right = kWindowInfinite;
  float softcap = 0.0f;
  float input_scale = 1.0f;
  std::vector<std::pair<int, float>> key_gain;  // testing::TestCase::key_gain
  bool bhsd = false;           // PyTorch [B, H, S, D] strides instead of [B, S, H, D]
  int page_size = 0;           // > 0: K/V in a shuffled page pool (testing::TestCase::page_size)
  int page_gap = 0;            // unused rows after each page (testing::TestCase::page_gap)
  testing::AlibiLayout alibi = testing::AlibiLayout::kNone;
  // Plan overrides (ForwardOverrides), "" / 0 = the plan's own rule:
  const char* schedule = "";   // "serial" | "overlap"
  int block_n = 0;             // the tile config's kBlockN or kAltBlockN
  const char* rescale = "";    // "vote" | "always"
  const char* cluster = "";    // "off" | "on": the cluster kernel never / whenever the call allows it
  const char* long_tiles = ""; // "off" | "on": the long tile shape
  const char* short_tiles = "";// "off" | "on": the short tile shape
  const char* tile_order = ""; // "longest" | "paired"
  int heads_per_group = 0;     // > 0: heads per scheduler group
  const char* stream_k = "";   // "off" | "on": the stream-K tail
  int grid = 0;                // > 0: at most this many CTAs (clusters) in the persistent grid

  int dv() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  std::string name() const {
    auto join = [](const std::vector<int>& v) {
      std::string j;
      for (int x : v) j += (j.empty() ? "" : "-") + std::to_string(x);
      return j;
    };
    std::string s = "d" + std::to_string(head_dim) + (dv() != head_dim ? "v" + std::to_string(dv()) : "") + "_" +
                    dtype_name(dtype) + "_H" + std::to_string(heads_q) + "x" + std::to_string(heads_kv);
    if (varlen_q.empty()) {
      s += "_B" + std::to_string(batch) + "_Sq" + std::to_string(seqlen_q) + "_Sk" + std::to_string(seqlen_k);
    } else {
      s += "_varlenQ" + join(varlen_q) + "_K" + join(varlen_k);
    }
    if (!seqused_k.empty()) s += "_used" + join(seqused_k);
    if (causal) s += align == MaskAlign::kBottomRight ? "_causalBR" : "_causalTL";
    if (window_left >= 0 || window_right >= 0) {
      s += "_win" + std::to_string(window_left) + "," + std::to_string(window_right);
      s += align == MaskAlign::kBottomRight ? "BR" : "TL";
    }
    if (softcap > 0) s += "_softcap" + std::to_string((int)softcap);
    s += "_x" + std::to_string((int)input_scale);
    if (!key_gain.empty()) {
      s += "_gain";
      for (const auto& [position, gain] : key_gain) s += "_" + std::to_string(position) + "x" + std::to_string((int)gain);
    }
    if (bhsd) s += "_bhsd";
    if (page_size > 0) s += "_page" + std::to_string(page_size);
    if (page_gap > 0) s += "_gap" + std::to_string(page_gap);
    if (alibi != testing::AlibiLayout::kNone) s += alibi == testing::AlibiLayout::kPerHead ? "_alibiH" : "_alibiBH";
    if (*schedule) s += std::string("_") + schedule;
    if (block_n > 0) s += "_blockN" + std::to_string(block_n);
    if (*rescale) s += std::string("_rescale_") + rescale;
    if (*cluster) s += std::string("_cluster_") + cluster;
    if (*long_tiles) s += std::string("_long_") + long_tiles;
    if (*short_tiles) s += std::string("_short_") + short_tiles;
    if (*tile_order) s += std::string("_order_") + tile_order;
    if (heads_per_group > 0) s += "_hpg" + std::to_string(heads_per_group);
    if (*stream_k) s += std::string("_streamk_") + stream_k;
    if (grid > 0) s += "_grid" + std::to_string(grid);
    return s;
  }
};

// gtest prints a parameter with PrintTo; without it CTest test names carry the raw bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name(); }

// The shared check (tests/common/gpu_check): fp64 CPU reference, naive same-dtype baseline, NaN
// poison, every element written, LSE, with the tuning variant selected through the environment.
// Empty when this build has the sm90 kernel for (Dqk, Dv, dtype); otherwise supports()'s reason. A
// build configured with fewer FLASHCORE_HEAD_DIMS / FLASHCORE_DTYPES skips those cases, saying so,
// instead of failing them; any other refusal is still a failure.
// An H100/H200 as supports() sees it, for checks that need no device.
detail::DeviceInfo hopper_device_info() {
  detail::DeviceInfo info;
  info.has_device = true, info.cc_major = 9, info.cc_minor = 0, info.sm_count = 132;
  info.max_smem_per_block_optin = 227 * 1024;
  return info;
}

std::string kernel_not_in_build(int dqk, int dv, DType dtype) {
  const detail::DeviceInfo info = hopper_device_info();
  AttentionParams p;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 128, p.heads_q = p.heads_kv = 1;
  p.head_dim_qk = dqk, p.head_dim_v = dv, p.dtype = dtype;
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(uintptr_t(1) << 20);  // 16-byte aligned, never used
  set_dense_strides(p);
  const std::string why = detail::sm90_path().supports(p, info);
  return why.find("not in this build") != std::string::npos ? why : "";
}

// Inside a test body: skips the whole test when the case's kernel is not in this build.
#define SKIP_IF_NOT_IN_BUILD(dqk, dv, dtype)                                       \
  do {                                                                              \
    const std::string why_ = kernel_not_in_build(dqk, dv, dtype);                   \
    if (!why_.empty()) GTEST_SKIP() << "not in this build: " << why_;               \
  } while (0)

// A test looping over several kernels runs those in this build (printing the others) and skips
// only when none of them is.
class KernelsInBuild {
 public:
  bool take(int dqk, int dv, DType dtype) {
    const std::string why = kernel_not_in_build(dqk, dv, dtype);
    if (why.empty()) return ++ran_, true;
    std::printf("[sm90] not in this build, not run: %s\n", why.c_str());
    return false;
  }
  bool none() const { return ran_ == 0; }

 private:
  int ran_ = 0;
};
#define SKIP_IF_NONE_RAN(kernels) \
  if ((kernels).none()) GTEST_SKIP() << "not in this build: none of this test's kernels"

void run_case(const Case& c) {
  SCOPED_TRACE(c.name());
  testing::TestCase tc;
  tc.batch = c.batch;
  tc.seqlen_q = c.seqlen_q;
  tc.seqlen_k = c.seqlen_k;
  tc.heads_q = c.heads_q;
  tc.heads_kv = c.heads_kv;
  tc.head_dim_qk = c.head_dim;
  tc.head_dim_v = c.dv();
  tc.varlen_q = c.varlen_q;
  tc.varlen_k = c.varlen_k;
  tc.seqused_k = c.seqused_k;
  if (!c.varlen_q.empty()) tc.batch = (int)c.varlen_q.size();
  tc.dtype = c.dtype;
  tc.causal = c.causal;
  tc.align = c.align;
  tc.window_left = c.window_left;
  tc.window_right = c.window_right;
  tc.softcap = c.softcap;
  tc.input_scale = c.input_scale;
  tc.key_gain = c.key_gain;
  tc.layout = c.bhsd ? testing::Layout::kBHSD : testing::Layout::kBSHD;
  tc.page_size = c.page_size;
  tc.page_gap = c.page_gap;
  tc.alibi = c.alibi;
  tc.seed = 1234u + uint64_t(c.seqlen_q) * 7u + uint64_t(c.seqlen_k) * 13u + uint64_t(c.head_dim);
  for (int len : c.varlen_q) tc.seed = tc.seed * 31u + uint64_t(len);

  // "" leaves the plan's choice; word0 / word1 force 0 / 1.
  auto choice = [](const char* value, const char* word0, const char* word1) {
    return std::strcmp(value, word0) == 0 ? 0 : std::strcmp(value, word1) == 0 ? 1 : -1;
  };
  ForwardOverrides& o = tc.overrides;
  o.schedule = choice(c.schedule, "serial", "overlap");
  o.block_n = c.block_n;
  o.always_rescale = choice(c.rescale, "vote", "always");
  o.cluster = choice(c.cluster, "off", "on");
  o.long_tiles = choice(c.long_tiles, "off", "on");
  o.short_tiles = choice(c.short_tiles, "off", "on");
  o.pair_tiles = choice(c.tile_order, "longest", "paired");
  o.heads_per_group = c.heads_per_group;
  o.stream_k = choice(c.stream_k, "off", "on");
  o.max_grid_units = c.grid;
  const testing::PathCheck check = testing::check_path(tc, KernelPath::kSm90);
  if (check.status.code == StatusCode::kUnsupported &&
      check.status.message.find("FLASHCORE_BUILD_TUNING_KERNELS") != std::string::npos) {
    GTEST_SKIP() << "tuning kernel not in this build: " << check.status.message;
  }
  // An override (kAltBlockN, a schedule) names a variant of the case's own head-dim kernel; a build
  // pruned of that kernel runs the call padded on a covering one, whose variants are others.
  const std::string& why = check.status.message;
  if (check.status.code == StatusCode::kUnsupported &&
      why.find("is not built for head dim") != std::string::npos &&
      why.find("is not built for head dim " + std::to_string(c.head_dim) + " ") == std::string::npos) {
    GTEST_SKIP() << "the head dim's own kernel is not in this build (padded onto another): " << why;
  }
  EXPECT_TRUE(check.ok()) << tc.describe() << "\n" << check.describe();
  std::printf("[sm90] %-60s rel %.3e (naive %.3e) max %.3e (naive %.3e)\n", c.name().c_str(),
              check.out_error.rel_fro, check.naive_error.rel_fro, check.out_error.max_abs, check.naive_error.max_abs);
}

// The sm90 tile config's kAltBlockN for the built pair with Dqk = d (the ForwardOverrides::block_n value
// that selects it).
int alt_block_n(int d) {
  switch (d) {
    case 64: return sm90::TileConfig<64, 64>::kAltBlockN;
    case 80: return sm90::TileConfig<80, 80>::kAltBlockN;
    case 96: return sm90::TileConfig<96, 96>::kAltBlockN;
    case 160: return sm90::TileConfig<160, 160>::kAltBlockN;
    case 128: return sm90::TileConfig<128, 128>::kAltBlockN;
    case 192: return sm90::TileConfig<192, 128>::kAltBlockN;
    default: return sm90::TileConfig<256, 256>::kAltBlockN;
  }
}

// Packed sequences: lengths 0 and 1, uneven lengths around the tile sizes, sequences with no keys,
// seqused_k, with every mask rule the path has and GQA/MQA. Rows past a sequence's end inside a
// tile must not be written (the neighbour's rows are checked like every other row).
void add_varlen_cases(std::vector<Case>& cases, const Case& base) {
  auto add = [&](auto edit) {
    Case c = base;
    edit(c);
    cases.push_back(c);
  };
  add([](Case& c) {  // no mask, GQA 2; a sequence with no queries, one with no keys, length 1
    c.heads_q = 4, c.heads_kv = 2;
    c.varlen_q = {1, 130, 7, 0, 65, 200};
    c.varlen_k = {63, 129, 0, 5, 200, 333};
  });
  add([](Case& c) {  // causal bottom-right, seqused_k (0 and partial), input scale 10
    c.varlen_q = {1, 130, 7, 0, 65, 200};
    c.varlen_k = {63, 129, 0, 5, 200, 333};
    c.seqused_k = {40, 129, 0, 5, 77, 300};
    c.causal = true, c.input_scale = 10;
  });
  add([](Case& c) {  // causal top-left: Sq > Sk (empty rows at the end) and Sq < Sk
    c.varlen_q = {300, 1, 129};
    c.varlen_k = {129, 400, 1};
    c.causal = true, c.align = MaskAlign::kTopLeft;
  });
  add([](Case& c) {  // sliding window + softcap + seqused_k, MQA
    c.heads_q = 8, c.heads_kv = 1;
    c.varlen_q = {77, 250, 3};
    c.varlen_k = {100, 260, 70};
    c.seqused_k = {100, 190, 1};
    c.window_left = 20, c.window_right = 5, c.softcap = 30;
  });
  add([](Case& c) {  // many tiles per CTA, full 64-row warpgroup tiles next to partial ones
    c.heads_q = 16, c.heads_kv = 4;
    c.varlen_q = {700, 64, 128, 1000, 3, 192};
    c.varlen_k = {700, 64, 500, 1000, 3, 191};
    c.causal = true;
  });
  add([](Case& c) {  // no mask, more units than SMs: most CTAs claim several from the dynamic
    // handout (scheduler.cuh, TileQueue), and two thirds of the units have no rows
    c.heads_q = 8, c.heads_kv = 2;
    c.varlen_q = {0, 900, 5, 300, 1, 640};
    c.varlen_k = {10, 900, 7, 333, 1, 600};
  });
}

// Paged K/V (the varlen kernel loads each block in pieces of gcd(page_size, kBlockN) rows, a page
// looked up per piece; a block of more than 8 boxes is issued by the helper warps, else by the
// producer warp's lanes; row-group tiles take a box per piece, the others a box per piece and
// 64-column chunk): pages of 8 (the smallest), 16, 48 (a piece of 16 or 48 rows, not a power of
// two), 64 and 256 (a block inside one page), a pool whose pages are not evenly spaced (chunked
// tiles at every head dim), varlen and dense queries, seqused_k, every mask rule, GQA/MQA.
// make_problem fills the pool's unused rows with NaN, so a piece read from the wrong page or past a
// sequence's keys shows.
void add_paged_cases(std::vector<Case>& cases, const Case& base) {
  auto add = [&](auto edit) {
    Case c = base;
    edit(c);
    cases.push_back(c);
  };
  add([](Case& c) {  // causal, GQA 2, seqused_k; sequences with no queries, no keys, one key
    c.heads_q = 4, c.heads_kv = 2, c.page_size = 16, c.causal = true;
    c.varlen_q = {1, 130, 7, 0, 65, 200};
    c.varlen_k = {63, 129, 1, 0, 200, 333};
    c.seqused_k = {40, 129, 1, 0, 77, 300};
  });
  add([](Case& c) {  // no mask, more units than SMs, blocks inside one page
    c.heads_q = 8, c.heads_kv = 2, c.page_size = 256;
    c.varlen_q = {0, 900, 5, 300, 1, 640};
    c.varlen_k = {10, 900, 7, 333, 1, 600};
  });
  add([](Case& c) {  // dense queries over a cache with per-entry lengths, window + softcap, MQA
    c.batch = 3, c.heads_q = 4, c.heads_kv = 1, c.page_size = 64;
    c.seqlen_q = 150, c.seqlen_k = 640, c.seqused_k = {640, 129, 300};
    c.window_left = 70, c.window_right = 10, c.softcap = 30;
  });
  add([](Case& c) {  // causal top-left, pieces of 8 rows
    c.page_size = 8, c.causal = true, c.align = MaskAlign::kTopLeft;
    c.varlen_q = {300, 1, 129};
    c.varlen_k = {129, 400, 1};
  });
  add([](Case& c) {  // pages of 48 rows, input scale 10
    c.heads_q = 4, c.heads_kv = 2, c.page_size = 48, c.input_scale = 10;
    c.varlen_q = {77, 250, 3};
    c.varlen_k = {100, 520, 70};
  });
  add([](Case& c) {  // pages of 16 rows 8 rows apart: chunked tiles, helper warps at d128
    c.heads_q = 4, c.heads_kv = 2, c.page_size = 16, c.page_gap = 8, c.causal = true;
    c.varlen_q = {129, 1, 300};
    c.varlen_k = {250, 77, 300};
  });
}

// ALiBi (slope * |i + Sk - Sq - j| subtracted after the softcap, in dot units in the kernels; its
// own builds of the masked and varlen kernels, plan.cpp): per-head and per-(batch, head) slopes,
// calls in which every row sees every key (fully visible blocks, the stale-max softmax), both
// causal alignments (the bias stays bottom-right aligned), windows, softcap, varlen, paged, long.
void add_alibi_cases(std::vector<Case>& cases, const Case& base) {
  using testing::AlibiLayout;
  auto add = [&](auto edit) {
    Case c = base;
    edit(c);
    cases.push_back(c);
  };
  add([](Case& c) { c.batch = 2, c.heads_q = 4, c.heads_kv = 2, c.seqlen_q = 300, c.seqlen_k = 700, c.alibi = AlibiLayout::kPerBatchHead; });
  add([](Case& c) { c.seqlen_q = c.seqlen_k = 777, c.causal = true, c.alibi = AlibiLayout::kPerHead; });
  add([](Case& c) {
    c.seqlen_q = 400, c.seqlen_k = 200, c.causal = true, c.align = MaskAlign::kTopLeft, c.alibi = AlibiLayout::kPerHead;
  });
  add([](Case& c) {
    c.seqlen_q = c.seqlen_k = 500, c.window_left = 64, c.window_right = 16, c.softcap = 30;
    c.alibi = AlibiLayout::kPerBatchHead;
  });
  add([](Case& c) {
    c.heads_q = 4, c.heads_kv = 2, c.causal = true, c.alibi = AlibiLayout::kPerBatchHead;
    c.varlen_q = {1, 130, 7, 0, 65, 200};
    c.varlen_k = {63, 129, 0, 5, 200, 333};
    c.seqused_k = {40, 129, 0, 5, 77, 300};
  });
  add([](Case& c) {
    c.heads_q = 4, c.heads_kv = 2, c.page_size = 16, c.alibi = AlibiLayout::kPerHead;
    c.varlen_q = {77, 250, 3};
    c.varlen_k = {100, 520, 70};
  });
  add([](Case& c) { c.heads_q = 3, c.heads_kv = 1, c.seqlen_q = 300, c.seqlen_k = 1000, c.alibi = AlibiLayout::kPerHead; });
  add([](Case& c) {
    c.heads_q = 2, c.heads_kv = 2, c.seqlen_q = 260, c.seqlen_k = 8200, c.causal = true, c.alibi = AlibiLayout::kPerBatchHead;
  });
}

// Head dims without a kernel of their own, padded to the covering pair (api/built_kernels.hpp):
// zeros past the call's columns in Q, K and V, stores of its columns only (per-chunk TMA maps, the
// direct epilogue's column bound). 40 -> 64 (three warpgroups), 112 -> 128 (would be the cluster
// kernel's shape and the long shape: both off when padded), 72/40 -> 80 (unequal), 200 -> 256
// (direct epilogue), 8 -> 64, 248 -> 256; every kernel kind: dense, causal, window, softcap, GQA,
// BHSD strides, varlen with seqused_k, the stream-K tail, and a long call (16k keys).
void add_padded_cases(std::vector<Case>& cases) {
  const std::pair<int, int> dims[] = {{40, 40}, {112, 112}, {72, 40}, {200, 200}, {8, 8}, {248, 248}};
  int i = 0;
  for (auto [dqk, dv] : dims) {
    Case base;
    base.head_dim = dqk, base.head_dim_v = dv;
    base.dtype = i++ % 2 == 0 ? DType::kBFloat16 : DType::kFloat16;
    auto add = [&](auto edit) {
      Case c = base;
      edit(c);
      cases.push_back(c);
    };
    add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.input_scale = 10; });
    add([](Case& c) { c.seqlen_q = c.seqlen_k = 777; c.causal = true; });
    add([](Case& c) { c.seqlen_q = 65; c.seqlen_k = 300; c.causal = true; c.align = MaskAlign::kTopLeft; });
    add([](Case& c) { c.seqlen_q = c.seqlen_k = 500; c.window_left = 64; c.window_right = 16; c.softcap = 30; });
    add([](Case& c) { c.heads_q = 8; c.heads_kv = 2; c.seqlen_q = 129; c.seqlen_k = 257; });
    add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 2; c.seqlen_q = 130; c.seqlen_k = 260; c.bhsd = true; });
    add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 4; c.seqlen_q = 512; c.seqlen_k = 700; c.cluster = "on"; c.long_tiles = "on"; });
    add([](Case& c) { c.heads_q = 3; c.heads_kv = 3; c.seqlen_q = 300; c.seqlen_k = 1000; c.input_scale = 10; c.stream_k = "on"; c.grid = 5; });
    add([](Case& c) {
      c.heads_q = 4, c.heads_kv = 2, c.causal = true;
      c.varlen_q = {1, 130, 7, 0, 65, 200};
      c.varlen_k = {63, 129, 0, 5, 200, 333};
      c.seqused_k = {40, 129, 0, 5, 77, 300};
    });
    add([](Case& c) { c.seqlen_q = 256; c.seqlen_k = 16384; c.heads_q = 2; c.heads_kv = 1; });
    add([](Case& c) {
      c.heads_q = 4, c.heads_kv = 2, c.causal = true, c.page_size = 16;
      c.varlen_q = {1, 130, 7, 65};
      c.varlen_k = {63, 129, 5, 200};
    });
  }
}

std::vector<Case> sweep() {
  std::vector<Case> cases;
  for (int d : {64, 80, 96, 128, 160, 192, 256}) {
    for (DType dt : {DType::kFloat16, DType::kBFloat16}) {
      Case base;
      base.head_dim = d, base.dtype = dt;
      if (d == 192) base.head_dim_v = 128;  // the built 192 pair is Dqk/Dv = 192/128
      auto add = [&](auto edit) {
        Case c = base;
        edit(c);
        cases.push_back(c);
      };
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; });                                   // tails, no mask
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.causal = true; c.input_scale = 10; }); // causal, scale 10
      add([](Case& c) { c.seqlen_q = 65; c.seqlen_k = 300; c.causal = true; });                // Sq < Sk, BR
      add([](Case& c) { c.seqlen_q = 300; c.seqlen_k = 129; c.causal = true; });               // Sq > Sk: empty rows
      add([](Case& c) { c.seqlen_q = 300; c.seqlen_k = 129; c.causal = true; c.align = MaskAlign::kTopLeft; });
      add([](Case& c) { c.seqlen_q = 129; c.seqlen_k = 400; c.causal = true; c.align = MaskAlign::kTopLeft; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 500; c.window_left = 64; c.window_right = 16; });
      add([](Case& c) { c.seqlen_q = 200; c.seqlen_k = 700; c.window_left = 100; c.window_right = 0; c.align = MaskAlign::kTopLeft; });
      add([](Case& c) { c.heads_q = 8; c.heads_kv = 2; c.seqlen_q = 7; c.seqlen_k = 1; });     // GQA 4, tiny
      add([](Case& c) { c.heads_q = 8; c.heads_kv = 1; c.seqlen_q = 129; c.seqlen_k = 257; c.causal = true; });  // MQA
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 384; c.softcap = 30; c.input_scale = 10; });
      add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 2; c.seqlen_q = 130; c.seqlen_k = 260; c.bhsd = true; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 777; c.causal = true; c.schedule = "serial"; });
      add([](Case& c) { c.seqlen_q = 333; c.seqlen_k = 555; c.input_scale = 10; c.schedule = "serial"; });
      // The tuning candidate kAltBlockN (serial schedule) and the rescale-only-when-the-max-moved variant.
      const int alt = alt_block_n(d);
      add([&](Case& c) { c.seqlen_q = c.seqlen_k = 999; c.causal = true; c.input_scale = 10; c.block_n = alt; });
      add([&](Case& c) { c.seqlen_q = 257; c.seqlen_k = 1100; c.window_left = 300; c.window_right = 40; c.block_n = alt; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.causal = true; c.input_scale = 10; c.rescale = "vote"; });
      add([](Case& c) { c.seqlen_q = 600; c.seqlen_k = 900; c.rescale = "vote"; });
      // More tiles than SMs: every CTA runs several tiles, so the pipeline phases, the Q buffer and
      // the O staging tile are reused across tiles (and the snake order visits both directions).
      add([](Case& c) { c.batch = 2; c.heads_q = 32; c.heads_kv = 8; c.seqlen_q = c.seqlen_k = 700; c.causal = true; });
      add([](Case& c) { c.batch = 3; c.heads_q = 24; c.heads_kv = 24; c.seqlen_q = 520; c.seqlen_k = 333; });
      // The two-CTA cluster kernel (d128, d256: every row sees every key and the query blocks pair
      // up; other head dims run these shapes on one CTA per tile), forced on below its length
      // threshold: GQA with a key tail at input scale 10; more pairs than clusters, so each
      // cluster runs several; a window too wide to cut any row (still the cluster kernel); and a
      // shape it could take, with the cluster kernel off. (long_keys_cluster below: on by the rule.)
      add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 2; c.seqlen_q = 256; c.seqlen_k = 1000; c.input_scale = 10; c.cluster = "on"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 16; c.heads_kv = 16; c.seqlen_q = 768; c.seqlen_k = 160; c.cluster = "on"; });
      add([](Case& c) { c.seqlen_q = 256; c.seqlen_k = 700; c.window_left = 5000; c.window_right = 5000; c.cluster = "on"; });
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.cluster = "off"; });
      // The long tile shape (d128: three consumer warpgroups at kBlockN 80), forced on below its
      // length threshold: one CTA per tile (3 query blocks of 192) with key and query tails at input
      // scale 10; the cluster kernel (2 query blocks) under GQA; causal with Sq < Sk in balanced
      // pairs; a window. (long_keys, long_keys_cluster and long_keys_causal below: on by the rule.)
      add([](Case& c) { c.seqlen_q = 500; c.seqlen_k = 777; c.input_scale = 10; c.long_tiles = "on"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 2; c.seqlen_q = 384; c.seqlen_k = 1000; c.cluster = "on"; c.long_tiles = "on"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 8; c.heads_kv = 2; c.seqlen_q = 700; c.seqlen_k = 1100; c.causal = true; c.input_scale = 10; c.tile_order = "paired"; c.long_tiles = "on"; });
      add([](Case& c) { c.seqlen_q = 600; c.seqlen_k = 900; c.window_left = 200; c.window_right = 30; c.long_tiles = "on"; });
      // Last query blocks where whole warpgroups have no rows: two of three in the cluster kernel
      // (200 = 192 + 8 rows, several tiles per cluster) and in a causal call (600 = 3 * 192 + 24);
      // one of three at 500 above.
      add([](Case& c) { c.batch = 2; c.heads_q = 6; c.heads_kv = 2; c.seqlen_q = 200; c.seqlen_k = 1000; c.cluster = "on"; c.long_tiles = "on"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 4; c.seqlen_q = c.seqlen_k = 600; c.causal = true; c.input_scale = 10; c.long_tiles = "on"; });
      // d64's tile shapes for masked calls: below 2048 keys the short one (two warpgroups) takes them
      // by the rule (the causal and window cases above), so the default one (three warpgroups) is
      // forced here on short shapes, and the short one on a long causal call.
      if (d == 64) {
        add([](Case& c) { c.seqlen_q = c.seqlen_k = 1023; c.causal = true; c.input_scale = 10; c.short_tiles = "off"; });
        add([](Case& c) { c.seqlen_q = c.seqlen_k = 500; c.window_left = 64; c.window_right = 16; c.short_tiles = "off"; });
        add([](Case& c) { c.batch = 2; c.heads_q = 8; c.heads_kv = 2; c.seqlen_q = 700; c.seqlen_k = 1100; c.causal = true; c.tile_order = "paired"; c.short_tiles = "off"; });
        add([](Case& c) { c.seqlen_q = c.seqlen_k = 3000; c.causal = true; c.input_scale = 10; c.short_tiles = "on"; });
      }
      // A left window edge with fully visible blocks between it and the diagonal, at input scale 10.
      add([](Case& c) { c.seqlen_q = c.seqlen_k = 2000; c.window_left = 700; c.window_right = 0; c.input_scale = 10; });
      // The tile order (tile_order.hpp) with small head groups, so these small shapes have many
      // groups: causal in balanced pairs with an odd block count per head (520 rows: 5 blocks of
      // 128, 3 of 192) and an odd group size (middle blocks of two heads share a unit, one alone);
      // a window with Sq < Sk and an even group size; the plain longest-first order, and the
      // launcher's own choice (pairs: 5 x 5 or 5 x 3 tiles per group cut the waves).
      add([](Case& c) { c.batch = 2; c.heads_q = 32; c.heads_kv = 8; c.seqlen_q = c.seqlen_k = 520; c.causal = true; c.heads_per_group = 5; c.tile_order = "paired"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 12; c.heads_kv = 4; c.seqlen_q = 520; c.seqlen_k = 700; c.window_left = 128; c.window_right = 0; c.heads_per_group = 4; c.tile_order = "paired"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 32; c.heads_kv = 8; c.seqlen_q = c.seqlen_k = 520; c.causal = true; c.heads_per_group = 5; c.tile_order = "longest"; });
      add([](Case& c) { c.batch = 2; c.heads_q = 32; c.heads_kv = 8; c.seqlen_q = c.seqlen_k = 520; c.causal = true; c.heads_per_group = 5; });
      // The stream-K tail (stream_k.hpp) of calls whose rows see every key, on a grid capped to a
      // few CTAs so small calls have a partial last wave: tiles split between two CTAs (the first
      // part's partial stored, then merged by the next CTA), whole tail tiles, key and query tails,
      // input scale 10 (maxima differ between the parts), softcap, several waves before the tail,
      // GQA; the cluster kernel (partials exchanged rank by rank) and d128's long tile shape; and
      // the same call with the tail off.
      add([](Case& c) { c.heads_q = 3; c.heads_kv = 3; c.seqlen_q = 300; c.seqlen_k = 1000; c.input_scale = 10; c.stream_k = "on"; c.grid = 5; });
      add([](Case& c) { c.batch = 2; c.heads_q = 6; c.heads_kv = 2; c.seqlen_q = 520; c.seqlen_k = 333; c.softcap = 30; c.stream_k = "on"; c.grid = 7; });
      add([](Case& c) { c.batch = 2; c.heads_q = 4; c.heads_kv = 4; c.seqlen_q = 512; c.seqlen_k = 700; c.input_scale = 10; c.cluster = "on"; c.stream_k = "on"; c.grid = 3; });
      add([](Case& c) { c.heads_q = 3; c.heads_kv = 1; c.seqlen_q = 500; c.seqlen_k = 777; c.long_tiles = "on"; c.stream_k = "on"; c.grid = 4; });
      add([](Case& c) { c.heads_q = 3; c.heads_kv = 3; c.seqlen_q = 300; c.seqlen_k = 1000; c.stream_k = "off"; c.grid = 5; });
      // The stale-max softmax (softmax.cuh, OnlineSoftmax steps 1-3) at input scale 1, where no block
      // after a row's first leaves step 1 by itself: keys with a gain move the running max in the
      // middle of the rows, by a power of two (step 2; gain 6: that key's scores ~ N(0, 6^2) nats,
      // mostly within 64 log2 units of the max) and past 64 log2 units (step 3, the scores
      // recomputed; gain 40), the larger jump after the smaller one in the order the kernels visit
      // blocks (last first), and at a row's first key. Every kernel kind: dense, causal, softcap
      // (which bounds the jumps), the long shape, the cluster kernel, varlen.
      const std::vector<std::pair<int, float>> gains = {{700, 6.0f}, {400, 40.0f}, {3, 40.0f}};
      add([&](Case& c) { c.seqlen_q = c.seqlen_k = 1000; c.key_gain = gains; });
      add([&](Case& c) { c.seqlen_q = c.seqlen_k = 1000; c.causal = true; c.key_gain = gains; });
      add([&](Case& c) { c.seqlen_q = 300; c.seqlen_k = 1000; c.softcap = 30; c.key_gain = gains; });
      add([&](Case& c) { c.seqlen_q = 500; c.seqlen_k = 1000; c.long_tiles = "on"; c.key_gain = gains; });
      add([&](Case& c) { c.seqlen_q = c.seqlen_k = 1000; c.causal = true; c.long_tiles = "on"; c.key_gain = gains; });
      add([&](Case& c) { c.heads_q = 4; c.seqlen_q = 768; c.seqlen_k = 1000; c.cluster = "on"; c.key_gain = gains; });
      add([&](Case& c) { c.varlen_q = {300, 700}; c.varlen_k = {900, 1000}; c.causal = true; c.key_gain = gains; });
      add_varlen_cases(cases, base);
      add_paged_cases(cases, base);
      add_alibi_cases(cases, base);
      // seqused_k without varlen: keys past it lie inside the tensor map (zeroed V tail).
      add([](Case& c) { c.batch = 3; c.seqlen_q = 150; c.seqlen_k = 300; c.seqused_k = {300, 129, 0}; c.causal = true; });
    }
  }
  Case big;  // a longer sequence: many KV blocks, several tiles per CTA
  big.head_dim = 128, big.seqlen_q = big.seqlen_k = 4097, big.heads_q = 4, big.heads_kv = 4, big.causal = true;
  cases.push_back(big);
  Case long_keys;  // Sk = 16k: the scheduler groups 3 heads per L2 group, so 4 heads leave a partial group
  long_keys.head_dim = 128, long_keys.heads_q = long_keys.heads_kv = 4, long_keys.seqlen_q = 130;
  long_keys.seqlen_k = 16384, long_keys.dtype = DType::kFloat16;
  cases.push_back(long_keys);
  Case long_keys_cluster;  // Sk = 8k with two query blocks of 192: the long tile shape on the cluster kernel
  long_keys_cluster.head_dim = 128, long_keys_cluster.heads_q = long_keys_cluster.heads_kv = 2;
  long_keys_cluster.seqlen_q = 384, long_keys_cluster.seqlen_k = 8192;
  cases.push_back(long_keys_cluster);
  Case long_keys_causal;  // causal, Sk = 8200 > Sq (bottom-right): the long tile shape's masked kernel
  long_keys_causal.head_dim = 128, long_keys_causal.heads_q = 4, long_keys_causal.heads_kv = 2;
  long_keys_causal.seqlen_q = 300, long_keys_causal.seqlen_k = 8200, long_keys_causal.causal = true;
  long_keys_causal.dtype = DType::kFloat16;
  cases.push_back(long_keys_causal);
  Case empty_keys;  // Sk = 0: every row sees nothing -> o = 0, lse = -inf
  empty_keys.seqlen_q = 70, empty_keys.seqlen_k = 0;
  cases.push_back(empty_keys);
  add_padded_cases(cases);
  return cases;
}

class Sm90Sweep : public ::testing::TestWithParam<Case> {};

TEST_P(Sm90Sweep, MatchesFp64ReferenceWithinTwiceNaiveError) {
  FC_REQUIRE_SM(90);
  SKIP_IF_NOT_IN_BUILD(GetParam().head_dim, GetParam().dv(), GetParam().dtype);
  run_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(All, Sm90Sweep, ::testing::ValuesIn(sweep()), [](const auto& info) {
  std::string n = info.param.name();
  for (char& ch : n) if (!std::isalnum((unsigned char)ch)) ch = '_';
  return n;
});

// Small varlen cases for compute-sanitizer (memcheck / racecheck): the zeroed V tail (producer
// warp's generic writes before the consumers' wgmma), the direct-store epilogue of partial
// warpgroup tiles next to TMA stores of full ones, and the chunked (d96) maps.
// The small causal varlen call of the sanitizer tests: lengths 0..150 around the tile sizes, seqused_k.
Case small_varlen_case(int dqk, int dv) {
  Case c;
  c.head_dim = dqk, c.head_dim_v = dv;
  c.dtype = dqk == 128 ? DType::kFloat16 : DType::kBFloat16;
  c.varlen_q = {5, 0, 64, 70};
  c.varlen_k = {33, 7, 64, 150};
  c.seqused_k = {20, 7, 64, 101};
  c.causal = true;
  return c;
}

// Runs the cases whose kernels this build holds (printing the others); skips when none is.
void run_cases_in_build(const std::vector<Case>& cases) {
  KernelsInBuild kernels;
  for (const Case& c : cases) {
    if (kernels.take(c.head_dim, c.dv(), c.dtype)) run_case(c);
  }
  SKIP_IF_NONE_RAN(kernels);
}

TEST(Sm90Sanitizer, SmallVarlenCases) {
  FC_REQUIRE_SM(90);
  std::vector<Case> cases;
  for (int d : {96, 128, 192}) cases.push_back(small_varlen_case(d, d == 192 ? 128 : d));
  run_cases_in_build(cases);
}

// Paged K/V for compute-sanitizer: pieces issued into one stage by the helper warps (more than 8
// boxes a block: d72 pages of 8-48, d128 row-group tiles pages of 8, chunked tiles pages of 16 with
// a gap) and by several lanes of the producer warp (d128 16-64, d72 64), the zeroed V tail of a
// paged block in both tile layouts, a padded head dim (72 -> 80).
TEST(Sm90Sanitizer, PagedCases) {
  FC_REQUIRE_SM(90);
  std::vector<Case> cases;
  for (int d : {72, 128}) {
    for (int page_size : {8, 16, 48, 64}) {
      for (int page_gap : {0, 8}) {
        if (page_gap > 0 && (d != 128 || page_size != 16)) continue;
        Case c = small_varlen_case(d, d);
        c.page_size = page_size, c.page_gap = page_gap;
        c.heads_q = 4, c.heads_kv = 2;
        cases.push_back(c);
      }
    }
  }
  run_cases_in_build(cases);
}

// The ALiBi kernels for compute-sanitizer: the per-warp slope slot (lane 0's write between two
// __syncwarp, every lane's reads), varlen and dense masked.
TEST(Sm90Sanitizer, AlibiCases) {
  FC_REQUIRE_SM(90);
  std::vector<Case> cases;
  for (int d : {64, 128}) {
    Case c = small_varlen_case(d, d);
    c.alibi = testing::AlibiLayout::kPerBatchHead;
    cases.push_back(c);
    Case dense;
    dense.head_dim = d, dense.dtype = c.dtype, dense.batch = 2, dense.seqlen_q = 200, dense.seqlen_k = 333;
    dense.causal = true, dense.alibi = testing::AlibiLayout::kPerHead;
    cases.push_back(dense);
  }
  run_cases_in_build(cases);
}

// The two-CTA cluster kernel for compute-sanitizer: multicast K/V copies into both CTAs' stages and
// stage releases across the cluster, with a key tail (TMA zero fill in both halves of a block).
TEST(Sm90Sanitizer, ClusterKernel) {
  FC_REQUIRE_SM(90);
  KernelsInBuild kernels;
  for (int d : {128, 256}) {
    Case c;
    c.head_dim = d;
    c.dtype = d == 128 ? DType::kFloat16 : DType::kBFloat16;
    c.heads_q = 4, c.heads_kv = 2;
    c.seqlen_q = 256, c.seqlen_k = 200;
    c.cluster = "on";  // below the length from which the launcher picks it by itself
    if (kernels.take(c.head_dim, c.dv(), c.dtype)) run_case(c);
  }
  SKIP_IF_NONE_RAN(kernels);
}

// The stream-K tail for compute-sanitizer: partials stored and merged across CTAs through global
// memory behind a flag (stream_k.cuh), one CTA per tile and the cluster kernel.
TEST(Sm90Sanitizer, StreamKTail) {
  FC_REQUIRE_SM(90);
  KernelsInBuild kernels;
  for (int d : {64, 128, 256}) {
    Case c;
    c.head_dim = d;
    c.dtype = d == 128 ? DType::kFloat16 : DType::kBFloat16;
    c.heads_q = 4, c.heads_kv = 2;
    c.seqlen_q = 384, c.seqlen_k = 500;
    c.stream_k = "on", c.grid = 5;
    if (kernels.take(c.head_dim, c.dv(), c.dtype)) run_case(c);
    if (d == 64) continue;
    c.cluster = "on", c.seqlen_q = 512, c.heads_q = 6;  // 12 pairs of query blocks on 5 clusters
    if (kernels.take(c.head_dim, c.dv(), c.dtype)) run_case(c);
  }
  SKIP_IF_NONE_RAN(kernels);
}

// Keys past seqused_k may hold anything, NaN included (docs/semantics.md): the path loads them
// (they lie inside the k/v tensor maps) but they never reach the output: their scores are masked
// to -inf and the producer zeroes their V rows, so P = 0 never meets a NaN.
TEST(Sm90Varlen, KeysPastSequsedKNeverReachTheOutputEvenAsNaN) {
  FC_REQUIRE_SM(90);
  KernelsInBuild kernels;
  for (int d : {96, 128}) {
    if (!kernels.take(d, d, DType::kBFloat16)) continue;
    testing::TestCase tc;
    tc.head_dim_qk = tc.head_dim_v = d;
    tc.dtype = DType::kBFloat16;
    tc.heads_q = 2, tc.heads_kv = 1;
    tc.varlen_q = {70, 5, 130};
    tc.varlen_k = {200, 64, 150};
    tc.seqused_k = {77, 1, 150};
    tc.batch = 3, tc.seed = 99u + uint64_t(d);
    testing::HostProblem host = testing::make_problem(tc);
    std::vector<double> ref_out, ref_lse;
    reference::cpu_reference_forward_f64(host.params, &ref_out, &ref_lse);
    const testing::ErrorStats naive = testing::compare(testing::naive_same_dtype_reference(host.params), ref_out);
    const AttentionParams& p = host.params;
    uint16_t* k = reinterpret_cast<uint16_t*>(host.k.data());
    uint16_t* v = reinterpret_cast<uint16_t*>(host.v.data());
    for (int b = 0; b < p.batch; ++b) {
      for (int64_t token = host.cu_seqlens_k[b] + host.seqused_k[b]; token < host.cu_seqlens_k[b + 1]; ++token) {
        for (int h = 0; h < p.heads_kv; ++h) {
          for (int e = 0; e < d; ++e) {
            k[token * p.k_seq_stride + h * p.k_head_stride + e] = 0xFFFF;  // NaN in fp16 and bf16
            v[token * p.v_seq_stride + h * p.v_head_stride + e] = 0xFFFF;
          }
        }
      }
    }
    testing::DeviceProblem device(host);
    const Status st = device.run(KernelPath::kSm90);
    ASSERT_TRUE(st.ok()) << st.message;
    std::vector<uint8_t> o;
    std::vector<float> lse;
    device.download(&o, &lse);
    const testing::ErrorStats err = testing::compare(testing::read_output(host, o.data()), ref_out);
    EXPECT_TRUE(testing::within(err, testing::tolerance_from_naive(naive, testing::default_rel_floor(tc.dtype))))
        << "d" << d << ": " << err.describe();
  }
  SKIP_IF_NONE_RAN(kernels);
}

// supports() names precisely what the sm90 path does not compute, so dispatch falls back.
TEST(Sm90Supports, RejectsWhatItDoesNotComputeWithAReason) {
  FC_REQUIRE_SM(90);
  if (testing::gpu_compute_capability() != 90) GTEST_SKIP() << "sm90 path needs exactly sm_90";
  SKIP_IF_NOT_IN_BUILD(128, 128, DType::kBFloat16);
  void* buf = nullptr;
  ASSERT_EQ(cudaMalloc(&buf, 1 << 20), cudaSuccess);
  AttentionParams p;
  p.batch = 1, p.seqlen_q = p.seqlen_k = 64, p.heads_q = p.heads_kv = 1, p.head_dim_qk = p.head_dim_v = 128;
  p.dtype = DType::kBFloat16, p.q = p.k = p.v = p.o = buf;
  set_dense_strides(p);
  EXPECT_TRUE(supports(p, KernelPath::kSm90).supported) << supports(p, KernelPath::kSm90).reason;

  auto reason = [&](AttentionParams q) { return supports(q, KernelPath::kSm90).reason; };
  AttentionParams x = p;
  x.dtype = DType::kFloat32;
  EXPECT_NE(reason(x).find("dtype fp32"), std::string::npos) << reason(x);
  x = p, x.head_dim_qk = x.head_dim_v = 100, set_dense_strides(x);  // not a multiple of 8: no padding
  EXPECT_NE(reason(x).find("head dims 100/100"), std::string::npos) << reason(x);
  x = p, x.alibi_slopes = static_cast<const float*>(buf);  // ALiBi runs here (head dims up to 256)
  EXPECT_TRUE(supports(x, KernelPath::kSm90).supported) << reason(x);
  x = p, x.k_seq_stride = 132;  // 264 bytes: not a multiple of 16
  EXPECT_NE(reason(x).find("k_seq_stride"), std::string::npos) << reason(x);
  x = p, x.o_seq_stride = 130;  // O leaves through TMA stores: the same 16-byte rule
  EXPECT_NE(reason(x).find("o_seq_stride"), std::string::npos) << reason(x);
  x = p, x.q = static_cast<char*>(buf) + 8;
  EXPECT_NE(reason(x).find("16-byte aligned"), std::string::npos) << reason(x);
  // Varlen and seqused_k run on this path.
  int32_t* cu = static_cast<int32_t*>(buf);
  x = p, x.cu_seqlens_q = cu, x.cu_seqlens_k = cu, x.seqused_k = cu, x.total_q = x.total_k = 64;
  EXPECT_TRUE(supports(x, KernelPath::kSm90).supported) << reason(x);
  cudaFree(buf);
}

// A negative softmax_scale (allowed by validate()) is not the sm90 path's (supports() above): the
// dispatcher must take a path that computes it, with masked keys (causal, key tail) that would
// otherwise weigh exp2(+inf).
TEST(Sm90Dispatch, NegativeSoftmaxScaleMatchesTheReference) {
  FC_REQUIRE_SM(90);
  SKIP_IF_NOT_IN_BUILD(128, 128, DType::kFloat16);
  testing::TestCase tc;
  tc.batch = 2, tc.seqlen_q = 200, tc.seqlen_k = 333, tc.heads_q = 4, tc.heads_kv = 2;
  tc.head_dim_qk = tc.head_dim_v = 128, tc.dtype = DType::kFloat16, tc.causal = true;
  tc.softmax_scale = -0.2f, tc.input_scale = 3.0f, tc.seed = 77;
  FC_EXPECT_PATH_MATCHES_REFERENCE(tc, KernelPath::kAuto);
}

// The same table without a device (runs everywhere the sm90 path is built): varlen, seqused_k,
// d96 and 192/128 are accepted (when this build holds them); the packed token axis is what the
// stride rules apply to.
TEST(Sm90Supports, VarlenAndHeadDims96And192x128WithoutADevice) {
  const detail::PathOps sm90 = detail::sm90_path();
  detail::DeviceInfo info = hopper_device_info();
  AttentionParams p;
  p.batch = 3, p.seqlen_q = p.seqlen_k = 100, p.heads_q = 4, p.heads_kv = 2;
  p.head_dim_qk = p.head_dim_v = 128, p.dtype = DType::kBFloat16;
  alignas(16) static int32_t cu[4] = {0, 10, 50, 100};
  p.q = p.k = p.v = p.o = reinterpret_cast<void*>(uintptr_t(1) << 20);
  p.cu_seqlens_q = p.cu_seqlens_k = cu;
  p.total_q = p.total_k = 100;
  set_dense_strides(p);
  const std::string why = sm90.supports(p, info);
  if (why.find("this build") != std::string::npos) GTEST_SKIP() << "not in this build: " << why;
  EXPECT_EQ(why, "");
  AttentionParams x = p;
  x.seqused_k = cu;
  EXPECT_EQ(sm90.supports(x, info), "");
  x = p, x.batch = 1, x.cu_seqlens_q = x.cu_seqlens_k = nullptr, x.seqused_k = cu;  // dense + seqused_k
  EXPECT_EQ(sm90.supports(x, info), "");
  x = p, x.q_seq_stride = 4;  // the packed token stride: 8 bytes
  EXPECT_NE(sm90.supports(x, info).find("q_seq_stride"), std::string::npos) << sm90.supports(x, info);
  x = p, x.softmax_scale = -0.2f;  // a block's max is taken over the unscaled dots: positive scales only
  EXPECT_NE(sm90.supports(x, info).find("softmax_scale"), std::string::npos) << sm90.supports(x, info);
  for (auto [dqk, dv] : {std::pair{96, 96}, std::pair{192, 128}}) {
    x = p, x.head_dim_qk = dqk, x.head_dim_v = dv, set_dense_strides(x);
    const std::string r = sm90.supports(x, info);
    EXPECT_TRUE(r.empty() || r.find("not in this build") != std::string::npos) << dqk << "/" << dv << ": " << r;
  }
  // Paged K/V (pages of a multiple of 8 rows, head dims up to 256); kv_batch_idx / leftpad_k are
  // the decode path's.
  alignas(16) static int32_t table[3 * 4] = {};
  x = p, x.cu_seqlens_k = nullptr, x.total_k = 0, x.block_table = table, x.block_table_batch_stride = 4;
  x.pages_per_seq = 4, x.page_size = 32, x.num_pages = 12, x.seqlen_k = 128;
  x.k_batch_stride = x.v_batch_stride = int64_t(x.page_size) * x.k_seq_stride;
  const AttentionParams paged = x;
  EXPECT_EQ(sm90.supports(x, info), "");
  x = paged, x.page_size = 12, x.k_batch_stride = x.v_batch_stride = 12 * x.k_seq_stride;
  EXPECT_NE(sm90.supports(x, info).find("page_size 12"), std::string::npos) << sm90.supports(x, info);
  x = paged, x.k_batch_stride = 4 * x.k_seq_stride + 4;  // the page stride is a TMA stride too
  EXPECT_NE(sm90.supports(x, info).find("k_batch_stride"), std::string::npos) << sm90.supports(x, info);
  x = paged, x.head_dim_qk = x.head_dim_v = 512;
  EXPECT_NE(sm90.supports(x, info).find("paged K/V with head dims above 256"), std::string::npos)
      << sm90.supports(x, info);
  x = p, x.cu_seqlens_q = x.cu_seqlens_k = nullptr, x.leftpad_k = cu;
  EXPECT_NE(sm90.supports(x, info).find("leftpad_k"), std::string::npos) << sm90.supports(x, info);
  x = p, x.head_dim_qk = 260, x.head_dim_v = 260, set_dense_strides(x);  // not a multiple of 8: no tile covers it
  EXPECT_NE(sm90.supports(x, info).find("head dims 260/260"), std::string::npos) << sm90.supports(x, info);
  x = p, x.head_dim_qk = 264, x.head_dim_v = 264, set_dense_strides(x);  // the wide kernels' 384 tile, padded
  const std::string wide = sm90.supports(x, info);
  EXPECT_TRUE(wide.empty() || wide.find("this build") != std::string::npos) << wide;
  x = p, x.head_dim_qk = 192, x.head_dim_v = 192, set_dense_strides(x);  // padded to 256/256
  const std::string padded = sm90.supports(x, info);
  EXPECT_TRUE(padded.empty() || padded.find("not in this build") != std::string::npos) << padded;
  info.max_smem_per_block_optin = 100 * 1024;
  EXPECT_NE(sm90.supports(p, info).find("shared memory"), std::string::npos) << sm90.supports(p, info);
}

}  // namespace
}  // namespace flashcore
