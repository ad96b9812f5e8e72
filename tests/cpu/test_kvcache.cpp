// attention_with_kvcache on host pointers (the CPU implementation): the append (k_new rotated, v_new
// copied) into dense, batch-indexed and paged caches, checked byte for byte against a cache written by
// hand (every other byte of the storage unchanged), and the attention checked against the CPU
// reference over a dense slice of that cache (tests/cpu/kvcache_case.hpp); left padding, rotary
// (interleaved and GPT-NeoX, query positions with and without causal/window), GQA, seqlen_new 0/1/4,
// and every validation rule of KvCacheParams (nothing written on error).
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/kvcache_case.hpp"
#include "flashcore/flashcore.hpp"

namespace {

using flashcore::DType;
using flashcore::Status;
using flashcore::StatusCode;
using namespace flashcore::testing::kv;

double output_tolerance(DType dtype) { return dtype == DType::kFloat32 ? 1e-6 : 4e-3; }

// Runs the case on the host and checks the caches and the output.
void expect_case_matches(const KvCase& kc) {
  SCOPED_TRACE(kc.describe());
  Fixture f;
  make_fixture(kc, f);
  std::vector<uint8_t> k_expected, v_expected;
  expected_caches(f, &k_expected, &v_expected);
  std::vector<double> o_ref, lse_ref;
  const Status ref = expected_attention(f, &o_ref, &lse_ref);
  ASSERT_TRUE(ref.ok()) << ref.message;

  ASSERT_TRUE(flashcore::validate_kvcache(f.params).ok());
  const Status st = flashcore::attention_with_kvcache(f.params);
  ASSERT_TRUE(st.ok()) << st.message;

  EXPECT_EQ(count_differences(f.k_store, k_expected), 0) << "k cache bytes differ from the hand-written append";
  EXPECT_EQ(count_differences(f.v_store, v_expected), 0) << "v cache bytes differ from the hand-written append";
  const MaxAbs o_err = max_abs_error(to_doubles(f.o, kc.dtype), o_ref);
  EXPECT_LE(o_err.error, output_tolerance(kc.dtype) * std::max(1.0, o_err.ref)) << "o max-abs error";
  const std::vector<double> lse(f.lse.begin(), f.lse.end());
  const MaxAbs lse_err = max_abs_error(lse, lse_ref);
  EXPECT_LE(lse_err.error, 1e-5 * std::max(1.0, lse_err.ref)) << "lse max-abs error";
}

KvCase paged_case(int page_size) {
  KvCase c;
  c.batch = 3;
  c.heads_q = 4, c.heads_kv = 2;
  c.layout = CacheLayout::kPaged;
  c.page_size = page_size;
  c.capacity = 2 * page_size + 5;  // three pages per sequence
  c.cache_seqlens = {page_size - 2, 2 * page_size - 1, 0};  // appends that cross a page boundary
  c.seqlen_new = 4;
  c.seqlen_q = 4;
  c.causal = true;
  c.seed = uint64_t(page_size);
  return c;
}

// ---- the append and the attention ------------------------------------------------------------

TEST(KvCache, DenseCacheAppendsOneTokenAndAttendsOverTheCachedRowsAndIt) {
  KvCase c;
  c.heads_q = 4, c.heads_kv = 2;  // GQA
  c.cache_seqlens = {5, 17};
  expect_case_matches(c);
}

TEST(KvCache, DenseCacheAppendsFourTokensUnderACausalMask) {
  KvCase c;
  c.cache_seqlens = {0, 30};
  c.seqlen_new = 4, c.seqlen_q = 4;
  c.causal = true;
  expect_case_matches(c);
}

TEST(KvCache, WithoutNewKeysAttendsTheCachedRowsOnly) {
  KvCase c;
  c.cache_seqlens = {0, 12};  // entry 0 has no key: o = 0, lse = -inf
  c.seqlen_new = 0;
  c.seqlen_q = 2;
  expect_case_matches(c);
}

TEST(KvCache, NullCacheSeqlensAttendsTheWholeCache) {
  KvCase c;
  c.seqlen_new = 0;
  c.capacity = 24;
  expect_case_matches(c);
}

TEST(KvCache, BatchIndexedCacheWritesAndReadsTheIndexedRows) {
  KvCase c;
  c.batch = 3;
  c.layout = CacheLayout::kBatchIndexed;
  c.cache_seqlens = {3, 20, 9};
  c.seqlen_new = 4;
  c.dtype = DType::kBFloat16;
  expect_case_matches(c);
}

TEST(KvCache, PagedCacheWithShuffledPagesOf16Rows) { expect_case_matches(paged_case(16)); }
TEST(KvCache, PagedCacheWithShuffledPagesOf64Rows) { expect_case_matches(paged_case(64)); }
TEST(KvCache, PagedCacheWithShuffledPagesOf256Rows) { expect_case_matches(paged_case(256)); }

TEST(KvCache, PagedCacheAppendsOneTokenToGqaHeads) {
  KvCase c = paged_case(16);
  c.seqlen_new = 1, c.seqlen_q = 1, c.causal = false;
  c.heads_q = 6, c.heads_kv = 2;
  expect_case_matches(c);
}

TEST(KvCache, UnusedBlockTableEntriesAreNeitherCheckedNorRead) {
  KvCase c = paged_case(16);
  Fixture f;
  make_fixture(c, f);
  // Entry 2 ends at row 4: its second and third pages are unused.
  f.block_table[size_t(2 * f.table_stride + 1)] = -1;
  f.block_table[size_t(2 * f.table_stride + 2)] = f.num_pages;
  const Status st = flashcore::attention_with_kvcache(f.params);
  EXPECT_TRUE(st.ok()) << st.message;
}

TEST(KvCache, LeftPaddingStartsEachEntrysKeysAtItsPad) {
  KvCase c;
  c.batch = 3;
  c.cache_seqlens = {10, 4, 7};
  c.leftpad = {3, 0, 7};  // entry 2: only the new keys
  c.seqlen_new = 2, c.seqlen_q = 2;
  c.causal = true;
  expect_case_matches(c);
}

TEST(KvCache, LeftPaddingOnAPagedCache) {
  KvCase c = paged_case(16);
  c.leftpad = {5, 17, 0};
  expect_case_matches(c);
}

TEST(KvCache, RotaryNeoxRotatesNewKeysAtTheirRowsAndQueriesAtTheCacheEnd) {
  KvCase c;
  c.cache_seqlens = {6, 21};
  c.seqlen_new = 4, c.seqlen_q = 3;  // not causal: every query takes position cache_seqlens[b]
  c.rotary_dim = 32;
  expect_case_matches(c);
}

TEST(KvCache, RotaryInterleavedUnderACausalMaskAdvancesQueryPositions) {
  KvCase c;
  c.cache_seqlens = {6, 21};
  c.seqlen_new = 4, c.seqlen_q = 4;
  c.causal = true;
  c.rotary_dim = 32;
  c.interleaved = true;
  expect_case_matches(c);
}

TEST(KvCache, RotaryOverTheWholeHeadDimOnAPagedBf16Cache) {
  KvCase c = paged_case(16);
  c.dtype = DType::kBFloat16;
  c.rotary_dim = 64;
  c.interleaved = true;
  expect_case_matches(c);
}

TEST(KvCache, RotaryWithASlidingWindowAdvancesQueryPositions) {
  KvCase c;
  c.cache_seqlens = {9, 2};
  c.seqlen_new = 1, c.seqlen_q = 3;
  c.window_left = 5;
  c.rotary_dim = 16;
  expect_case_matches(c);
}

TEST(KvCache, RotaryWithoutAppendOnABatchIndexedCache) {
  KvCase c;
  c.layout = CacheLayout::kBatchIndexed;
  c.cache_seqlens = {11, 25};
  c.seqlen_new = 0, c.seqlen_q = 2;
  c.causal = true;
  c.rotary_dim = 64;
  expect_case_matches(c);
}

TEST(KvCache, Fp32CacheWithRotaryAndLeftPadding) {
  KvCase c;
  c.dtype = DType::kFloat32;
  c.heads_q = 4, c.heads_kv = 1;  // MQA
  c.head_dim_qk = 32, c.head_dim_v = 48;
  c.cache_seqlens = {8, 3};
  c.leftpad = {2, 1};
  c.seqlen_new = 4, c.seqlen_q = 4;
  c.causal = true;
  c.rotary_dim = 16;
  expect_case_matches(c);
}

TEST(KvCache, EmptyCallWritesNothing) {
  KvCase c;
  c.cache_seqlens = {3, 4};
  c.seqlen_new = 2;
  Fixture f;
  make_fixture(c, f);
  const std::vector<uint8_t> k_before = f.k_store;
  f.params.attention.seqlen_q = 0;
  ASSERT_TRUE(flashcore::attention_with_kvcache(f.params).ok());
  EXPECT_EQ(count_differences(f.k_store, k_before), 0);
}

// ---- validation: each rule, its message, and nothing written --------------------------------

// A valid paged call with rotary and an append, then `mutate`, must fail with `code` and a message
// containing `needle`, from validate_kvcache and attention_with_kvcache alike, leaving k, v, o as
// they were.
void expect_rejected(const std::function<void(Fixture&)>& mutate, const std::string& needle,
                     StatusCode code = StatusCode::kInvalidArgument, CacheLayout layout = CacheLayout::kPaged) {
  KvCase c = paged_case(16);
  c.layout = layout;
  c.rotary_dim = 32;
  Fixture f;
  make_fixture(c, f);
  mutate(f);
  const std::vector<uint8_t> k = f.k_store, v = f.v_store, o = f.o;
  const Status checked = flashcore::validate_kvcache(f.params);
  const Status st = flashcore::attention_with_kvcache(f.params);
  EXPECT_EQ(st.code, code) << st.message;
  EXPECT_NE(st.message.find(needle), std::string::npos) << "message: " << st.message << "\nexpected: " << needle;
  if (code == StatusCode::kInvalidArgument) EXPECT_EQ(checked.message, st.message);
  if (code == StatusCode::kOk) return;
  EXPECT_EQ(count_differences(f.k_store, k), 0) << "k written by a failing call";
  EXPECT_EQ(count_differences(f.v_store, v), 0) << "v written by a failing call";
  EXPECT_EQ(count_differences(f.o, o), 0) << "o written by a failing call";
}

TEST(KvCacheValidation, TheValidBaseCallPasses) {
  expect_rejected([](Fixture&) {}, "", StatusCode::kOk);
}

TEST(KvCacheValidation, SequsedKMustBeNull) {
  std::vector<int32_t> used = {1, 1, 1};
  expect_rejected([&](Fixture& f) { f.params.attention.seqused_k = used.data(); }, "attention.seqused_k: must be null");
}

TEST(KvCacheValidation, VarlenIsRejected) {
  std::vector<int32_t> cu = {0, 4, 8, 12};
  expect_rejected([&](Fixture& f) {
    f.params.attention.cu_seqlens_q = cu.data();
    f.params.attention.cu_seqlens_k = cu.data();
  }, "not varlen");
}

TEST(KvCacheValidation, KNewAndVNewComeTogether) {
  expect_rejected([](Fixture& f) { f.params.v_new = nullptr; }, "k_new, v_new: must be both set");
  expect_rejected([](Fixture& f) { f.params.k_new = nullptr; }, "k_new, v_new: must be both set");
}

TEST(KvCacheValidation, SeqlenNewIsNonNegativeAndMatchesKNew) {
  expect_rejected([](Fixture& f) { f.params.seqlen_new = -1; }, "seqlen_new: must be >= 0 (got -1)");
  expect_rejected([](Fixture& f) { f.params.seqlen_new = 0; }, "seqlen_new: must be >= 1 when k_new is given");
  expect_rejected([](Fixture& f) {
    f.params.k_new = f.params.v_new = nullptr;
  }, "seqlen_new: must be 0 without k_new");
}

TEST(KvCacheValidation, KNewNeedsCacheSeqlens) {
  expect_rejected([](Fixture& f) { f.params.cache_seqlens = nullptr; }, "cache_seqlens: must be set when k_new");
}

TEST(KvCacheValidation, NewKeyStridesAreNonNegative) {
  expect_rejected([](Fixture& f) { f.params.k_new_seq_stride = -1; }, "k_new_seq_stride: must be >= 0 (got -1)");
  expect_rejected([](Fixture& f) { f.params.v_new_head_stride = -64; }, "v_new_head_stride: must be >= 0");
}

TEST(KvCacheValidation, NewKeysAreElementAligned) {
  expect_rejected([](Fixture& f) { f.params.k_new = f.k_new.data() + 1; }, "k_new: must be aligned");
  expect_rejected([](Fixture& f) { f.params.v_new = f.v_new.data() + 1; }, "v_new: must be aligned");
}

TEST(KvCacheValidation, RotaryCosAndSinComeTogether) {
  expect_rejected([](Fixture& f) { f.params.rotary_sin = nullptr; }, "rotary_cos, rotary_sin: must be both set");
}

TEST(KvCacheValidation, RotaryDimIsEvenPositiveAndWithinTheHeadDim) {
  expect_rejected([](Fixture& f) { f.params.rotary_dim = 31; }, "rotary_dim: must be even and <= head_dim_qk");
  expect_rejected([](Fixture& f) { f.params.rotary_dim = 0; }, "rotary_dim: must be even");
  expect_rejected([](Fixture& f) { f.params.rotary_dim = 66; }, "(got 66)");
}

TEST(KvCacheValidation, RotaryLenIsPositive) {
  expect_rejected([](Fixture& f) { f.params.rotary_len = 0; }, "rotary_len: must be >= 1");
}

TEST(KvCacheValidation, RotaryTablesAreElementAligned) {
  expect_rejected([](Fixture& f) { f.params.rotary_cos = f.cos.data() + 1; }, "rotary_cos: must be aligned");
}

TEST(KvCacheValidation, CacheSeqlensIsFourByteAligned) {
  expect_rejected([](Fixture& f) {
    f.params.cache_seqlens = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(f.cache_seqlens.data()) + 2);
  }, "cache_seqlens: must be 4-byte aligned");
}

