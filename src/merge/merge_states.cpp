// merge_attention_states: validation, placement (host or device), and the CPU implementation.
//
// Rules, in order, each returning InvalidArgument("<argument>: <rule> (got ...)"); nothing is
// written on error. For every call: dtype, sizes, head_dim. Then, only when the call has rows (an
// empty call reads and writes nothing): pointers -> strides -> offsets fit int64 -> alignment ->
// outputs overlap neither themselves nor an input (o == o_a and lse == lse_a exactly: in place) ->
// every tensor on o_a's side (host or device).
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "api/guard.hpp"
#include "api/memory.hpp"
#include "common/cuda_check.hpp"
#include "common/dtype.hpp"
#include "merge/merge_states.hpp"

namespace flashcore {
namespace {

constexpr int kMaxHeadDim = 1024;
constexpr int kVectorBytes = 16;

template <class... Parts>
Status invalid(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Status::InvalidArgument(os.str());
}

bool aligned_to(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

int64_t row_count(const MergeStatesParams& p) { return int64_t(p.batch) * p.seqlen * p.heads; }

// One dimension of a tensor: extent and stride in elements (stride_name null: the contiguous one).
struct Dim {
  const char* extent_name;
  int64_t extent;
  const char* stride_name;
  int64_t stride;
};

struct View {
  const char* name;
  const void* base;
  int elem_bytes;
  std::vector<Dim> dims;
  int64_t span_bytes = 0;  // 1 + largest byte offset (filled by check_offsets)
  bool written = false;
  bool is_lse = false;
};

// o_a, o_b, o [B, S, H, D]; lse_a, lse_b, lse [B, H, S] (lse only when given).
std::vector<View> views(const MergeStatesParams& p) {
  const int elem = dtype_size(p.dtype);
  auto o_view = [&](const char* name, const void* base, int64_t bs, const char* bs_name, int64_t ss,
                    const char* ss_name, int64_t hs, const char* hs_name, bool written) {
    return View{name, base, elem,
                {{"batch", p.batch, bs_name, bs}, {"seqlen", p.seqlen, ss_name, ss},
                 {"heads", p.heads, hs_name, hs}, {"head_dim", p.head_dim, nullptr, 1}},
                0, written, false};
  };
  auto lse_view = [&](const char* name, const void* base, int64_t bs, const char* bs_name, int64_t hs,
                      const char* hs_name, bool written) {
    return View{name, base, int(sizeof(float)),
                {{"batch", p.batch, bs_name, bs}, {"heads", p.heads, hs_name, hs}, {"seqlen", p.seqlen, nullptr, 1}},
                0, written, true};
  };
  std::vector<View> v;
  v.push_back(o_view("o_a", p.o_a, p.o_a_batch_stride, "o_a_batch_stride", p.o_a_seq_stride, "o_a_seq_stride",
                     p.o_a_head_stride, "o_a_head_stride", false));
  v.push_back(o_view("o_b", p.o_b, p.o_b_batch_stride, "o_b_batch_stride", p.o_b_seq_stride, "o_b_seq_stride",
                     p.o_b_head_stride, "o_b_head_stride", false));
  v.push_back(o_view("o", p.o, p.o_batch_stride, "o_batch_stride", p.o_seq_stride, "o_seq_stride", p.o_head_stride,
                     "o_head_stride", true));
  v.push_back(lse_view("lse_a", p.lse_a, p.lse_a_batch_stride, "lse_a_batch_stride", p.lse_a_head_stride,
                       "lse_a_head_stride", false));
  v.push_back(lse_view("lse_b", p.lse_b, p.lse_b_batch_stride, "lse_b_batch_stride", p.lse_b_head_stride,
                       "lse_b_head_stride", false));
  if (p.lse != nullptr) {
    v.push_back(lse_view("lse", p.lse, p.lse_batch_stride, "lse_batch_stride", p.lse_head_stride, "lse_head_stride",
                         true));
  }
  return v;
}

const View& find(const std::vector<View>& views, const char* name) {
  for (const View& v : views) {
    if (std::strcmp(v.name, name) == 0) return v;
  }
  return views.front();  // not reached: every caller names a view that exists
}

Status check_sizes(const MergeStatesParams& p) {
  const int dtype = static_cast<int>(p.dtype);
  if (dtype < static_cast<int>(DType::kFloat16) || dtype > static_cast<int>(DType::kFloat32)) {
    return invalid("dtype: must be one of fp16 (0), bf16 (1), fp32 (2) (got ", dtype, ")");
  }
  if (p.batch < 0) return invalid("batch: must be >= 0 (got ", p.batch, ")");
  if (p.seqlen < 0) return invalid("seqlen: must be >= 0 (got ", p.seqlen, ")");
  if (p.heads < 0) return invalid("heads: must be >= 0 (got ", p.heads, ")");
  if (p.head_dim < 1 || p.head_dim > kMaxHeadDim) {
    return invalid("head_dim: must be in [1, ", kMaxHeadDim, "] (got ", p.head_dim, ")");
  }
  return Status::Ok();
}

Status check_pointers(const MergeStatesParams& p) {
  const void* ptrs[] = {p.o_a, p.lse_a, p.o_b, p.lse_b, p.o};
  const char* names[] = {"o_a", "lse_a", "o_b", "lse_b", "o"};
  for (int i = 0; i < 5; ++i) {
    if (ptrs[i] == nullptr) return invalid(names[i], ": must not be null when the call has rows (lse may be)");
  }
  return Status::Ok();
}

Status check_strides(const std::vector<View>& views) {
  for (const View& v : views) {
    for (const Dim& d : v.dims) {
      if (d.stride_name != nullptr && d.stride < 0) return invalid(d.stride_name, ": must be >= 0 (got ", d.stride, ")");
    }
  }
  return Status::Ok();
}

// Offsets are computed in int64: each tensor's largest byte offset must fit.
Status check_offsets(std::vector<View>& views) {
  for (View& v : views) {
    int64_t max_offset = 0;
    bool overflow = false;
    for (const Dim& d : v.dims) {
      int64_t term = 0;
      overflow = overflow || __builtin_mul_overflow(d.extent - 1, d.stride, &term) ||
                 __builtin_add_overflow(max_offset, term, &max_offset);
    }
    int64_t span = 0;
    overflow = overflow || __builtin_add_overflow(max_offset, int64_t{1}, &span) ||
               __builtin_mul_overflow(span, int64_t{v.elem_bytes}, &span);
    if (overflow) return invalid(v.name, ": its largest byte offset does not fit in int64");
    v.span_bytes = span;
  }
  return Status::Ok();
}

Status check_alignment(const std::vector<View>& views) {
  for (const View& v : views) {
    if (!aligned_to(v.base, size_t(v.elem_bytes))) {
      return invalid(v.name, ": base pointer must be ", v.elem_bytes, "-byte aligned (",
                     v.is_lse ? "float32" : "its element size", ") (got address % ", v.elem_bytes, " = ",
                     reinterpret_cast<uintptr_t>(v.base) % v.elem_bytes, ")");
    }
  }
  return Status::Ok();
}

// A written tensor must not reach one element through two indices. Sufficient rule (every dense or
// sliced layout meets it): ordered by stride, each dimension of extent > 1 steps past everything the
// smaller ones span.
Status check_no_self_overlap(const View& v) {
  std::vector<Dim> dims;
  for (const Dim& d : v.dims) {
    if (d.extent > 1) dims.push_back(d);
  }
  // Ties: the contiguous dimension first, so a too-small stride is the one the message names.
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) {
    return a.stride != b.stride ? a.stride < b.stride : a.stride_name == nullptr && b.stride_name != nullptr;
  });
  int64_t covered = 1;
  for (const Dim& d : dims) {
    const char* stride_name = d.stride_name != nullptr ? d.stride_name : "the contiguous last dimension";
    if (d.stride < covered) {
      return invalid(stride_name, ": ", v.name, " would overlap itself: must be >= ", covered,
                     " (the elements spanned by its smaller-stride dimensions) or ", d.extent_name,
                     " must be 1 (got ", d.stride, ")");
    }
    covered += (d.extent - 1) * d.stride;
  }
  return Status::Ok();
}

bool spans_intersect(const View& a, const View& b) {
  const uintptr_t a_lo = reinterpret_cast<uintptr_t>(a.base), b_lo = reinterpret_cast<uintptr_t>(b.base);
  return a_lo < b_lo + uint64_t(b.span_bytes) && b_lo < a_lo + uint64_t(a.span_bytes);
}

// The same elements in the same order: same base, same stride wherever the extent is > 1.
bool same_layout(const View& a, const View& b) {
  if (a.base != b.base || a.elem_bytes != b.elem_bytes || a.dims.size() != b.dims.size()) return false;
  for (size_t i = 0; i < a.dims.size(); ++i) {
    if (a.dims[i].extent > 1 && a.dims[i].stride != b.dims[i].stride) return false;
  }
  return true;
}

// o may be o_a exactly and lse may be lse_a exactly (each element is read, then written, by the same
// thread); any other overlap of a written tensor with another tensor is an error.
Status check_overlap(const std::vector<View>& views) {
  for (const View& out : views) {
    if (!out.written) continue;
    FC_RETURN_IF_ERROR(check_no_self_overlap(out));
    const char* in_place_partner = std::strcmp(out.name, "o") == 0 ? "o_a" : "lse_a";
    for (const View& other : views) {
      if (&other == &out || !spans_intersect(out, other)) continue;
      if (std::strcmp(other.name, in_place_partner) == 0) {
        if (same_layout(out, other)) continue;
        return invalid(out.name, ": may alias ", other.name, " only exactly (the same pointer and strides, in place); "
                       "it overlaps ", other.name, " with a different base or strides");
      }
      return invalid(out.name, ": must not overlap ", other.name, " in memory (", out.name, " spans ", out.span_bytes,
                     " bytes from ", out.base, ", ", other.name, " spans ", other.span_bytes, " bytes from ",
                     other.base, "); only o = o_a and lse = lse_a (exactly, in place) may share memory");
    }
  }
  return Status::Ok();
}

// Every tensor lives where o_a does. Sets *on_host.
Status check_placement(const std::vector<View>& views, bool* on_host) {
  *on_host = detail::is_host(detail::memory_of(find(views, "o_a").base));
  for (const View& v : views) {
    if (detail::is_host(detail::memory_of(v.base)) != *on_host) {
      return invalid(v.name, ": must live in the same memory as o_a (", *on_host ? "host" : "device", ")");
    }
  }
  return Status::Ok();
}

// Element offset of (b, s, h, 0) in an o tensor and of (b, h, s) in an lse tensor.
int64_t o_offset(int64_t bs, int64_t ss, int64_t hs, int64_t b, int64_t s, int64_t h) { return b * bs + s * ss + h * hs; }
int64_t lse_offset(int64_t bs, int64_t hs, int64_t b, int64_t s, int64_t h) { return b * bs + h * hs + s; }

void merge_on_host(const MergeStatesParams& p) {
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t s = 0; s < p.seqlen; ++s) {
      for (int64_t h = 0; h < p.heads; ++h) {
        const float lse_a = p.lse_a[lse_offset(p.lse_a_batch_stride, p.lse_a_head_stride, b, s, h)];
        const float lse_b = p.lse_b[lse_offset(p.lse_b_batch_stride, p.lse_b_head_stride, b, s, h)];
        const merge::RowWeights w = merge::row_weights(lse_a, lse_b);
        const int64_t a0 = o_offset(p.o_a_batch_stride, p.o_a_seq_stride, p.o_a_head_stride, b, s, h);
        const int64_t b0 = o_offset(p.o_b_batch_stride, p.o_b_seq_stride, p.o_b_head_stride, b, s, h);
        const int64_t o0 = o_offset(p.o_batch_stride, p.o_seq_stride, p.o_head_stride, b, s, h);
        for (int64_t d = 0; d < p.head_dim; ++d) {
          const float x = load_as_float(p.o_a, a0 + d, p.dtype);
          const float y = load_as_float(p.o_b, b0 + d, p.dtype);
          store_from_float(p.o, o0 + d, merge::blend(w.w_a, x, w.w_b, y), p.dtype);
        }
        if (p.lse != nullptr) {
          p.lse[lse_offset(p.lse_batch_stride, p.lse_head_stride, b, s, h)] = merge::row_lse(lse_a, lse_b);
        }
      }
    }
  }
}

}  // namespace

