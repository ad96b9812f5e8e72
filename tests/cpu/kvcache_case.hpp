// One attention_with_kvcache problem for the KV-cache tests (tests/cpu/test_kvcache.cpp,
// tests/gpu/test_kvcache.cpp), and its expected results computed independently of the library:
//   - the cache is stored dense, batch-indexed (a shuffled row of a larger cache per entry) or paged
//     (a shuffled page pool with spare pages); the test addresses it with its own index arithmetic;
//   - the expected cache: a copy of the stored one with the new rows written by hand (k_new rotated
//     in fp32 by the documented formula, no FMA, rounded once to the dtype; v_new copied);
//   - the expected output: per entry, attention_forward on the CPU reference over a dense slice of the
//     expected cache (rows [leftpad, cache_seqlens + seqlen_new)) and the hand-rotated q.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "common/dtype.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore::testing::kv {

enum class CacheLayout { kDense, kBatchIndexed, kPaged };

struct KvCase {
  int batch = 2;
  int heads_q = 2, heads_kv = 1;
  int head_dim_qk = 64, head_dim_v = 64;
  int seqlen_q = 1;
  int seqlen_new = 1;                // 0: no k_new / v_new
  int capacity = 40;                 // seqlen_k (paged: rounded up to whole pages)
  std::vector<int> cache_seqlens;    // [batch] before the call; empty: null (the whole cache)
  DType dtype = DType::kFloat16;
  CacheLayout layout = CacheLayout::kDense;
  int page_size = 16;
  std::vector<int> leftpad;          // optional [batch]
  bool causal = false;
  int window_left = kWindowInfinite;
  int rotary_dim = 0;                // 0: rotary off
  bool interleaved = false;
  uint64_t seed = 1;

  std::string describe() const {
    std::ostringstream os;
    os << "B=" << batch << " Hq=" << heads_q << " Hkv=" << heads_kv << " D=" << head_dim_qk << "/" << head_dim_v
       << " Sq=" << seqlen_q << " Snew=" << seqlen_new << " cap=" << capacity << " " << dtype_name(dtype)
       << (layout == CacheLayout::kDense ? " dense" : layout == CacheLayout::kBatchIndexed ? " batch-indexed" : " paged")
       << (layout == CacheLayout::kPaged ? " page=" + std::to_string(page_size) : "") << (causal ? " causal" : "")
       << (window_left >= 0 ? " window_left=" + std::to_string(window_left) : "")
       << (rotary_dim > 0 ? " rotary_dim=" + std::to_string(rotary_dim) + (interleaved ? " interleaved" : " neox") : "")
       << (leftpad.empty() ? "" : " leftpad") << " seed=" << seed;
    return os.str();
  }
};

// Host tensors; params point into them (a Fixture is never copied or moved after make_fixture fills it).
struct Fixture {
  KvCase c;
  int elem = 2;
  int kv_rows = 0;           // batch rows of the stored dense cache (batch-indexed: batch + 2)
  int pages_per_seq = 0, num_pages = 0, table_stride = 0;
  std::vector<uint8_t> q, k_store, v_store, k_new, v_new, cos, sin, o;
  std::vector<float> lse;
  std::vector<int32_t> cache_seqlens, block_table, kv_batch_idx, leftpad;
  KvCacheParams params;

  Fixture() = default;
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  int rotary_len() const { return c.capacity + 3; }
  int64_t cached(int b) const { return c.cache_seqlens.empty() ? c.capacity : c.cache_seqlens[size_t(b)]; }
  int64_t end(int b) const { return cached(b) + c.seqlen_new; }
  int64_t pad(int b) const { return c.leftpad.empty() ? 0 : c.leftpad[size_t(b)]; }

  // Element offset of (entry b, cache row, head h) in the stored cache of head dim `dim`: the test's
  // own arithmetic, not the library's.
  int64_t stored_offset(int b, int64_t row, int h, int dim) const {
    int64_t slot_row = 0;
    switch (c.layout) {
      case CacheLayout::kDense: slot_row = int64_t(b) * c.capacity + row; break;
      case CacheLayout::kBatchIndexed: slot_row = int64_t(kv_batch_idx[size_t(b)]) * c.capacity + row; break;
      case CacheLayout::kPaged: {
        const int64_t page = block_table[size_t(int64_t(b) * table_stride + row / c.page_size)];
        slot_row = page * c.page_size + row % c.page_size;
        break;
      }
    }
    return (slot_row * c.heads_kv + h) * dim;
  }
};

inline void fill_normal(std::vector<uint8_t>& bytes, int64_t count, DType dtype, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  bytes.assign(size_t(count * dtype_size(dtype)), 0);
  for (int64_t i = 0; i < count; ++i) store_from_float(bytes.data(), i, normal(rng), dtype);
}

