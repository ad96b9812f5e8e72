// attention_with_kvcache (flashcore.hpp, "KV cache"; docs/semantics.md, "KV cache"): validation,
// the host implementation and the orchestration of the device one.
//
//   1. validate_kvcache: the KvCacheParams rules, then validate() of the attention, then the contents
//      of cache_seqlens (and of the block table, batch index and left padding, against the key counts
//      after the append) where they can be read: host memory directly; device memory by one copy and
//      one stream sync, only with attention.check_device_metadata on and the stream not capturing.
//   2. the attention the call will run is built (seqused_k = the key counts after the append, q = the
//      rotated copy when rotary is on) and its path chosen before anything is written, so a call that
//      fails writes nothing;
//   3. append: k_new (rotated) and v_new into the cache rows (rotary.hpp's rules, shared with append.cu);
//   4. the attention: attention_forward on the host; on the device, the chosen path's run (see
//      select_device_path for why not attention_forward itself).
// Host pointers run all of it on the CPU, synchronously. Device pointers: the key counts and the
// rotated q go to stream-ordered temporaries (cudaMallocAsync, freed with cudaFreeAsync after the
// attention), the kernels of append.cu fill them, and the inner call trusts them (its
// check_device_metadata off): no host synchronization, so the call can be captured in a CUDA graph.
#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "api/guard.hpp"
#include "api/memory.hpp"
#include "api/metadata_check.hpp"
#include "api/paths.hpp"
#include "api/slow_path.hpp"
#include "attention/mask.hpp"
#include "common/cuda_check.hpp"
#include "common/dtype.hpp"
#include "flashcore/flashcore.hpp"
#include "kvcache/append.hpp"
#include "kvcache/rotary.hpp"

