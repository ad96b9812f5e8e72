// validate(): every rule of the API (docs/validation.md lists them with their tests).
//
// One small function per rule family, called in a fixed order; each returns the first rule it finds
// broken as Status::InvalidArgument("<argument>: <rule> (got ...)"). validate() writes no user memory.
// Its only effects: cu_seqlens_q/k and seqused_k are read (host memory directly; device memory through
// copies on `stream` and one cudaStreamSynchronize, skipped while `stream` captures a graph).
//
// Order: enums -> sizes -> score function -> visibility -> ALiBi -> varlen shape, all of which hold for
// every call; then, only when the call has query rows (an empty call reads and writes nothing), the
// memory rules: pointers -> strides -> offsets fit int64 -> alignment -> o/lse overlap -> placement of
// the small arrays -> varlen contents.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "api/guard.hpp"
#include "api/memory.hpp"
#include "common/cuda_check.hpp"
#include "flashcore/flashcore.hpp"

namespace flashcore {
namespace {

constexpr int kMaxHeadDim = 1024;
// Validation asks only for natural element alignment, which every path needs. The fast kernels
// also move q/k/v/o in 16-byte vectors (and TMA needs 16-byte aligned strides): that is a capability
// of those paths, reported by their supports() through vector_alignment_problem(), so an odd layout
// (head dim 33, a sliced tensor) still runs on the reference paths instead of being rejected.
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

template <class... Parts>
Status invalid(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Status::InvalidArgument(os.str());
}

// What the call touches. An empty call (no batch entry or no query row) touches nothing.
struct CallShape {
  bool varlen = false;
  bool has_rows = false;  // q and o (and lse) are accessed
  bool has_keys = false;  // k and v are read (otherwise every row gets o = 0, lse = -inf)
};

CallShape call_shape(const AttentionParams& p) {
  CallShape s;
  s.varlen = p.is_varlen();
  // Same definition as attention_forward's early return for empty calls (dispatch.cpp).
  s.has_rows = p.batch > 0 && (s.varlen ? p.total_q > 0 : p.seqlen_q > 0);
  // Paged varlen keys live in the page pool: total_k does not describe them.
  s.has_keys = s.varlen && !p.is_paged() ? p.total_k > 0 : p.seqlen_k > 0;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Rules that hold for every call
// ---------------------------------------------------------------------------------------------

Status check_enums(const AttentionParams& p) {
  const int dtype = static_cast<int>(p.dtype);
  if (dtype < static_cast<int>(DType::kFloat16) || dtype > static_cast<int>(DType::kFloat32)) {
    return invalid("dtype: must be one of fp16 (0), bf16 (1), fp32 (2) (got ", dtype, ")");
  }
  const int align = static_cast<int>(p.mask_align);
  if (align != static_cast<int>(MaskAlign::kBottomRight) && align != static_cast<int>(MaskAlign::kTopLeft)) {
    return invalid("mask_align: must be bottom-right (0) or top-left (1) (got ", align, ")");
  }
  const int path = static_cast<int>(p.path);
  if (path < static_cast<int>(KernelPath::kAuto) || path > static_cast<int>(KernelPath::kDecode)) {
    return invalid("path: must be one of auto (0), sm90 (1), sm80 (2), naive-gpu (3), cpu-reference (4), decode (5) "
                   "(got ", path, ")");
  }
  return Status::Ok();
}

Status check_head_dim(const char* name, int value) {
  if (value < 1) return invalid(name, ": must be >= 1 (got ", value, ")");
  if (value > kMaxHeadDim) return invalid(name, ": must be <= ", kMaxHeadDim, " (got ", value, ")");
  return Status::Ok();
}

Status check_sizes(const AttentionParams& p) {
  if (p.batch < 0) return invalid("batch: must be >= 0 (got ", p.batch, ")");
  if (p.seqlen_q < 0) return invalid("seqlen_q: must be >= 0 (got ", p.seqlen_q, ")");
  if (p.seqlen_k < 0) return invalid("seqlen_k: must be >= 0 (got ", p.seqlen_k, ")");
  if (p.heads_q < 1) return invalid("heads_q: must be >= 1 (got ", p.heads_q, ")");
  if (p.heads_kv < 1) return invalid("heads_kv: must be >= 1 (got ", p.heads_kv, ")");
  if (p.heads_q % p.heads_kv != 0) {
    return invalid("heads_q: must be a multiple of heads_kv (got heads_q=", p.heads_q, ", heads_kv=", p.heads_kv, ")");
  }
  FC_RETURN_IF_ERROR(check_head_dim("head_dim_qk", p.head_dim_qk));
  FC_RETURN_IF_ERROR(check_head_dim("head_dim_v", p.head_dim_v));
  if (p.num_splits < 0) return invalid("num_splits: must be >= 0 (0 = heuristic) (got ", p.num_splits, ")");
  return Status::Ok();
}

Status check_score_function(const AttentionParams& p) {
  if (!std::isfinite(p.softmax_scale)) {
    return invalid("softmax_scale: must be finite (0 = 1/sqrt(head_dim_qk)) (got ", p.softmax_scale, ")");
  }
  if (!std::isfinite(p.softcap)) return invalid("softcap: must be finite (got ", p.softcap, ")");
  if (p.softcap < 0.0f) return invalid("softcap: must be >= 0 (0 = off) (got ", p.softcap, ")");
  return Status::Ok();
}

Status check_visibility(const AttentionParams& p) {
  if (p.window_left < kWindowInfinite) {
    return invalid("window_left: must be >= -1 (-1 = infinite) (got ", p.window_left, ")");
  }
  if (p.window_right < kWindowInfinite) {
    return invalid("window_right: must be >= -1 (-1 = infinite) (got ", p.window_right, ")");
  }
  // causal means window_right = 0; a different explicit right window contradicts it.
  if (p.causal && p.window_right != kWindowInfinite && p.window_right != 0) {
    return invalid("causal: window_right must be -1 or 0 when causal is set (causal means window_right = 0) (got "
                   "causal=true, window_right=", p.window_right, ")");
  }
  return Status::Ok();
}

bool aligned_to(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

Status check_alibi(const AttentionParams& p) {
  if (p.alibi_slopes == nullptr) return Status::Ok();
  if (p.alibi_batch_stride != 0 && p.alibi_batch_stride < p.heads_q) {
    return invalid("alibi_batch_stride: must be 0 (one slope vector for all batch entries) or >= heads_q (got "
                   "alibi_batch_stride=", p.alibi_batch_stride, ", heads_q=", p.heads_q, ")");
  }
  if (!aligned_to(p.alibi_slopes, sizeof(float))) return invalid("alibi_slopes: must be 4-byte aligned (float32)");
  return Status::Ok();
}

Status check_varlen_shape(const AttentionParams& p) {
  if ((p.cu_seqlens_q == nullptr) != (p.cu_seqlens_k == nullptr)) {
    return invalid("cu_seqlens_q, cu_seqlens_k: must be both set (varlen) or both null (got cu_seqlens_q=",
                   p.cu_seqlens_q == nullptr ? "null" : "set", ", cu_seqlens_k=",
                   p.cu_seqlens_k == nullptr ? "null" : "set", ")");
  }
  const int32_t* arrays[] = {p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_k};
  const char* names[] = {"cu_seqlens_q", "cu_seqlens_k", "seqused_k"};
  for (int a = 0; a < 3; ++a) {
    if (arrays[a] != nullptr && !aligned_to(arrays[a], sizeof(int32_t))) {
      return invalid(names[a], ": must be 4-byte aligned (int32)");
    }
  }
  if (!p.is_varlen()) return Status::Ok();  // total_q / total_k are ignored without varlen
  // cu_seqlens are int32, so no token row beyond INT32_MAX can be addressed.
  if (p.total_q < 0 || p.total_q > kInt32Max) {
    return invalid("total_q: must be in [0, 2^31-1] (cu_seqlens are int32) (got ", p.total_q, ")");
  }
  if (p.total_k < 0 || p.total_k > kInt32Max) {
    return invalid("total_k: must be in [0, 2^31-1] (cu_seqlens are int32) (got ", p.total_k, ")");
  }
  return Status::Ok();
}

// Paged K/V, the cache batch index and left padding (flashcore.hpp, "KV cache").
Status check_kv_cache_shape(const AttentionParams& p) {
  const struct {
    const char* name;
    const int32_t* ptr;
  } arrays[] = {{"block_table", p.block_table}, {"kv_batch_idx", p.kv_batch_idx}, {"leftpad_k", p.leftpad_k}};
  for (const auto& a : arrays) {
    if (a.ptr != nullptr && !aligned_to(a.ptr, sizeof(int32_t))) return invalid(a.name, ": must be 4-byte aligned (int32)");
  }
  if (p.is_paged()) {
    if (p.page_size < 1) return invalid("page_size: must be >= 1 with a block_table (got ", p.page_size, ")");
    if (p.num_pages < 1) return invalid("num_pages: must be >= 1 with a block_table (got ", p.num_pages, ")");
    if (p.pages_per_seq < 1) return invalid("pages_per_seq: must be >= 1 with a block_table (got ", p.pages_per_seq, ")");
    if (p.block_table_batch_stride < p.pages_per_seq) {
      return invalid("block_table_batch_stride: must be >= pages_per_seq (got block_table_batch_stride=",
                     p.block_table_batch_stride, ", pages_per_seq=", p.pages_per_seq, ")");
    }
    const int64_t capacity = int64_t(p.pages_per_seq) * p.page_size;
    if (p.seqlen_k > capacity) {
      return invalid("seqlen_k: a block_table row holds at most pages_per_seq * page_size = ", capacity,
                     " keys (got seqlen_k=", p.seqlen_k, ")");
    }
    if (p.kv_batch_idx != nullptr) {
      return invalid("kv_batch_idx: not with a block_table (the table already picks each entry's pages)");
    }
  }
  if (p.kv_batch_idx != nullptr) {
    if (p.is_varlen()) return invalid("kv_batch_idx: not with varlen (cu_seqlens) calls");
    if (p.kv_batch < 1) return invalid("kv_batch: must be >= 1 with kv_batch_idx (got ", p.kv_batch, ")");
  }
  if (p.leftpad_k != nullptr && p.is_varlen()) return invalid("leftpad_k: not with varlen (cu_seqlens) calls");
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Memory rules (calls with query rows only)
// ---------------------------------------------------------------------------------------------

// One dimension of a strided tensor. The innermost (head-dim) dimension is contiguous by
// construction: its stride is 1 and it has no stride field (stride_name == nullptr).
struct Dim {
  const char* stride_name;
  int64_t extent;
  int64_t stride;
  const char* extent_name;
};

struct TensorView {
  const char* name = "";
  const void* base = nullptr;
  int elem_bytes = 0;
  std::vector<Dim> dims;
  int64_t span_bytes = 0;  // 1 + largest byte offset; filled by check_offsets
};

Dim contiguous_dim(int64_t extent, const char* extent_name) { return {nullptr, extent, 1, extent_name}; }

// q, k, v, o, lse as the paths address them. Varlen: one token axis and no batch dimension (batch
// strides are ignored). k and v are absent when the call has no key rows; lse when it is null.
std::vector<TensorView> tensor_views(const AttentionParams& p, const CallShape& s) {
  const int elem = dtype_size(p.dtype);
  std::vector<TensorView> views;
  auto add = [&](const char* name, const void* base, int elem_bytes, std::vector<Dim> dims) {
    TensorView t;
    t.name = name;
    t.base = base;
    t.elem_bytes = elem_bytes;
    t.dims = std::move(dims);
    views.push_back(std::move(t));
  };
  // Paged K/V: the page pool, the same in dense and varlen calls.
  auto add_paged_kv = [&] {
    add("k", p.k, elem, {{"k_batch_stride", p.num_pages, p.k_batch_stride, "num_pages"},
                         {"k_seq_stride", p.page_size, p.k_seq_stride, "page_size"},
                         {"k_head_stride", p.heads_kv, p.k_head_stride, "heads_kv"},
                         contiguous_dim(p.head_dim_qk, "head_dim_qk")});
    add("v", p.v, elem, {{"v_batch_stride", p.num_pages, p.v_batch_stride, "num_pages"},
                         {"v_seq_stride", p.page_size, p.v_seq_stride, "page_size"},
                         {"v_head_stride", p.heads_kv, p.v_head_stride, "heads_kv"},
                         contiguous_dim(p.head_dim_v, "head_dim_v")});
  };
  if (s.varlen) {
    add("q", p.q, elem, {{"q_seq_stride", p.total_q, p.q_seq_stride, "total_q"},
                         {"q_head_stride", p.heads_q, p.q_head_stride, "heads_q"},
                         contiguous_dim(p.head_dim_qk, "head_dim_qk")});
    if (s.has_keys && p.is_paged()) add_paged_kv();
    if (s.has_keys && !p.is_paged()) {
      add("k", p.k, elem, {{"k_seq_stride", p.total_k, p.k_seq_stride, "total_k"},
                           {"k_head_stride", p.heads_kv, p.k_head_stride, "heads_kv"},
                           contiguous_dim(p.head_dim_qk, "head_dim_qk")});
      add("v", p.v, elem, {{"v_seq_stride", p.total_k, p.v_seq_stride, "total_k"},
                           {"v_head_stride", p.heads_kv, p.v_head_stride, "heads_kv"},
                           contiguous_dim(p.head_dim_v, "head_dim_v")});
    }
    add("o", p.o, elem, {{"o_seq_stride", p.total_q, p.o_seq_stride, "total_q"},
                         {"o_head_stride", p.heads_q, p.o_head_stride, "heads_q"},
                         contiguous_dim(p.head_dim_v, "head_dim_v")});
    if (p.lse != nullptr) {
      add("lse", p.lse, sizeof(float), {{"lse_head_stride", p.heads_q, p.lse_head_stride, "heads_q"},
                                        contiguous_dim(p.total_q, "total_q")});
    }
  } else {
    add("q", p.q, elem, {{"q_batch_stride", p.batch, p.q_batch_stride, "batch"},
                         {"q_seq_stride", p.seqlen_q, p.q_seq_stride, "seqlen_q"},
                         {"q_head_stride", p.heads_q, p.q_head_stride, "heads_q"},
                         contiguous_dim(p.head_dim_qk, "head_dim_qk")});
    if (s.has_keys && p.is_paged()) add_paged_kv();
    if (s.has_keys && !p.is_paged()) {
      const int64_t kv_rows = p.kv_batch_idx != nullptr ? p.kv_batch : p.batch;
      const char* kv_rows_name = p.kv_batch_idx != nullptr ? "kv_batch" : "batch";
      add("k", p.k, elem, {{"k_batch_stride", kv_rows, p.k_batch_stride, kv_rows_name},
                           {"k_seq_stride", p.seqlen_k, p.k_seq_stride, "seqlen_k"},
                           {"k_head_stride", p.heads_kv, p.k_head_stride, "heads_kv"},
                           contiguous_dim(p.head_dim_qk, "head_dim_qk")});
      add("v", p.v, elem, {{"v_batch_stride", kv_rows, p.v_batch_stride, kv_rows_name},
                           {"v_seq_stride", p.seqlen_k, p.v_seq_stride, "seqlen_k"},
                           {"v_head_stride", p.heads_kv, p.v_head_stride, "heads_kv"},
                           contiguous_dim(p.head_dim_v, "head_dim_v")});
    }
    add("o", p.o, elem, {{"o_batch_stride", p.batch, p.o_batch_stride, "batch"},
                         {"o_seq_stride", p.seqlen_q, p.o_seq_stride, "seqlen_q"},
                         {"o_head_stride", p.heads_q, p.o_head_stride, "heads_q"},
                         contiguous_dim(p.head_dim_v, "head_dim_v")});
    if (p.lse != nullptr) {
      add("lse", p.lse, sizeof(float), {{"lse_batch_stride", p.batch, p.lse_batch_stride, "batch"},
                                        {"lse_head_stride", p.heads_q, p.lse_head_stride, "heads_q"},
                                        contiguous_dim(p.seqlen_q, "seqlen_q")});
    }
  }
  return views;
}

const TensorView* find_view(const std::vector<TensorView>& views, const char* name) {
  for (const TensorView& t : views) {
    if (std::strcmp(t.name, name) == 0) return &t;
  }
  return nullptr;
}

Status check_pointers(const AttentionParams& p, const CallShape& s) {
  if (p.q == nullptr) return invalid("q: must not be null when the call has query rows");
  if (p.o == nullptr) return invalid("o: must not be null when the call has query rows");
  // k and v may be null only when there is no key row: every query row then gets o = 0, lse = -inf.
  const char* no_keys = s.varlen ? "total_k > 0" : "seqlen_k > 0";
  if (s.has_keys && p.k == nullptr) return invalid("k: must not be null when there are keys (", no_keys, ")");
  if (s.has_keys && p.v == nullptr) return invalid("v: must not be null when there are keys (", no_keys, ")");
  return Status::Ok();
}

Status check_strides_non_negative(const std::vector<TensorView>& views) {
  for (const TensorView& t : views) {
    for (const Dim& d : t.dims) {
      if (d.stride_name != nullptr && d.stride < 0) {
        return invalid(d.stride_name, ": must be >= 0 (got ", d.stride, ")");
      }
    }
  }
  return Status::Ok();
}

// "batch=2 x q_batch_stride=320, seqlen_q=5 x q_seq_stride=64, ..." for messages.
std::string describe_strided_dims(const TensorView& t) {
  std::ostringstream os;
  const char* sep = "";
  for (const Dim& d : t.dims) {
    if (d.stride_name == nullptr) continue;
    os << sep << d.extent_name << "=" << d.extent << " x " << d.stride_name << "=" << d.stride;
    sep = ", ";
  }
  return os.str();
}

// Every path computes element offsets in int64: the largest byte offset of each tensor must fit.
Status check_offsets(std::vector<TensorView>& views) {
  for (TensorView& t : views) {
    int64_t max_offset = 0;  // sum over dimensions of (extent - 1) * stride
    bool empty = false;
    bool overflow = false;
    for (const Dim& d : t.dims) {
      if (d.extent <= 0) empty = true;
      if (d.extent <= 1) continue;
      int64_t term = 0;
      overflow = overflow || __builtin_mul_overflow(d.extent - 1, d.stride, &term) ||
                 __builtin_add_overflow(max_offset, term, &max_offset);
    }
    int64_t span = 0;
    overflow = overflow || __builtin_add_overflow(max_offset, int64_t{1}, &span) ||
               __builtin_mul_overflow(span, int64_t{t.elem_bytes}, &span);
    if (overflow) {
      return invalid(t.name, ": its largest byte offset does not fit in int64 (", describe_strided_dims(t),
                     "); every path computes offsets in int64");
    }
    t.span_bytes = empty ? 0 : span;
  }
  return Status::Ok();
}

Status check_alignment(const std::vector<TensorView>& views) {
  for (const TensorView& t : views) {
    if (!aligned_to(t.base, size_t(t.elem_bytes))) {
      return invalid(t.name, ": base pointer must be ", t.elem_bytes, "-byte aligned (its element size) (got address % ",
                     t.elem_bytes, " = ", reinterpret_cast<uintptr_t>(t.base) % t.elem_bytes, ")");
    }
  }
  return Status::Ok();
}

// Empty when every base pointer and every stride of q, k, v, o allows `vector_bytes`-wide accesses.
std::string vector_alignment_problem(const AttentionParams& p, const std::vector<TensorView>& views,
                                     int vector_bytes) {
  std::ostringstream os;
  for (const TensorView& t : views) {
    if (std::strcmp(t.name, "lse") == 0) continue;  // scalar float32 stores
    if (!aligned_to(t.base, size_t(vector_bytes))) {
      os << t.name << ": base pointer must be " << vector_bytes << "-byte aligned for this path's vector loads (got "
         << "address % " << vector_bytes << " = " << reinterpret_cast<uintptr_t>(t.base) % vector_bytes << ")";
      return os.str();
    }
    const int64_t elems_per_vector = vector_bytes / t.elem_bytes;
    for (const Dim& d : t.dims) {
      // A dimension of extent 1 never contributes to an offset, so its stride is free. The
      // contiguous last dimension must hold whole vectors.
      if (d.extent <= 1) continue;
      if (d.stride_name == nullptr) {
        if (d.extent % elems_per_vector != 0) {
          os << d.extent_name << ": must be a multiple of " << elems_per_vector << " for this path's "
             << vector_bytes << "-byte vector loads of " << dtype_name(p.dtype) << " (got " << d.extent << ")";
          return os.str();
        }
        continue;
      }
      if (d.stride % elems_per_vector != 0) {
        os << d.stride_name << ": must be a multiple of " << elems_per_vector << " elements (" << vector_bytes
           << " bytes of " << dtype_name(p.dtype) << ") for this path's vector loads (got " << d.stride << ")";
        return os.str();
      }
    }
  }
  return "";
}

// o and lse are written: distinct indices must reach distinct elements. Sufficient rule (the one
// every dense or sliced layout meets): ordered by stride, each dimension of extent > 1 steps past
// everything the smaller dimensions span.
Status check_no_self_overlap(const TensorView& t) {
  std::vector<Dim> dims;
  for (const Dim& d : t.dims) {
    if (d.extent > 1) dims.push_back(d);
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.stride < b.stride; });
  int64_t covered = 1;  // elements spanned by the dimensions already visited
  for (const Dim& d : dims) {
    const char* stride_name = d.stride_name != nullptr ? d.stride_name : "the contiguous last dimension";
    if (d.stride < covered) {
      return invalid(stride_name, ": ", t.name, " would overlap itself: must be >= ", covered,
                     " (the elements spanned by its smaller-stride dimensions) or ", d.extent_name,
                     " must be 1 (got ", stride_name, "=", d.stride, ", ", d.extent_name, "=", d.extent, ")");
    }
    covered += (d.extent - 1) * d.stride;  // fits: check_offsets bounded the whole sum
  }
  return Status::Ok();
}

bool spans_intersect(const TensorView& a, const TensorView& b) {
  if (a.span_bytes == 0 || b.span_bytes == 0 || a.base == nullptr || b.base == nullptr) return false;
  const uintptr_t a_lo = reinterpret_cast<uintptr_t>(a.base), b_lo = reinterpret_cast<uintptr_t>(b.base);
  return a_lo < b_lo + uint64_t(b.span_bytes) && b_lo < a_lo + uint64_t(a.span_bytes);
}

// o (and lse) are written while q, k, v are read by other tiles, so they must not share memory.
// The test compares address ranges [base, base + span): conservative for interleaved layouts.
Status check_output_overlap(const std::vector<TensorView>& views) {
  for (const char* written : {"o", "lse"}) {
    const TensorView* out = find_view(views, written);
    if (out == nullptr) continue;
    FC_RETURN_IF_ERROR(check_no_self_overlap(*out));
    for (const TensorView& other : views) {
      if (&other == out) continue;
      if (std::strcmp(written, "o") == 0 && std::strcmp(other.name, "lse") == 0) continue;  // lse checks o
      if (spans_intersect(*out, other)) {
        return invalid(written, ": must not overlap ", other.name, " in memory (", written, " spans ", out->span_bytes,
                       " bytes from ", out->base, ", ", other.name, " spans ", other.span_bytes, " bytes from ",
                       other.base, "); ", written, " is written while ", other.name, " is in use");
      }
    }
  }
  return Status::Ok();
}

// The small arrays are read by whichever side runs the call: the host (q in host memory) or the GPU.
// (q, k, v, o, lse must share q's side; dispatch checks that before it picks a path.)
Status check_small_array_placement(const AttentionParams& p) {
  const void* arrays[] = {p.cu_seqlens_q, p.cu_seqlens_k, p.seqused_k, p.alibi_slopes,
                          p.block_table, p.kv_batch_idx, p.leftpad_k};
  const char* names[] = {"cu_seqlens_q", "cu_seqlens_k", "seqused_k", "alibi_slopes",
                         "block_table", "kv_batch_idx", "leftpad_k"};
  if (std::all_of(std::begin(arrays), std::end(arrays), [](const void* a) { return a == nullptr; })) {
    return Status::Ok();
  }
  // Classified with errors reported: under a sticky CUDA error every pointer would look like host
  // memory, and the contents check would then read device arrays on the host.
  detail::PointerInfo q_info;
  FC_RETURN_IF_ERROR(detail::classify_pointer(p.q, &q_info));
  const bool host = detail::is_host(q_info.memory);
  for (int a = 0; a < int(std::size(arrays)); ++a) {
    if (arrays[a] == nullptr) continue;
    detail::PointerInfo at;
    FC_RETURN_IF_ERROR(detail::classify_pointer(arrays[a], &at));
    if (std::string why = detail::placement_problem(names[a], at.memory, host); !why.empty()) {
      return Status::InvalidArgument(why);
    }
  }
  return Status::Ok();
}

// cu_seqlens_x[0] == 0, non-decreasing, each length <= max_seqlen, last entry <= total rows.
Status check_cu_seqlens(const char* name, const std::vector<int32_t>& cu, const char* max_name, int max_len,
                        const char* total_name, int64_t total) {
  if (cu[0] != 0) return invalid(name, "[0]: must be 0 (got ", cu[0], ")");
  for (size_t b = 0; b + 1 < cu.size(); ++b) {
    if (cu[b + 1] < cu[b]) {
      return invalid(name, "[", b + 1, "]: must be >= ", name, "[", b, "] (got ", cu[b + 1], " < ", cu[b], ")");
    }
    const int64_t len = int64_t(cu[b + 1]) - cu[b];
    if (len > max_len) {
      return invalid(name, "[", b + 1, "]: sequence ", b, " has ", len, " tokens, more than ", max_name, " = ",
                     max_len, " (in varlen ", max_name, " holds the maximum sequence length)");
    }
  }
  const size_t last = cu.size() - 1;
  if (cu[last] > total) {
    return invalid(name, "[", last, "]: must be <= ", total_name, " (got ", cu[last], " > ", total, ")");
  }
  return Status::Ok();
}

// seqused_k[b] in [0, keys of sequence b].
Status check_seqused_k(const std::vector<int32_t>& used, const std::vector<int32_t>* cu_k, int seqlen_k) {
  for (size_t b = 0; b < used.size(); ++b) {
    const int64_t keys = cu_k != nullptr ? int64_t((*cu_k)[b + 1]) - (*cu_k)[b] : seqlen_k;
    if (used[b] < 0 || used[b] > keys) {
      return invalid("seqused_k[", b, "]: must be in [0, ", keys, "] (the keys of sequence ", b, ") (got ", used[b],
                     ")");
    }
  }
  return Status::Ok();
}

Status check_varlen_contents(const AttentionParams& p, cudaStream_t stream) {
  const int64_t entries = int64_t(p.batch) + 1;
  std::vector<int32_t> cu_q, cu_k, used;
  std::vector<detail::SmallArray> arrays;
  if (p.is_varlen()) {
    arrays.push_back({p.cu_seqlens_q, entries, &cu_q});
    arrays.push_back({p.cu_seqlens_k, entries, &cu_k});
  }
  if (p.seqused_k != nullptr) arrays.push_back({p.seqused_k, p.batch, &used});
  std::vector<int32_t> table, batch_idx, leftpad;
  if (p.is_paged()) {
    arrays.push_back({p.block_table, (int64_t(p.batch) - 1) * p.block_table_batch_stride + p.pages_per_seq, &table});
  }
  if (p.kv_batch_idx != nullptr) arrays.push_back({p.kv_batch_idx, p.batch, &batch_idx});
  if (p.leftpad_k != nullptr) arrays.push_back({p.leftpad_k, p.batch, &leftpad});
  if (arrays.empty()) return Status::Ok();
  bool available = true;
  FC_RETURN_IF_ERROR(detail::read_small_arrays(arrays, stream, p.check_device_metadata, &available));
  if (!available) return Status::Ok();  // capturing: the caller guarantees the contents
  if (p.is_varlen()) {
    FC_RETURN_IF_ERROR(check_cu_seqlens("cu_seqlens_q", cu_q, "seqlen_q", p.seqlen_q, "total_q", p.total_q));
    // Paged: cu_seqlens_k only give lengths (rows count from 0 in each table row), so no total bounds them.
    FC_RETURN_IF_ERROR(check_cu_seqlens("cu_seqlens_k", cu_k, "seqlen_k", p.seqlen_k, "total_k",
                                        p.is_paged() ? std::numeric_limits<int64_t>::max() : p.total_k));
  }
  if (p.seqused_k != nullptr) {
    FC_RETURN_IF_ERROR(check_seqused_k(used, p.is_varlen() ? &cu_k : nullptr, p.seqlen_k));
  }
  for (size_t b = 0; b < batch_idx.size(); ++b) {
    if (batch_idx[b] < 0 || batch_idx[b] >= p.kv_batch) {
      return invalid("kv_batch_idx[", b, "]: must be in [0, kv_batch = ", p.kv_batch, ") (got ", batch_idx[b], ")");
    }
  }
  // The key rows of entry b end at seqused_k[b], the varlen length, or seqlen_k.
  auto end_row = [&](size_t b) -> int64_t {
    if (p.seqused_k != nullptr) return used[b];
    if (p.is_varlen()) return int64_t(cu_k[b + 1]) - cu_k[b];
    return p.seqlen_k;
  };
  for (size_t b = 0; b < leftpad.size(); ++b) {
    if (leftpad[b] < 0 || leftpad[b] > end_row(b)) {
      return invalid("leftpad_k[", b, "]: must be in [0, ", end_row(b), "] (the end of entry ", b, "'s keys) (got ",
                     leftpad[b], ")");
    }
  }
  if (p.is_paged()) {  // the table entries the call reads: the pages holding rows [0, end)
    for (int b = 0; b < p.batch; ++b) {
      const int64_t pages_used = (end_row(size_t(b)) + p.page_size - 1) / p.page_size;
      for (int64_t slot = 0; slot < pages_used; ++slot) {
        const int32_t page = table[size_t(b * p.block_table_batch_stride + slot)];
        if (page < 0 || page >= p.num_pages) {
          return invalid("block_table[", b, "][", slot, "]: must be a page in [0, num_pages = ", p.num_pages,
                         ") (got ", page, ")");
        }
      }
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Backward rules
// ---------------------------------------------------------------------------------------------

// The gradient tensor and stride names of the forward tensor and stride names they mirror.
const char* gradient_name(const char* forward_name) {
  static const char* const kNames[][2] = {
      {"q", "dq"}, {"k", "dk"}, {"v", "dv"}, {"o", "dout"},
      {"q_batch_stride", "dq_batch_stride"}, {"q_seq_stride", "dq_seq_stride"}, {"q_head_stride", "dq_head_stride"},
      {"k_batch_stride", "dk_batch_stride"}, {"k_seq_stride", "dk_seq_stride"}, {"k_head_stride", "dk_head_stride"},
      {"v_batch_stride", "dv_batch_stride"}, {"v_seq_stride", "dv_seq_stride"}, {"v_head_stride", "dv_head_stride"},
      {"o_batch_stride", "dout_batch_stride"}, {"o_seq_stride", "dout_seq_stride"},
      {"o_head_stride", "dout_head_stride"}};
  for (const auto& n : kNames) {
    if (std::strcmp(n[0], forward_name) == 0) return n[1];
  }
  return forward_name;
}

// dout, dq, dk, dv as the paths address them: o's, q's, k's and v's shapes with their own strides.
std::vector<TensorView> gradient_views(const BackwardParams& bp, const CallShape& s) {
  AttentionParams g = bp.forward;
  g.q = bp.dq, g.q_batch_stride = bp.dq_batch_stride, g.q_seq_stride = bp.dq_seq_stride, g.q_head_stride = bp.dq_head_stride;
  g.k = bp.dk, g.k_batch_stride = bp.dk_batch_stride, g.k_seq_stride = bp.dk_seq_stride, g.k_head_stride = bp.dk_head_stride;
  g.v = bp.dv, g.v_batch_stride = bp.dv_batch_stride, g.v_seq_stride = bp.dv_seq_stride, g.v_head_stride = bp.dv_head_stride;
  g.o = const_cast<void*>(bp.dout), g.o_batch_stride = bp.dout_batch_stride, g.o_seq_stride = bp.dout_seq_stride,
  g.o_head_stride = bp.dout_head_stride;
  g.lse = nullptr;
  std::vector<TensorView> views = tensor_views(g, s);
  for (TensorView& t : views) {
    t.name = gradient_name(t.name);
    for (Dim& d : t.dims) {
      if (d.stride_name != nullptr) d.stride_name = gradient_name(d.stride_name);
    }
  }
  return views;
}

Status check_gradient_pointers(const BackwardParams& bp, const CallShape& s) {
  if (bp.forward.lse == nullptr) {
    return invalid("lse: the backward reads the forward's LSE (forward.lse); it must not be null");
  }
  if (bp.dout == nullptr) return invalid("dout: must not be null when the call has query rows");
  if (bp.dq == nullptr) return invalid("dq: must not be null when the call has query rows");
  const char* no_keys = s.varlen ? "total_k > 0" : "seqlen_k > 0";
  if (s.has_keys && bp.dk == nullptr) return invalid("dk: must not be null when there are keys (", no_keys, ")");
  if (s.has_keys && bp.dv == nullptr) return invalid("dv: must not be null when there are keys (", no_keys, ")");
  return Status::Ok();
}

// dq, dk, dv are written while every other tensor is read (and each by several tiles): none of them
// may share memory with another tensor of the call or overlap itself.
Status check_gradient_overlap(const std::vector<TensorView>& views) {
  for (const char* written : {"dq", "dk", "dv"}) {
    const TensorView* out = find_view(views, written);
    if (out == nullptr) continue;
    FC_RETURN_IF_ERROR(check_no_self_overlap(*out));
    for (const TensorView& other : views) {
      if (&other == out || !spans_intersect(*out, other)) continue;
      return invalid(written, ": must not overlap ", other.name, " in memory (", written, " spans ", out->span_bytes,
                     " bytes from ", out->base, ", ", other.name, " spans ", other.span_bytes, " bytes from ",
                     other.base, "); ", written, " is written while ", other.name, " is in use");
    }
  }
  return Status::Ok();
}

}  // namespace

Status validate(const AttentionParams& p, cudaStream_t stream) {
  return detail::status_guard("validate", [&]() -> Status {
    FC_RETURN_IF_ERROR(check_enums(p));
    FC_RETURN_IF_ERROR(check_sizes(p));
    FC_RETURN_IF_ERROR(check_score_function(p));
    FC_RETURN_IF_ERROR(check_visibility(p));
    FC_RETURN_IF_ERROR(check_alibi(p));
    FC_RETURN_IF_ERROR(check_varlen_shape(p));
    FC_RETURN_IF_ERROR(check_kv_cache_shape(p));
  
    const CallShape shape = call_shape(p);
    if (!shape.has_rows) return Status::Ok();  // empty call: reads and writes nothing
  
    FC_RETURN_IF_ERROR(check_pointers(p, shape));
    std::vector<TensorView> views = tensor_views(p, shape);
    FC_RETURN_IF_ERROR(check_strides_non_negative(views));
    FC_RETURN_IF_ERROR(check_offsets(views));
    FC_RETURN_IF_ERROR(check_alignment(views));
    FC_RETURN_IF_ERROR(check_output_overlap(views));
    FC_RETURN_IF_ERROR(check_small_array_placement(p));
    FC_RETURN_IF_ERROR(check_varlen_contents(p, stream));
    return Status::Ok();
  });
}

Status validate_backward(const BackwardParams& bp, cudaStream_t stream) {
  return detail::status_guard("validate_backward", [&]() -> Status {
    FC_RETURN_IF_ERROR(validate(bp.forward, stream));
    if (bp.forward.block_table != nullptr || bp.forward.kv_batch_idx != nullptr || bp.forward.leftpad_k != nullptr) {
      return invalid("forward.block_table, kv_batch_idx, leftpad_k: the backward reads dense or varlen K/V only "
                     "(a KV cache is an inference layout)");
    }
    const CallShape shape = call_shape(bp.forward);
    if (!shape.has_rows) return Status::Ok();  // empty call: no gradient element exists
    FC_RETURN_IF_ERROR(check_gradient_pointers(bp, shape));
    std::vector<TensorView> views = tensor_views(bp.forward, shape);
    std::vector<TensorView> grads = gradient_views(bp, shape);
    FC_RETURN_IF_ERROR(check_strides_non_negative(grads));
    FC_RETURN_IF_ERROR(check_offsets(grads));
    FC_RETURN_IF_ERROR(check_alignment(grads));
    FC_RETURN_IF_ERROR(check_offsets(views));  // spans of the forward's tensors, for the overlap test
    views.insert(views.end(), grads.begin(), grads.end());
    FC_RETURN_IF_ERROR(check_gradient_overlap(views));
    return Status::Ok();
  });
}

namespace detail {

std::string vector_alignment_problem(const AttentionParams& p, int vector_bytes) {
  const CallShape shape = call_shape(p);
  if (!shape.has_rows) return "";
  return flashcore::vector_alignment_problem(p, tensor_views(p, shape), vector_bytes);
}

std::string vector_alignment_problem(const BackwardParams& bp, int vector_bytes) {
  const CallShape shape = call_shape(bp.forward);
  if (!shape.has_rows) return "";
  std::vector<TensorView> views = tensor_views(bp.forward, shape);
  const std::vector<TensorView> grads = gradient_views(bp, shape);
  views.insert(views.end(), grads.begin(), grads.end());
  return flashcore::vector_alignment_problem(bp.forward, views, vector_bytes);
}

}  // namespace detail
}  // namespace flashcore
