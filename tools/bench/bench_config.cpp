#include "bench_config.hpp"

#include <algorithm>
#include <cstdio>

#include "attention/mask.hpp"

namespace flashcore::bench {

std::string BenchConfig::label() const {
  char paged[48] = "";
  if (is_paged()) std::snprintf(paged, sizeof(paged), " paged%d%s", page_size, pages_in_order ? "-in-order" : "");
  char buf[320];
  std::snprintf(buf, sizeof(buf), "%s B=%d Sq=%d Sk=%d Hq=%d Hkv=%d D=%d/%d %s%s%s%s", family.c_str(), batch,
                seqlen_q, seqlen_k, heads_q, heads_kv, head_dim_qk, head_dim_v, dtype_name(dtype),
                causal ? (align == MaskAlign::kBottomRight ? " causal" : " causal-tl") : "",
                is_varlen() ? " varlen" : "", paged);
  return buf;
}

namespace {

// Visible (i, j) pairs of one sequence under the config's mask.
double visible_pairs(const BenchConfig& c, int sq, int sk) {
  const bool full = !c.causal && c.window_left < 0 && c.window_right < 0;
  if (full) return double(sq) * sk;
  if (c.causal && c.window_left < 0 && sq == sk) return 0.5 * double(sq) * sk;  // protocol: halved
  AttentionParams p;
  p.causal = c.causal;
  p.mask_align = c.align;
  p.window_left = c.window_left;
  p.window_right = c.window_right;
  const attn::VisibilityMask mask = attn::make_mask(p, sq, sk);
  double pairs = 0;
  for (int i = 0; i < sq; ++i) pairs += std::max(0, mask.last_key(i) - mask.first_key(i) + 1);
  return pairs;
}

}  // namespace

double forward_flops(const BenchConfig& c) {
  double pairs = 0;
  if (c.is_varlen()) {
    for (size_t b = 0; b < c.varlen_q.size(); ++b) {
      const int sk = c.varlen_k.empty() ? c.varlen_q[b] : c.varlen_k[b];
      pairs += visible_pairs(c, c.varlen_q[b], sk);
    }
  } else {
    pairs = c.batch * visible_pairs(c, c.seqlen_q, c.seqlen_k);
  }
  return 2.0 * pairs * c.heads_q * (c.head_dim_qk + c.head_dim_v);
}

double forward_min_bytes(const BenchConfig& c) {
  double tq = 0, tk = 0;
  if (c.is_varlen()) {
    for (size_t b = 0; b < c.varlen_q.size(); ++b) {
      tq += c.varlen_q[b];
      tk += c.varlen_k.empty() ? c.varlen_q[b] : c.varlen_k[b];
    }
  } else {
    tq = double(c.batch) * c.seqlen_q;
    tk = double(c.batch) * c.seqlen_k;
  }
  const double es = dtype_size(c.dtype);
  return es * (tq * c.heads_q * (c.head_dim_qk + c.head_dim_v) + tk * c.heads_kv * (c.head_dim_qk + c.head_dim_v)) +
         4.0 * tq * c.heads_q;
}

std::vector<BenchConfig> standard_suite() {
  std::vector<BenchConfig> suite;
  // 1. B=4, H=32, D=128, S in 1k..16k, causal and not, fp16 and bf16.
  for (DType dt : {DType::kFloat16, DType::kBFloat16})
    for (bool causal : {false, true})
      for (int s : {1024, 2048, 4096, 8192, 16384}) {
        BenchConfig c;
        c.family = std::string("d128-") + dtype_name(dt) + (causal ? "-causal" : "");
        c.seqlen_q = c.seqlen_k = s;
        c.dtype = dt;
        c.causal = causal;
        suite.push_back(c);
      }
  // 2. B*S = 16k tokens, H*D = 2048, D in {64, 256} (128 is family 1), causal and not.
  for (int d : {64, 256})
    for (bool causal : {false, true})
      for (int s : {1024, 2048, 4096, 8192, 16384}) {
        BenchConfig c;
        c.family = "d" + std::to_string(d) + "-fp16" + (causal ? "-causal" : "");
        c.batch = 16384 / s;
        c.seqlen_q = c.seqlen_k = s;
        c.heads_q = c.heads_kv = 2048 / d;
        c.head_dim_qk = c.head_dim_v = d;
        c.causal = causal;
        suite.push_back(c);
      }
  // 3. D=512, B=1, H=48, S in {8k, 16k}.
  for (int s : {8192, 16384}) {
    BenchConfig c;
    c.family = "d512-fp16";
    c.batch = 1;
    c.heads_q = c.heads_kv = 48;
    c.seqlen_q = c.seqlen_k = s;
    c.head_dim_qk = c.head_dim_v = 512;
    suite.push_back(c);
  }
  // 4. Dqk/Dv = 192/128, causal.
  for (int s : {2048, 8192}) {
    BenchConfig c;
    c.family = "d192x128-bf16-causal";
    c.batch = 16384 / s;
    c.heads_q = c.heads_kv = 16;
    c.seqlen_q = c.seqlen_k = s;
    c.head_dim_qk = 192;
    c.head_dim_v = 128;
    c.dtype = DType::kBFloat16;
    c.causal = true;
    suite.push_back(c);
  }
  // 5. GQA Hq/Hkv = 32/8.
  for (bool causal : {false, true})
    for (int s : {2048, 8192}) {
      BenchConfig c;
      c.family = std::string("gqa32x8-bf16") + (causal ? "-causal" : "");
      c.batch = 16384 / s;
      c.heads_q = 32;
      c.heads_kv = 8;
      c.seqlen_q = c.seqlen_k = s;
      c.dtype = DType::kBFloat16;
      c.causal = causal;
      suite.push_back(c);
    }
  // 6. A varlen batch: mixed lengths, 16k tokens in all.
  {
    BenchConfig c;
    c.family = "varlen-bf16-causal";
    c.varlen_q = {4096, 512, 2048, 1000, 3000, 777, 4049, 1000};
    c.batch = int(c.varlen_q.size());
    c.seqlen_q = c.seqlen_k = 4096;
    c.dtype = DType::kBFloat16;
    c.causal = true;
    suite.push_back(c);
  }
  return suite;
}

std::vector<BenchConfig> quick_suite() {
  std::vector<BenchConfig> suite;
  for (bool causal : {false, true})
    for (int s : {1024, 4096}) {
      BenchConfig c;
      c.family = std::string("d128-fp16") + (causal ? "-causal" : "");
      c.seqlen_q = c.seqlen_k = s;
      c.causal = causal;
      suite.push_back(c);
    }
  return suite;
}

}  // namespace flashcore::bench
