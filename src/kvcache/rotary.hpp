// attention_with_kvcache, the per-element rules shared by the host implementation (kvcache.cpp) and
// the kernels (append.cu), so both sides write the same cache rows and the same rotated values, bit
// for bit: which cache row a new key goes to, whether it is written (the clamping policy), each
// row's rotary position, and the rotation itself (fp32, no fused multiply-add, rounded once).
// Cache rows are addressed only through attn::kv_row_offset (attention/mask.hpp).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::kvcache {

// Rows of entry b's cache before the call: cache_seqlens[b], or the whole cache when it is null.
FC_HOST_DEVICE int64_t cached_rows(const KvCacheParams& p, int b) {
  return p.cache_seqlens != nullptr ? int64_t(p.cache_seqlens[b]) : int64_t(p.attention.seqlen_k);
}

// Keys entry b attends to after the append (the inner call's seqused_k[b]): cached_rows + seqlen_new,
// clamped into [0, seqlen_k] so that unchecked metadata never points the attention outside the cache.
FC_HOST_DEVICE int32_t keys_after_append(const KvCacheParams& p, int b) {
  const int64_t n = cached_rows(p, b) + p.seqlen_new;
  return int32_t(n < 0 ? 0 : n > p.attention.seqlen_k ? p.attention.seqlen_k : n);
}

// Whether new key i of an entry lands in cache row `row` = cached_rows + i. Rows outside the cache,
// and (rotary on) rows whose position has no cos/sin row, are skipped: validation rejects them where
// it can read cache_seqlens; where it cannot, this is the documented clamp.
FC_HOST_DEVICE bool new_key_written(const KvCacheParams& p, int64_t row) {
  if (row < 0 || row >= p.attention.seqlen_k) return false;
  return p.rotary_cos == nullptr || row < p.rotary_len;
}

// Whether query i takes position cached_rows + i (causal or windowed calls, flash-attn's rule) rather
// than cached_rows for every i.
FC_HOST_DEVICE bool queries_advance(const AttentionParams& a) {
  return a.causal || a.window_left != kWindowInfinite || a.window_right != kWindowInfinite;
}

// The rotary position (cos/sin row) of query i of entry b, clamped into [0, rotary_len) (the clamp
// acts only on unchecked metadata).
FC_HOST_DEVICE int64_t query_position(const KvCacheParams& p, int b, int i) {
  const int64_t pos = cached_rows(p, b) + (queries_advance(p.attention) ? i : 0);
  return pos < 0 ? 0 : pos >= p.rotary_len ? p.rotary_len - 1 : pos;
}

// Feature d (< rotary_dim) of a rotated row belongs to the pair (x0, x1) with angle index m:
// interleaved (GPT-J): x0 = x[2m], x1 = x[2m + 1]; otherwise (GPT-NeoX): x0 = x[m], x1 = x[m + rotary_dim/2].
struct RotaryPair {
  int m = 0;         // cos/sin column
  int partner = 0;   // the other feature of the pair
  bool first = true; // d is x0
};

FC_HOST_DEVICE RotaryPair rotary_pair(int d, int rotary_dim, bool interleaved) {
  RotaryPair r;
  const int half = rotary_dim / 2;
  if (interleaved) {
    r.m = d / 2;
    r.first = (d % 2) == 0;
    r.partner = d ^ 1;
  } else {
    r.first = d < half;
    r.m = r.first ? d : d - half;
    r.partner = r.first ? d + half : d - half;
  }
  return r;
}

// (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos), the component of `self` (x0 when first). Plain fp32
// products and sums, never contracted into an FMA, so the host and the device round identically.
FC_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
FC_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

FC_HOST_DEVICE float rotate(float self, float partner, float cos_m, float sin_m, bool first) {
  return first ? add_rn(mul_rn(self, cos_m), -mul_rn(partner, sin_m))
               : add_rn(mul_rn(partner, sin_m), mul_rn(self, cos_m));
}

}  // namespace flashcore::kvcache