namespace flashcore {
namespace {

template <class... Parts>
Status invalid(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return Status::InvalidArgument(os.str());
}

bool aligned_to(const void* ptr, size_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

bool has_query_rows(const AttentionParams& a) { return a.batch > 0 && a.seqlen_q > 0; }

// ---------------------------------------------------------------------------------------------
// Rules that read no memory
// ---------------------------------------------------------------------------------------------

Status check_attention_fields(const AttentionParams& a) {
  if (a.seqused_k != nullptr) {
    return invalid("attention.seqused_k: must be null in a KV-cache call (cache_seqlens gives each entry's keys)");
  }
  if (a.cu_seqlens_q != nullptr || a.cu_seqlens_k != nullptr) {
    return invalid("attention.cu_seqlens_q, attention.cu_seqlens_k: must be null (a KV-cache call is not varlen)");
  }
  const int dtype = static_cast<int>(a.dtype);
  if (dtype < static_cast<int>(DType::kFloat16) || dtype > static_cast<int>(DType::kFloat32)) {
    return invalid("dtype: must be one of fp16 (0), bf16 (1), fp32 (2) (got ", dtype, ")");
  }
  return Status::Ok();
}

Status check_new_keys(const KvCacheParams& p) {
  if ((p.k_new == nullptr) != (p.v_new == nullptr)) {
    return invalid("k_new, v_new: must be both set (append) or both null (got k_new=", p.k_new ? "set" : "null",
                   ", v_new=", p.v_new ? "set" : "null", ")");
  }
  if (p.seqlen_new < 0) return invalid("seqlen_new: must be >= 0 (got ", p.seqlen_new, ")");
  if (p.k_new == nullptr) {
    if (p.seqlen_new != 0) return invalid("seqlen_new: must be 0 without k_new (got ", p.seqlen_new, ")");
    return Status::Ok();
  }
  if (p.seqlen_new < 1) return invalid("seqlen_new: must be >= 1 when k_new is given (got ", p.seqlen_new, ")");
  if (p.cache_seqlens == nullptr) {
    return invalid("cache_seqlens: must be set when k_new is given (it says where each entry's new rows go)");
  }
  const struct {
    const char* name;
    int64_t value;
  } strides[] = {{"k_new_batch_stride", p.k_new_batch_stride}, {"k_new_seq_stride", p.k_new_seq_stride},
                 {"k_new_head_stride", p.k_new_head_stride},   {"v_new_batch_stride", p.v_new_batch_stride},
                 {"v_new_seq_stride", p.v_new_seq_stride},     {"v_new_head_stride", p.v_new_head_stride}};
  for (const auto& s : strides) {
    if (s.value < 0) return invalid(s.name, ": must be >= 0 (got ", s.value, ")");
  }
  const int elem = dtype_size(p.attention.dtype);
  if (!aligned_to(p.k_new, size_t(elem))) {
    return invalid("k_new: must be aligned to its element size (", elem, " bytes for ", dtype_name(p.attention.dtype),
                   ")");
  }
  if (!aligned_to(p.v_new, size_t(elem))) {
    return invalid("v_new: must be aligned to its element size (", elem, " bytes for ", dtype_name(p.attention.dtype),
                   ")");
  }
  return Status::Ok();
}

Status check_rotary(const KvCacheParams& p) {
  if ((p.rotary_cos == nullptr) != (p.rotary_sin == nullptr)) {
    return invalid("rotary_cos, rotary_sin: must be both set (rotary on) or both null (got rotary_cos=",
                   p.rotary_cos ? "set" : "null", ", rotary_sin=", p.rotary_sin ? "set" : "null", ")");
  }
  if (p.rotary_cos == nullptr) return Status::Ok();  // rotary_dim, rotary_len, rotary_interleaved ignored
  if (p.rotary_dim < 2 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.attention.head_dim_qk) {
    return invalid("rotary_dim: must be even and <= head_dim_qk = ", p.attention.head_dim_qk, ", and >= 2 (got ",
                   p.rotary_dim, ")");
  }
  if (p.rotary_len < 1) {
    return invalid("rotary_len: must be >= 1 (rows of rotary_cos / rotary_sin) (got ", p.rotary_len, ")");
  }
  const int elem = dtype_size(p.attention.dtype);
  if (!aligned_to(p.rotary_cos, size_t(elem))) {
    return invalid("rotary_cos: must be aligned to its element size (", elem, " bytes)");
  }
  if (!aligned_to(p.rotary_sin, size_t(elem))) {
    return invalid("rotary_sin: must be aligned to its element size (", elem, " bytes)");
  }
  return Status::Ok();
}

Status check_small_array_alignment(const KvCacheParams& p) {
  if (p.cache_seqlens != nullptr && !aligned_to(p.cache_seqlens, sizeof(int32_t))) {
    return invalid("cache_seqlens: must be 4-byte aligned (int32)");
  }
  if (p.attention.leftpad_k != nullptr && !aligned_to(p.attention.leftpad_k, sizeof(int32_t))) {
    return invalid("leftpad_k: must be 4-byte aligned (int32)");
  }
  return Status::Ok();
}

// Whether the call runs on the host: where q lives (the cache, when there is no q).
bool runs_on_host(const KvCacheParams& p) {
  const void* anchor = p.attention.q != nullptr ? p.attention.q : p.attention.k;
  return detail::is_host(detail::memory_of(anchor));
}

// The KV-cache arrays live on the side that runs the call (as validate() asks of cu_seqlens & co.).
// leftpad_k is here too: the host-side attention check below leaves it to these rules.
Status check_placement(const KvCacheParams& p, bool host) {
  const struct {
    const char* name;
    const void* ptr;
  } arrays[] = {{"cache_seqlens", p.cache_seqlens}, {"k_new", p.k_new},           {"v_new", p.v_new},
                {"rotary_cos", p.rotary_cos},       {"rotary_sin", p.rotary_sin}, {"leftpad_k", p.attention.leftpad_k}};
  for (const auto& a : arrays) {
    if (a.ptr == nullptr) continue;
    if (std::string why = detail::placement_problem(a.name, detail::memory_of(a.ptr), host); !why.empty()) {
      return Status::InvalidArgument(why);
    }
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Contents (src/api/validate.cpp's policy for cu_seqlens)
// ---------------------------------------------------------------------------------------------

// cache_seqlens, rotary positions, and the arrays of the attention whose rules depend on the key
// counts after the append (validate() saw them with no keys: see validate_kvcache_impl).
Status check_contents(const KvCacheParams& p, cudaStream_t stream) {
  const AttentionParams& a = p.attention;
  const int64_t n = a.batch;
  std::vector<int32_t> lens, leftpad, batch_idx, table;
  std::vector<detail::SmallArray> arrays;
  if (p.cache_seqlens != nullptr) arrays.push_back({p.cache_seqlens, n, &lens});
  if (a.leftpad_k != nullptr) arrays.push_back({a.leftpad_k, n, &leftpad});
  if (a.kv_batch_idx != nullptr) arrays.push_back({a.kv_batch_idx, n, &batch_idx});
  if (a.is_paged()) arrays.push_back({a.block_table, (n - 1) * a.block_table_batch_stride + a.pages_per_seq, &table});
  if (arrays.empty() && p.rotary_cos == nullptr) return Status::Ok();
  bool available = true;
  FC_RETURN_IF_ERROR(detail::read_small_arrays(arrays, stream, a.check_device_metadata, &available));
  if (!available) return Status::Ok();  // unchecked: the kernels clamp (rotary.hpp)

  for (int b = 0; b < a.batch; ++b) {
    const int64_t cached = p.cache_seqlens != nullptr ? int64_t(lens[size_t(b)]) : int64_t(a.seqlen_k);
    const int64_t end = cached + p.seqlen_new;  // the keys after the append
    if (p.cache_seqlens != nullptr) {
      if (cached < 0) return invalid("cache_seqlens[", b, "]: must be >= 0 (got ", cached, ")");
      if (end > a.seqlen_k) {
        return invalid("cache_seqlens[", b, "]: cache_seqlens[", b, "] + seqlen_new must be <= seqlen_k = ", a.seqlen_k,
                       ", the cache capacity (got ", cached, " + ", p.seqlen_new, " = ", end, ")");
      }
    }
    if (p.rotary_cos != nullptr) {
      if (p.k_new != nullptr && end - 1 >= p.rotary_len) {
        return invalid("rotary_len: entry ", b, "'s new keys reach position ", end - 1, " (cache_seqlens[", b,
                       "] + seqlen_new - 1), past the rotary table (got rotary_len = ", p.rotary_len, ")");
      }
      const bool advance = kvcache::queries_advance(a);
      const int64_t q_last = cached + (advance ? a.seqlen_q - 1 : 0);
      if (q_last >= p.rotary_len) {
        return invalid("rotary_len: entry ", b, "'s queries reach position ", q_last,
                       advance ? " (cache_seqlens[b] + seqlen_q - 1, causal or windowed)" : " (cache_seqlens[b])",
                       ", past the rotary table (got rotary_len = ", p.rotary_len, ")");
      }
    }
    if (!leftpad.empty() && (leftpad[size_t(b)] < 0 || leftpad[size_t(b)] > end)) {
      return invalid("leftpad_k[", b, "]: must be in [0, ", end, "] (cache_seqlens[", b,
                     "] + seqlen_new, the end of the entry's keys) (got ", leftpad[size_t(b)], ")");
    }
    if (!batch_idx.empty() && (batch_idx[size_t(b)] < 0 || batch_idx[size_t(b)] >= a.kv_batch)) {
      return invalid("kv_batch_idx[", b, "]: must be in [0, kv_batch = ", a.kv_batch, ") (got ", batch_idx[size_t(b)],
                     ")");
    }
    if (a.is_paged()) {  // the pages holding rows [0, end): read by the attention, written by the append
      const int64_t pages_used = (end + a.page_size - 1) / a.page_size;
      for (int64_t slot = 0; slot < pages_used; ++slot) {
        const int32_t page = table[size_t(b * a.block_table_batch_stride + slot)];
        if (page < 0 || page >= a.num_pages) {
          return invalid("block_table[", b, "][", slot, "]: must be a page in [0, num_pages = ", a.num_pages, ") (got ",
                         page, ")");
        }
      }
    }
  }
  return Status::Ok();
}

Status validate_kvcache_impl(const KvCacheParams& p, cudaStream_t stream) {
  const AttentionParams& a = p.attention;
  FC_RETURN_IF_ERROR(check_attention_fields(a));
  FC_RETURN_IF_ERROR(check_new_keys(p));
  FC_RETURN_IF_ERROR(check_rotary(p));
  FC_RETURN_IF_ERROR(check_small_array_alignment(p));

  // The attention's own rules, before any key count exists: on the host with zero keys per entry
  // and no left padding (so validate() checks no table page and no padding against a count it does
  // not know; check_contents does, against the counts after the append); on the device without
  // reading any array (check_contents reads them, with one sync for all).
  AttentionParams shape = a;
  std::vector<int32_t> no_keys;
  const bool host = has_query_rows(a) && runs_on_host(p);
  if (host) {
    no_keys.assign(size_t(a.batch), 0);
    shape.seqused_k = no_keys.data();
    shape.leftpad_k = nullptr;
  } else {
    shape.check_device_metadata = false;
  }
  FC_RETURN_IF_ERROR(validate(shape, stream));
  if (!has_query_rows(a)) return Status::Ok();  // an empty call reads and writes nothing
  FC_RETURN_IF_ERROR(check_placement(p, host));
  return check_contents(p, stream);
}

// ---------------------------------------------------------------------------------------------
// The call
// ---------------------------------------------------------------------------------------------

// The attention over the cache after the append: `keys` as seqused_k (null: the whole cache), q
// replaced by `q_rot` (dense [B, Sq, Hq, Dqk]) when rotary is on.
AttentionParams inner_call(const KvCacheParams& p, const int32_t* keys, const void* q_rot) {
  AttentionParams inner = p.attention;
  inner.seqused_k = keys;
  if (q_rot != nullptr) {
    inner.q = q_rot;
    inner.q_head_stride = inner.head_dim_qk;
    inner.q_seq_stride = int64_t(inner.heads_q) * inner.head_dim_qk;
    inner.q_batch_stride = int64_t(inner.seqlen_q) * inner.q_seq_stride;
  }
  return inner;
}

// Whether attention_forward will accept the call: checked before the cache is written.
Status preflight(const AttentionParams& inner, cudaStream_t stream) {
  FC_RETURN_IF_ERROR(validate(inner, stream));
  KernelPath chosen{};
  return select_path(inner, &chosen);
}

// dst[0, dim) from src (host memory, the call's dtype): rotary.hpp's rotation of the first rotary_dim
// features by cos/sin row `pos` when `rotary`, the rest copied bit for bit.
void write_row_host(const KvCacheParams& p, const uint8_t* src, uint8_t* dst, int dim, bool rotary, int64_t pos) {
  const DType dtype = p.attention.dtype;
  const int elem = dtype_size(dtype);
  const int64_t cs = pos * (p.rotary_dim / 2);
  for (int d = 0; d < dim; ++d) {
    if (rotary && d < p.rotary_dim) {
      const kvcache::RotaryPair r = kvcache::rotary_pair(d, p.rotary_dim, p.rotary_interleaved);
      const float value = kvcache::rotate(load_as_float(src, d, dtype), load_as_float(src, r.partner, dtype),
                                          load_as_float(p.rotary_cos, cs + r.m, dtype),
                                          load_as_float(p.rotary_sin, cs + r.m, dtype), r.first);
      store_from_float(dst, d, value, dtype);
    } else {
      std::memcpy(dst + int64_t(d) * elem, src + int64_t(d) * elem, size_t(elem));
    }
  }
}

void append_on_host(const KvCacheParams& p) {
  const AttentionParams& a = p.attention;
  const int elem = dtype_size(a.dtype);
  const bool rotary = p.rotary_cos != nullptr;
  auto* k_cache = static_cast<uint8_t*>(const_cast<void*>(a.k));
  auto* v_cache = static_cast<uint8_t*>(const_cast<void*>(a.v));
  for (int b = 0; b < a.batch; ++b) {
    for (int i = 0; i < p.seqlen_new; ++i) {
      const int64_t row = kvcache::cached_rows(p, b) + i;
      if (!kvcache::new_key_written(p, row)) continue;
      for (int h = 0; h < a.heads_kv; ++h) {
        const int64_t k_src = b * p.k_new_batch_stride + i * p.k_new_seq_stride + h * p.k_new_head_stride;
        const int64_t v_src = b * p.v_new_batch_stride + i * p.v_new_seq_stride + h * p.v_new_head_stride;
        const int64_t k_dst = attn::kv_row_offset(a, a.k_batch_stride, a.k_seq_stride, a.k_head_stride, b, row, h);
        const int64_t v_dst = attn::kv_row_offset(a, a.v_batch_stride, a.v_seq_stride, a.v_head_stride, b, row, h);
        write_row_host(p, static_cast<const uint8_t*>(p.k_new) + k_src * elem, k_cache + k_dst * elem, a.head_dim_qk,
                       rotary, row);
        write_row_host(p, static_cast<const uint8_t*>(p.v_new) + v_src * elem, v_cache + v_dst * elem, a.head_dim_v,
                       false, 0);
      }
    }
  }
}

Status run_on_host(const KvCacheParams& p) {
  const AttentionParams& a = p.attention;
  std::vector<int32_t> keys;
  if (p.cache_seqlens != nullptr) {
    keys.resize(size_t(a.batch));
    for (int b = 0; b < a.batch; ++b) keys[size_t(b)] = kvcache::keys_after_append(p, b);
  }
  std::vector<uint8_t> q_rot;
  if (p.rotary_cos != nullptr) {
    const int elem = dtype_size(a.dtype);
    q_rot.resize(size_t(a.batch) * a.seqlen_q * a.heads_q * a.head_dim_qk * elem);
    int64_t row = 0;  // (b * Sq + i) * Hq + h
    for (int b = 0; b < a.batch; ++b) {
      for (int i = 0; i < a.seqlen_q; ++i) {
        for (int h = 0; h < a.heads_q; ++h, ++row) {
          const int64_t src = b * a.q_batch_stride + i * a.q_seq_stride + h * a.q_head_stride;
          write_row_host(p, static_cast<const uint8_t*>(a.q) + src * elem, q_rot.data() + row * a.head_dim_qk * elem,
                         a.head_dim_qk, true, kvcache::query_position(p, b, i));
        }
      }
    }
  }
  const AttentionParams inner =
      inner_call(p, keys.empty() ? nullptr : keys.data(), q_rot.empty() ? nullptr : q_rot.data());
  FC_RETURN_IF_ERROR(preflight(inner, nullptr));
  if (p.k_new != nullptr) append_on_host(p);
  return attention_forward(inner, nullptr);
}

// Stream-ordered temporaries, freed on the stream (after the work queued before the free) when the
// call returns, whatever its outcome.
class StreamTemporaries {
 public:
  explicit StreamTemporaries(cudaStream_t stream) : stream_(stream) {}
  ~StreamTemporaries() {
    for (void* ptr : ptrs_) cudaFreeAsync(ptr, stream_);
  }
  StreamTemporaries(const StreamTemporaries&) = delete;
  StreamTemporaries& operator=(const StreamTemporaries&) = delete;

  Status allocate(size_t bytes, void** out) {
    FC_CUDA_RETURN(cudaMallocAsync(out, bytes, stream_));
    ptrs_.push_back(*out);
    return Status::Ok();
  }

 private:
  cudaStream_t stream_;
  std::vector<void*> ptrs_;
};

// attention_forward's dispatch for the inner device call, minus what it cannot do there: the inner
// call's q (rotary) and seqused_k are stream-ordered temporaries, which cudaPointerGetAttributes
// does not recognize while the stream captures a graph (their memory exists only once the graph
// runs), so validate() and dispatch's placement query would take them for host memory. The call was
// validated as the caller wrote it (validate_kvcache_impl: the same tensors, seqused_k and q aside),
// the device facts come from the caller's tensors, and dispatch's own selection picks the path.
Status select_device_path(const KvCacheParams& p, const AttentionParams& inner, detail::DeviceInfo* info,
                          detail::PathOps* chosen) {
  FC_RETURN_IF_ERROR(detail::query_device(p.attention, info));
  std::string refusals;
  FC_RETURN_IF_ERROR(detail::select_path(inner, *info, chosen, &refusals));
  if (detail::fell_back_to_naive(inner, chosen->path)) {
    FC_RETURN_IF_ERROR(detail::slow_path_notice("attention_with_kvcache", refusals));
  }
  return Status::Ok();
}

Status run_on_device(const KvCacheParams& p, cudaStream_t stream) {
  const AttentionParams& a = p.attention;
  StreamTemporaries temps(stream);
  // The key counts: with no new keys they are cache_seqlens itself, which the kernels clamp into
  // [0, seqlen_k] as seqused_k (attn::sequence_extent), the clamp keys_after_append applies; with new
  // keys, a temporary the prepare kernel fills.
  const int32_t* keys = p.seqlen_new == 0 ? p.cache_seqlens : nullptr;
  void* computed_keys = nullptr;
  void* q_rot = nullptr;
  if (p.cache_seqlens != nullptr && p.seqlen_new > 0) {
    FC_RETURN_IF_ERROR(temps.allocate(size_t(a.batch) * sizeof(int32_t), &computed_keys));
    keys = static_cast<const int32_t*>(computed_keys);
  }
  if (p.rotary_cos != nullptr) {
    const size_t bytes = size_t(a.batch) * a.seqlen_q * a.heads_q * a.head_dim_qk * dtype_size(a.dtype);
    FC_RETURN_IF_ERROR(temps.allocate(bytes, &q_rot));
  }
  AttentionParams inner = inner_call(p, keys, q_rot);
  // validate_kvcache read the contents where it could; the key counts are clamped into the cache.
  inner.check_device_metadata = false;
  detail::DeviceInfo info;
  detail::PathOps ops{};
  FC_RETURN_IF_ERROR(select_device_path(p, inner, &info, &ops));  // before anything is written
  // One kernel before the attention at most (none for a plain decode step over cache_seqlens).
  FC_RETURN_IF_ERROR(kvcache::launch_prepare(p, static_cast<int32_t*>(computed_keys), q_rot, stream));
  return ops.run(inner, info, stream);
}

}  // namespace

Status validate_kvcache(const KvCacheParams& params, cudaStream_t stream) {
  return detail::status_guard("validate_kvcache", [&]() -> Status {
    return validate_kvcache_impl(params, stream);
  });
}

Status attention_with_kvcache(const KvCacheParams& params, cudaStream_t stream) {
  return detail::status_guard("attention_with_kvcache", [&]() -> Status {
    FC_RETURN_IF_ERROR(detail::take_deferred_error());
    FC_RETURN_IF_ERROR(validate_kvcache_impl(params, stream));
    if (!has_query_rows(params.attention)) return Status::Ok();  // an empty call reads and writes nothing
    return runs_on_host(params) ? run_on_host(params) : run_on_device(params, stream);
  });
}

}  // namespace flashcore