TEST(KvCacheValidation, CacheSeqlensAreNonNegative) {
  expect_rejected([](Fixture& f) { f.cache_seqlens[1] = -1; }, "cache_seqlens[1]: must be >= 0 (got -1)");
}

TEST(KvCacheValidation, TheAppendFitsTheCache) {
  // capacity 48: 45 + 4 > 48
  expect_rejected([](Fixture& f) { f.cache_seqlens[2] = 45; }, "cache_seqlens[2]: cache_seqlens[2] + seqlen_new must be <= seqlen_k = 48");
}

TEST(KvCacheValidation, NewKeyPositionsFitTheRotaryTable) {
  // Entry 0 reaches 14 + 4 - 1 = 17 (inside), entry 1 31 + 4 - 1 = 34.
  expect_rejected([](Fixture& f) { f.params.rotary_len = 18; }, "rotary_len: entry 1's new keys reach position 34");
}

TEST(KvCacheValidation, QueryPositionsFitTheRotaryTable) {
  // No append: the queries of entry 1 (causal, Sq = 4) reach 31 + 3 = 34.
  expect_rejected([](Fixture& f) {
    f.params.k_new = f.params.v_new = nullptr;
    f.params.seqlen_new = 0;
    f.params.rotary_len = 34;
  }, "rotary_len: entry 1's queries reach position 34");
}