// Fills f (which must stay where it is: params points into it).
inline void make_fixture(const KvCase& kc, Fixture& f) {
  f.c = kc;
  KvCase& c = f.c;
  std::mt19937_64 rng(c.seed);
  f.elem = dtype_size(c.dtype);
  if (c.layout == CacheLayout::kPaged) {
    f.pages_per_seq = (c.capacity + c.page_size - 1) / c.page_size;
    c.capacity = f.pages_per_seq * c.page_size;
    f.num_pages = c.batch * f.pages_per_seq + 3;  // spare pages that no entry owns
    f.table_stride = f.pages_per_seq + 1;         // one unused column per row
    std::vector<int32_t> perm(size_t(f.num_pages));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    f.block_table.assign(size_t(c.batch * f.table_stride), 12345);  // the unused column: far outside the pool
    for (int b = 0; b < c.batch; ++b) {
      for (int s = 0; s < f.pages_per_seq; ++s) f.block_table[size_t(b * f.table_stride + s)] = perm[size_t(b * f.pages_per_seq + s)];
    }
  }
  f.kv_rows = c.layout == CacheLayout::kPaged ? 0 : c.layout == CacheLayout::kBatchIndexed ? c.batch + 2 : c.batch;
  if (c.layout == CacheLayout::kBatchIndexed) {
    std::vector<int32_t> rows(size_t(f.kv_rows));
    std::iota(rows.begin(), rows.end(), 0);
    std::shuffle(rows.begin(), rows.end(), rng);
    f.kv_batch_idx.assign(rows.begin(), rows.begin() + c.batch);
  }
  const int64_t slot_rows = c.layout == CacheLayout::kPaged ? int64_t(f.num_pages) * c.page_size
                                                            : int64_t(f.kv_rows) * c.capacity;
  fill_normal(f.q, int64_t(c.batch) * c.seqlen_q * c.heads_q * c.head_dim_qk, c.dtype, rng);
  fill_normal(f.k_store, slot_rows * c.heads_kv * c.head_dim_qk, c.dtype, rng);
  fill_normal(f.v_store, slot_rows * c.heads_kv * c.head_dim_v, c.dtype, rng);
  fill_normal(f.k_new, int64_t(c.batch) * c.seqlen_new * c.heads_kv * c.head_dim_qk, c.dtype, rng);
  fill_normal(f.v_new, int64_t(c.batch) * c.seqlen_new * c.heads_kv * c.head_dim_v, c.dtype, rng);
  if (c.rotary_dim > 0) {
    const int half = c.rotary_dim / 2;
    f.cos.assign(size_t(f.rotary_len()) * half * f.elem, 0);
    f.sin.assign(size_t(f.rotary_len()) * half * f.elem, 0);
    for (int pos = 0; pos < f.rotary_len(); ++pos) {
      for (int m = 0; m < half; ++m) {
        const double angle = pos * std::pow(10000.0, -2.0 * m / c.rotary_dim);
        store_from_float(f.cos.data(), int64_t(pos) * half + m, float(std::cos(angle)), c.dtype);
        store_from_float(f.sin.data(), int64_t(pos) * half + m, float(std::sin(angle)), c.dtype);
      }
    }
  }
  f.o.assign(size_t(int64_t(c.batch) * c.seqlen_q * c.heads_q * c.head_dim_v * f.elem), 0xFF);
  f.lse.assign(size_t(int64_t(c.batch) * c.heads_q * c.seqlen_q), NAN);
  f.cache_seqlens.assign(c.cache_seqlens.begin(), c.cache_seqlens.end());
  f.leftpad.assign(c.leftpad.begin(), c.leftpad.end());

  KvCacheParams& p = f.params;
  p = KvCacheParams{};
  AttentionParams& a = p.attention;
  a.q = f.q.data();
  a.k = f.k_store.data();
  a.v = f.v_store.data();
  a.o = f.o.data();
  a.lse = f.lse.data();
  a.batch = c.batch;
  a.seqlen_q = c.seqlen_q;
  a.seqlen_k = c.capacity;
  a.heads_q = c.heads_q;
  a.heads_kv = c.heads_kv;
  a.head_dim_qk = c.head_dim_qk;
  a.head_dim_v = c.head_dim_v;
  a.dtype = c.dtype;
  a.causal = c.causal;
  a.window_left = c.window_left;
  set_dense_strides(a);  // q, o, lse; the cache strides below
  const int64_t row_k = int64_t(c.heads_kv) * c.head_dim_qk, row_v = int64_t(c.heads_kv) * c.head_dim_v;
  const int64_t rows_per_slot = c.layout == CacheLayout::kPaged ? c.page_size : c.capacity;
  a.k_seq_stride = row_k, a.k_head_stride = c.head_dim_qk, a.k_batch_stride = rows_per_slot * row_k;
  a.v_seq_stride = row_v, a.v_head_stride = c.head_dim_v, a.v_batch_stride = rows_per_slot * row_v;
  if (c.layout == CacheLayout::kPaged) {
    a.block_table = f.block_table.data();
    a.block_table_batch_stride = f.table_stride;
    a.pages_per_seq = f.pages_per_seq;
    a.page_size = c.page_size;
    a.num_pages = f.num_pages;
  }
  if (c.layout == CacheLayout::kBatchIndexed) {
    a.kv_batch_idx = f.kv_batch_idx.data();
    a.kv_batch = f.kv_rows;
  }
  if (!f.leftpad.empty()) a.leftpad_k = f.leftpad.data();
  a.path = KernelPath::kAuto;
  p.cache_seqlens = f.cache_seqlens.empty() ? nullptr : f.cache_seqlens.data();
  if (c.seqlen_new > 0) {
    p.k_new = f.k_new.data();
    p.v_new = f.v_new.data();
    p.seqlen_new = c.seqlen_new;
    p.k_new_head_stride = c.head_dim_qk, p.k_new_seq_stride = row_k, p.k_new_batch_stride = c.seqlen_new * row_k;
    p.v_new_head_stride = c.head_dim_v, p.v_new_seq_stride = row_v, p.v_new_batch_stride = c.seqlen_new * row_v;
  }
  if (c.rotary_dim > 0) {
    p.rotary_cos = f.cos.data();
    p.rotary_sin = f.sin.data();
    p.rotary_dim = c.rotary_dim;
    p.rotary_len = f.rotary_len();
    p.rotary_interleaved = c.interleaved;
  }
}

