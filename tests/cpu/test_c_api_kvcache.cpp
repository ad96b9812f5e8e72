// The C ABI of the KV cache (fc_kvcache_params, fc_attention_with_kvcache) and of the KV-cache fields
// of fc_attention_params: defaults, the struct-size and flag checks, and a paged, batch-indexed and
// left-padded call through the C ABI writing the same bytes as the same call through the C++ API.
// Host pointers only; runs without a GPU.
#include "flashcore/flashcore.h"

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/kvcache_case.hpp"
#include "flashcore/flashcore.hpp"

namespace {

using namespace flashcore::testing::kv;

// The C struct describing the same call as f.params (built field by field, independently of c_api.cpp).
fc_kvcache_params to_c(const Fixture& f) {
  fc_kvcache_params c;
  EXPECT_EQ(fc_kvcache_params_init(&c), FC_STATUS_OK);
  const flashcore::AttentionParams& a = f.params.attention;
  fc_attention_params& ca = c.attention;
  ca.q = a.q, ca.k = a.k, ca.v = a.v, ca.o = a.o, ca.lse = a.lse;
  ca.q_batch_stride = a.q_batch_stride, ca.q_seq_stride = a.q_seq_stride, ca.q_head_stride = a.q_head_stride;
  ca.k_batch_stride = a.k_batch_stride, ca.k_seq_stride = a.k_seq_stride, ca.k_head_stride = a.k_head_stride;
  ca.v_batch_stride = a.v_batch_stride, ca.v_seq_stride = a.v_seq_stride, ca.v_head_stride = a.v_head_stride;
  ca.o_batch_stride = a.o_batch_stride, ca.o_seq_stride = a.o_seq_stride, ca.o_head_stride = a.o_head_stride;
  ca.lse_batch_stride = a.lse_batch_stride, ca.lse_head_stride = a.lse_head_stride;
  ca.batch = a.batch, ca.seqlen_q = a.seqlen_q, ca.seqlen_k = a.seqlen_k;
  ca.heads_q = a.heads_q, ca.heads_kv = a.heads_kv, ca.head_dim_qk = a.head_dim_qk, ca.head_dim_v = a.head_dim_v;
  ca.dtype = static_cast<int32_t>(a.dtype);
  ca.causal = a.causal ? 1 : 0;
  ca.window_left = a.window_left, ca.window_right = a.window_right;
  ca.block_table = a.block_table, ca.block_table_batch_stride = a.block_table_batch_stride;
  ca.pages_per_seq = a.pages_per_seq, ca.page_size = a.page_size, ca.num_pages = a.num_pages;
  ca.kv_batch_idx = a.kv_batch_idx, ca.kv_batch = a.kv_batch;
  ca.leftpad_k = a.leftpad_k;
  const flashcore::KvCacheParams& p = f.params;
  c.cache_seqlens = p.cache_seqlens;
  c.k_new = p.k_new, c.v_new = p.v_new, c.seqlen_new = p.seqlen_new;
  c.k_new_batch_stride = p.k_new_batch_stride, c.k_new_seq_stride = p.k_new_seq_stride;
  c.k_new_head_stride = p.k_new_head_stride;
  c.v_new_batch_stride = p.v_new_batch_stride, c.v_new_seq_stride = p.v_new_seq_stride;
  c.v_new_head_stride = p.v_new_head_stride;
  c.rotary_cos = p.rotary_cos, c.rotary_sin = p.rotary_sin;
  c.rotary_dim = p.rotary_dim, c.rotary_len = p.rotary_len, c.rotary_interleaved = p.rotary_interleaved ? 1 : 0;
  return c;
}

// The same call through both APIs must write the same caches and output.
void expect_c_matches_cpp(const KvCase& kc) {
  SCOPED_TRACE(kc.describe());
  Fixture via_cpp, via_c;
  make_fixture(kc, via_cpp);
  make_fixture(kc, via_c);
  const flashcore::Status st = flashcore::attention_with_kvcache(via_cpp.params);
  ASSERT_TRUE(st.ok()) << st.message;
  const fc_kvcache_params c = to_c(via_c);
  ASSERT_EQ(fc_attention_with_kvcache(&c, nullptr), FC_STATUS_OK) << fc_last_error_message();
  EXPECT_EQ(count_differences(via_c.k_store, via_cpp.k_store), 0);
  EXPECT_EQ(count_differences(via_c.v_store, via_cpp.v_store), 0);
  EXPECT_EQ(count_differences(via_c.o, via_cpp.o), 0);
  EXPECT_EQ(std::memcmp(via_c.lse.data(), via_cpp.lse.data(), via_c.lse.size() * sizeof(float)), 0);
}

TEST(CApiKvCache, ParamsInitSetsDefaults) {
  fc_kvcache_params p;
  std::memset(&p, 0x5a, sizeof(p));
  ASSERT_EQ(fc_kvcache_params_init(&p), FC_STATUS_OK);
  EXPECT_EQ(p.struct_size, sizeof(fc_kvcache_params));
  EXPECT_EQ(p.attention.struct_size, sizeof(fc_attention_params));
  EXPECT_EQ(p.attention.window_left, FC_WINDOW_INFINITE);
  EXPECT_EQ(p.attention.check_device_metadata, 1);
  EXPECT_EQ(p.attention.block_table, nullptr);
  EXPECT_EQ(p.attention.block_table_batch_stride, 0);
  EXPECT_EQ(p.attention.pages_per_seq, 0);
  EXPECT_EQ(p.attention.page_size, 0);
  EXPECT_EQ(p.attention.num_pages, 0);
  EXPECT_EQ(p.attention.kv_batch_idx, nullptr);
  EXPECT_EQ(p.attention.kv_batch, 0);
  EXPECT_EQ(p.attention.leftpad_k, nullptr);
  EXPECT_EQ(p.cache_seqlens, nullptr);
  EXPECT_EQ(p.k_new, nullptr);
  EXPECT_EQ(p.seqlen_new, 0);
  EXPECT_EQ(p.k_new_seq_stride, 0);
  EXPECT_EQ(p.rotary_cos, nullptr);
  EXPECT_EQ(p.rotary_dim, 0);
  EXPECT_EQ(p.rotary_interleaved, 0);
  EXPECT_EQ(fc_kvcache_params_init(nullptr), FC_STATUS_INVALID_ARGUMENT);
}

TEST(CApiKvCache, ParamsInitZeroesTheKvCacheFieldsOfAttentionParams) {
  fc_attention_params p;
  std::memset(&p, 0x5a, sizeof(p));
  ASSERT_EQ(fc_params_init(&p), FC_STATUS_OK);
  EXPECT_EQ(p.block_table, nullptr);
  EXPECT_EQ(p.block_table_batch_stride, 0);
  EXPECT_EQ(p.pages_per_seq, 0);
  EXPECT_EQ(p.page_size, 0);
  EXPECT_EQ(p.num_pages, 0);
  EXPECT_EQ(p.kv_batch_idx, nullptr);
  EXPECT_EQ(p.kv_batch, 0);
  EXPECT_EQ(p.leftpad_k, nullptr);
  EXPECT_EQ(FC_PATH_DECODE, static_cast<int>(flashcore::KernelPath::kDecode));
}

TEST(CApiKvCache, PagedCallWithRotaryMatchesTheCppApi) {
  KvCase c;
  c.batch = 3;
  c.layout = CacheLayout::kPaged;
  c.page_size = 16;
  c.capacity = 40;
  c.cache_seqlens = {14, 30, 0};
  c.leftpad = {2, 0, 0};
  c.seqlen_new = 4, c.seqlen_q = 4;
  c.causal = true;
  c.rotary_dim = 32;
  c.interleaved = true;
  expect_c_matches_cpp(c);
}

TEST(CApiKvCache, BatchIndexedCallMatchesTheCppApi) {
  KvCase c;
  c.layout = CacheLayout::kBatchIndexed;
  c.cache_seqlens = {7, 1};
  c.seqlen_new = 1;
  expect_c_matches_cpp(c);
}

TEST(CApiKvCache, AttentionParamsCarryTheKvCacheFields) {
  // fc_attention_forward over a paged cache (no append): the table reaches the C++ call.
  KvCase c;
  c.layout = CacheLayout::kPaged;
  c.cache_seqlens = {20, 33};
  c.seqlen_new = 0;
  Fixture via_cpp, via_c;
  make_fixture(c, via_cpp);
  make_fixture(c, via_c);
  std::vector<int32_t> used = {20, 33};
  flashcore::AttentionParams a = via_cpp.params.attention;
  a.seqused_k = used.data();
  ASSERT_TRUE(flashcore::attention_forward(a).ok());
  fc_kvcache_params ck = to_c(via_c);
  ck.attention.seqused_k = used.data();
  ASSERT_EQ(fc_attention_forward(&ck.attention, nullptr), FC_STATUS_OK) << fc_last_error_message();
  EXPECT_EQ(count_differences(via_c.o, via_cpp.o), 0);
}

TEST(CApiKvCache, RejectsAWrongStructSizeAndFlag) {
  KvCase c;
  c.cache_seqlens = {1, 2};
  Fixture f;
  make_fixture(c, f);
  fc_kvcache_params p = to_c(f);
  p.struct_size = sizeof(fc_kvcache_params) - 8;
  EXPECT_EQ(fc_attention_with_kvcache(&p, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("fc_kvcache_params_init"), std::string::npos);
  p = to_c(f);
  p.rotary_interleaved = 2;
  EXPECT_EQ(fc_attention_with_kvcache(&p, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("rotary_interleaved"), std::string::npos);
  p = to_c(f);
  p.v_new = nullptr;
  EXPECT_EQ(fc_attention_with_kvcache(&p, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("k_new, v_new"), std::string::npos);
  EXPECT_EQ(fc_attention_with_kvcache(nullptr, nullptr), FC_STATUS_INVALID_ARGUMENT);
}

}  // namespace