TEST(KvCacheValidation, LeftPaddingEndsWithinTheKeysAfterTheAppend) {
  std::vector<int32_t> pad = {0, 36, 0};  // entry 1 ends at 31 + 4 = 35
  expect_rejected([&](Fixture& f) { f.params.attention.leftpad_k = pad.data(); }, "leftpad_k[1]: must be in [0, 35]");
}

TEST(KvCacheValidation, BatchIndexEntriesAreInRange) {
  expect_rejected([](Fixture& f) { f.kv_batch_idx[0] = 7; }, "kv_batch_idx[0]: must be in [0, kv_batch = 5)",
                  StatusCode::kInvalidArgument, CacheLayout::kBatchIndexed);
}

TEST(KvCacheValidation, UsedBlockTableEntriesArePagesOfThePool) {
  expect_rejected([](Fixture& f) { f.block_table[size_t(f.table_stride + 2)] = -1; }, "block_table[1][2]: must be a page");
}

TEST(KvCacheValidation, TheAttentionsOwnRulesAreCheckedFirst) {
  expect_rejected([](Fixture& f) { f.params.attention.heads_q = 3; }, "heads_q: must be a multiple of heads_kv");
}

TEST(KvCacheValidation, AnUnrunnablePathWritesNothing) {
  expect_rejected([](Fixture& f) { f.params.attention.path = flashcore::KernelPath::kSm90; }, "sm90",
                  StatusCode::kUnsupported);
}

}  // namespace