namespace merge {

bool can_use_vector_loads(const MergeStatesParams& p) {
  const int elem = dtype_size(p.dtype);
  const int64_t per_vector = kVectorBytes / elem;
  if (p.head_dim % per_vector != 0) return false;
  for (const View& v : views(p)) {
    if (v.is_lse) continue;  // scalar float accesses
    if (!aligned_to(v.base, kVectorBytes)) return false;
    for (const Dim& d : v.dims) {
      if (d.stride_name != nullptr && d.extent > 1 && d.stride % per_vector != 0) return false;
    }
  }
  return true;
}

}  // namespace merge

Status merge_attention_states(const MergeStatesParams& p, cudaStream_t stream) {
  return detail::status_guard("merge_attention_states", [&]() -> Status {
    FC_RETURN_IF_ERROR(check_sizes(p));
    if (row_count(p) == 0) return Status::Ok();  // an empty call reads and writes nothing
    FC_RETURN_IF_ERROR(check_pointers(p));
    std::vector<View> v = views(p);
    FC_RETURN_IF_ERROR(check_strides(v));
    FC_RETURN_IF_ERROR(check_offsets(v));
    FC_RETURN_IF_ERROR(check_alignment(v));
    FC_RETURN_IF_ERROR(check_overlap(v));
    bool on_host = true;
    FC_RETURN_IF_ERROR(check_placement(v, &on_host));
    if (on_host) {
      merge_on_host(p);
      return Status::Ok();
    }
    return merge::launch_merge_states(p, stream);
  });
}

}  // namespace flashcore