// The documented rotation of one row (dim features at src, the call's dtype) by cos/sin row pos:
// fp32 products and sums (the host build contracts no FMA), rounded once to the dtype.
inline void rotate_row(const Fixture& f, const uint8_t* src, uint8_t* dst, int dim, int64_t pos) {
  const KvCase& c = f.c;
  std::memcpy(dst, src, size_t(dim) * f.elem);
  const int half = c.rotary_dim / 2;
  for (int m = 0; m < half; ++m) {
    const int i0 = c.interleaved ? 2 * m : m;
    const int i1 = c.interleaved ? 2 * m + 1 : m + half;
    const float x0 = load_as_float(src, i0, c.dtype), x1 = load_as_float(src, i1, c.dtype);
    const float cs = load_as_float(f.cos.data(), pos * half + m, c.dtype);
    const float sn = load_as_float(f.sin.data(), pos * half + m, c.dtype);
    const float p0 = x0 * cs, p1 = x1 * sn, p2 = x0 * sn, p3 = x1 * cs;
    store_from_float(dst, i0, p0 - p1, c.dtype);
    store_from_float(dst, i1, p2 + p3, c.dtype);
  }
}

// The stored caches after the append, by hand.
inline void expected_caches(const Fixture& f, std::vector<uint8_t>* k, std::vector<uint8_t>* v) {
  const KvCase& c = f.c;
  *k = f.k_store;
  *v = f.v_store;
  for (int b = 0; b < c.batch; ++b) {
    for (int i = 0; i < c.seqlen_new; ++i) {
      const int64_t row = f.cached(b) + i;
      for (int h = 0; h < c.heads_kv; ++h) {
        const int64_t src_k = ((int64_t(b) * c.seqlen_new + i) * c.heads_kv + h) * c.head_dim_qk;
        const int64_t src_v = ((int64_t(b) * c.seqlen_new + i) * c.heads_kv + h) * c.head_dim_v;
        uint8_t* dk = k->data() + f.stored_offset(b, row, h, c.head_dim_qk) * f.elem;
        const uint8_t* sk = f.k_new.data() + src_k * f.elem;
        if (c.rotary_dim > 0) {
          rotate_row(f, sk, dk, c.head_dim_qk, row);
        } else {
          std::memcpy(dk, sk, size_t(c.head_dim_qk) * f.elem);
        }
        std::memcpy(v->data() + f.stored_offset(b, row, h, c.head_dim_v) * f.elem, f.v_new.data() + src_v * f.elem,
                    size_t(c.head_dim_v) * f.elem);
      }
    }
  }
}

