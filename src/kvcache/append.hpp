// attention_with_kvcache's device work (append.cu), launched by kvcache.cpp on device pointers.
// Every launch is stream-ordered and never synchronizes the host, so a decode step can be captured
// in a CUDA graph. The per-element rules are those of rotary.hpp, shared with the host implementation.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "flashcore/flashcore.hpp"

namespace flashcore::kvcache {

// One launch (none when there is nothing to do): keys[b] = keys_after_append(p, b) for every entry
// when keys is not null (cache_seqlens must be set); q rotated into q_rot, a dense [batch, seqlen_q,
// heads_q, head_dim_qk] tensor of the call's dtype, when q_rot is not null; and, when k_new is set,
// k_new (rotated when rotary is on) and v_new written into cache rows [cached_rows(b),
// cached_rows(b) + seqlen_new) of every entry, skipping the rows new_key_written() rejects.
Status launch_prepare(const KvCacheParams& p, int32_t* keys, void* q_rot, cudaStream_t stream);

}  // namespace flashcore::kvcache