// Expected o [B, Sq, Hq, Dv] and lse [B, Hq, Sq] as doubles: per entry, the CPU reference over a
// dense slice of the expected caches and the hand-rotated q.
inline Status expected_attention(const Fixture& f, std::vector<double>* o, std::vector<double>* lse) {
  const KvCase& c = f.c;
  std::vector<uint8_t> k_all, v_all;
  expected_caches(f, &k_all, &v_all);
  const bool advance = c.causal || c.window_left >= 0;
  o->assign(size_t(int64_t(c.batch) * c.seqlen_q * c.heads_q * c.head_dim_v), 0.0);
  lse->assign(size_t(int64_t(c.batch) * c.heads_q * c.seqlen_q), 0.0);
  for (int b = 0; b < c.batch; ++b) {
    const int64_t first = f.pad(b), keys = f.end(b) - f.pad(b);
    std::vector<uint8_t> q(size_t(int64_t(c.seqlen_q) * c.heads_q * c.head_dim_qk * f.elem));
    std::memcpy(q.data(), f.q.data() + int64_t(b) * q.size(), q.size());
    if (c.rotary_dim > 0) {
      for (int i = 0; i < c.seqlen_q; ++i) {
        for (int h = 0; h < c.heads_q; ++h) {
          uint8_t* row = q.data() + (int64_t(i) * c.heads_q + h) * c.head_dim_qk * f.elem;
          const std::vector<uint8_t> src(row, row + size_t(c.head_dim_qk) * f.elem);
          rotate_row(f, src.data(), row, c.head_dim_qk, f.cached(b) + (advance ? i : 0));
        }
      }
    }
    std::vector<uint8_t> k(size_t(std::max<int64_t>(keys, 1) * c.heads_kv * c.head_dim_qk * f.elem));
    std::vector<uint8_t> v(size_t(std::max<int64_t>(keys, 1) * c.heads_kv * c.head_dim_v * f.elem));
    for (int64_t j = 0; j < keys; ++j) {
      for (int h = 0; h < c.heads_kv; ++h) {
        std::memcpy(k.data() + (j * c.heads_kv + h) * c.head_dim_qk * f.elem,
                    k_all.data() + f.stored_offset(b, first + j, h, c.head_dim_qk) * f.elem,
                    size_t(c.head_dim_qk) * f.elem);
        std::memcpy(v.data() + (j * c.heads_kv + h) * c.head_dim_v * f.elem,
                    v_all.data() + f.stored_offset(b, first + j, h, c.head_dim_v) * f.elem,
                    size_t(c.head_dim_v) * f.elem);
      }
    }
    std::vector<uint8_t> out(size_t(int64_t(c.seqlen_q) * c.heads_q * c.head_dim_v * f.elem));
    std::vector<float> out_lse(size_t(int64_t(c.heads_q) * c.seqlen_q));
    AttentionParams a;
    a.q = q.data(), a.k = k.data(), a.v = v.data(), a.o = out.data(), a.lse = out_lse.data();
    a.batch = 1, a.seqlen_q = c.seqlen_q, a.seqlen_k = int(keys), a.heads_q = c.heads_q, a.heads_kv = c.heads_kv;
    a.head_dim_qk = c.head_dim_qk, a.head_dim_v = c.head_dim_v, a.dtype = c.dtype;
    a.causal = c.causal, a.window_left = c.window_left;
    a.path = KernelPath::kCpuReference;
    set_dense_strides(a);
    const Status st = attention_forward(a);
    if (!st.ok()) return st;
    const int64_t per_entry = int64_t(c.seqlen_q) * c.heads_q * c.head_dim_v;
    for (int64_t e = 0; e < per_entry; ++e) (*o)[size_t(b * per_entry + e)] = load_as_float(out.data(), e, c.dtype);
    for (size_t e = 0; e < out_lse.size(); ++e) (*lse)[size_t(b) * out_lse.size() + e] = out_lse[e];
  }
  return Status::Ok();
}

inline std::vector<double> to_doubles(const std::vector<uint8_t>& bytes, DType dtype) {
  std::vector<double> out(bytes.size() / size_t(dtype_size(dtype)));
  for (size_t i = 0; i < out.size(); ++i) out[i] = load_as_float(bytes.data(), int64_t(i), dtype);
  return out;
}

// max |got - ref| (NaN in got counts as infinite) and max |ref|.
struct MaxAbs {
  double error = 0, ref = 0;
};
inline MaxAbs max_abs_error(const std::vector<double>& got, const std::vector<double>& ref) {
  MaxAbs m;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i]) && got[i] == ref[i]) continue;  // empty rows: lse -inf on both sides
    const double d = std::fabs(got[i] - ref[i]);
    m.error = std::max(m.error, std::isnan(d) ? INFINITY : d);
    m.ref = std::max(m.ref, std::fabs(ref[i]));
  }
  return m;
}

// Bytes that differ between two buffers of equal size.
inline int64_t count_differences(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  int64_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

}  // namespace flashcore::testing::kv
