// Validation rules (docs/validation.md): each Rejects* test starts from a valid host problem, breaks
// exactly one rule, and checks that attention_forward returns kInvalidArgument with a message naming
// the argument and the rule, and that no byte of memory changed (o and lse stay poisoned). Accepts*
// tests check that valid edge cases pass validate().
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "api/paths.hpp"
#include "flashcore/flashcore.hpp"

namespace {

using flashcore::AttentionParams;
using flashcore::DType;
using flashcore::KernelPath;
using flashcore::MaskAlign;
using flashcore::Status;
using flashcore::StatusCode;

constexpr uint8_t kPoison = 0xA5;

struct Shape {
  int batch = 2, seqlen_q = 5, seqlen_k = 7, heads_q = 4, heads_kv = 2, head_dim_qk = 16, head_dim_v = 16;
  DType dtype = DType::kFloat16;
  bool varlen = false;  // sequences q {5, 4}, k {7, 3}: total_q = 9, total_k = 10, max 5 / 7
};

// One host allocation holding a small valid problem, one 16 KiB slot per array, all bytes poisoned
// except the contents of cu_seqlens, seqused_k and alibi_slopes.
class Problem {
 public:
  enum Slot { kQ, kK, kV, kO, kLse, kCuQ, kCuK, kSeqused, kAlibi, kSlotCount };
  static constexpr size_t kSlotBytes = 16384;
  static constexpr size_t kBaseAlign = 256;

  explicit Problem(const Shape& shape = {}) : storage_(kSlotCount * kSlotBytes + kBaseAlign, kPoison) {
    const uintptr_t raw = reinterpret_cast<uintptr_t>(storage_.data());
    base_ = storage_.data() + (kBaseAlign - raw % kBaseAlign) % kBaseAlign;
    AttentionParams& p = params;
    p.batch = shape.batch;
    p.seqlen_q = shape.seqlen_q;
    p.seqlen_k = shape.seqlen_k;
    p.heads_q = shape.heads_q;
    p.heads_kv = shape.heads_kv;
    p.head_dim_qk = shape.head_dim_qk;
    p.head_dim_v = shape.head_dim_v;
    p.dtype = shape.dtype;
    p.q = slot(kQ);
    p.k = slot(kK);
    p.v = slot(kV);
    p.o = slot(kO);
    p.lse = reinterpret_cast<float*>(slot(kLse));
    if (shape.varlen) {
      p.batch = 2;
      write_ints(kCuQ, {0, 5, 9});
      write_ints(kCuK, {0, 7, 10});
      p.cu_seqlens_q = ints(kCuQ);
      p.cu_seqlens_k = ints(kCuK);
      p.seqlen_q = 5;
      p.seqlen_k = 7;
      p.total_q = 9;
      p.total_k = 10;
    }
    flashcore::set_dense_strides(p);
  }
  Problem(const Problem&) = delete;
  Problem& operator=(const Problem&) = delete;

  uint8_t* slot(Slot s) { return base_ + s * kSlotBytes; }
  int32_t* ints(Slot s) { return reinterpret_cast<int32_t*>(slot(s)); }
  void write_ints(Slot s, std::vector<int32_t> values) {
    std::memcpy(slot(s), values.data(), values.size() * sizeof(int32_t));
  }
  void set_alibi(int64_t batch_stride) {
    float* slopes = reinterpret_cast<float*>(slot(kAlibi));
    for (int i = 0; i < 64; ++i) slopes[i] = 0.5f;
    params.alibi_slopes = slopes;
    params.alibi_batch_stride = batch_stride;
  }
  bool slot_poisoned(Slot s) {
    const uint8_t* bytes = slot(s);
    for (size_t i = 0; i < kSlotBytes; ++i) {
      if (bytes[i] != kPoison) return false;
    }
    return true;
  }
  const std::vector<uint8_t>& storage() const { return storage_; }

  AttentionParams params;

 private:
  std::vector<uint8_t> storage_;
  uint8_t* base_ = nullptr;
};

// attention_forward rejects the call with InvalidArgument naming every one of `words`, validate()
// gives the same answer, and not one byte of the problem's memory changed.
void expect_rejected(Problem& prob, const std::vector<std::string>& words) {
  const std::vector<uint8_t> before = prob.storage();
  const Status status = flashcore::attention_forward(prob.params);
  EXPECT_EQ(status.code, StatusCode::kInvalidArgument) << status.message;
  if (std::getenv("FC_PRINT_MESSAGES") != nullptr) {  // FC_PRINT_MESSAGES=1: list every message
    std::printf("%s | %s\n", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                status.message.c_str());
  }
  for (const std::string& word : words) {
    EXPECT_NE(status.message.find(word), std::string::npos)
        << "message \"" << status.message << "\" lacks \"" << word << "\"";
  }
  EXPECT_EQ(flashcore::validate(prob.params).message, status.message);
  EXPECT_TRUE(prob.slot_poisoned(Problem::kO)) << "o was written";
  EXPECT_TRUE(prob.slot_poisoned(Problem::kLse)) << "lse was written";
  EXPECT_TRUE(prob.storage() == before) << "memory changed on a rejected call";
}

void expect_valid(Problem& prob) {
  const std::vector<uint8_t> before = prob.storage();
  const Status status = flashcore::validate(prob.params);
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_TRUE(prob.storage() == before) << "validate() wrote memory";
}

template <class T>
T* offset_bytes(T* ptr, int bytes) {
  using Byte = std::conditional_t<std::is_const_v<T>, const uint8_t, uint8_t>;
  return reinterpret_cast<T*>(reinterpret_cast<Byte*>(ptr) + bytes);
}

// ---- the base problems are valid ----------------------------------------------------------------

TEST(Validation, AcceptsDenseProblem) {
  Problem prob;
  expect_valid(prob);
}

TEST(Validation, AcceptsVarlenProblem) {
  Problem prob(Shape{.varlen = true});
  expect_valid(prob);
}

// ---- sizes and enums ----------------------------------------------------------------------------

TEST(Validation, RejectsNegativeBatch) {
  Problem prob;
  prob.params.batch = -1;
  expect_rejected(prob, {"batch", "must be >= 0", "got -1"});
}

TEST(Validation, RejectsNegativeSeqlenQ) {
  Problem prob;
  prob.params.seqlen_q = -3;
  expect_rejected(prob, {"seqlen_q", "must be >= 0", "got -3"});
}

TEST(Validation, RejectsNegativeSeqlenK) {
  Problem prob;
  prob.params.seqlen_k = -1;
  expect_rejected(prob, {"seqlen_k", "must be >= 0"});
}

TEST(Validation, RejectsZeroHeadsQ) {
  Problem prob;
  prob.params.heads_q = 0;
  expect_rejected(prob, {"heads_q", "must be >= 1"});
}

TEST(Validation, RejectsZeroHeadsKv) {
  Problem prob;
  prob.params.heads_kv = 0;
  expect_rejected(prob, {"heads_kv", "must be >= 1"});
}

TEST(Validation, RejectsHeadsQNotMultipleOfHeadsKv) {
  Problem prob(Shape{.heads_q = 6, .heads_kv = 4});
  expect_rejected(prob, {"heads_q: must be a multiple of heads_kv", "heads_q=6", "heads_kv=4"});
}

TEST(Validation, RejectsZeroHeadDimQk) {
  Problem prob;
  prob.params.head_dim_qk = 0;
  expect_rejected(prob, {"head_dim_qk", "must be >= 1"});
}

TEST(Validation, RejectsHeadDimQkAbove1024) {
  Problem prob;
  prob.params.head_dim_qk = 1032;
  expect_rejected(prob, {"head_dim_qk", "must be <= 1024", "got 1032"});
}

TEST(Validation, RejectsZeroHeadDimV) {
  Problem prob;
  prob.params.head_dim_v = 0;
  expect_rejected(prob, {"head_dim_v", "must be >= 1"});
}

TEST(Validation, RejectsHeadDimVAbove1024) {
  Problem prob;
  prob.params.head_dim_v = 2048;
  expect_rejected(prob, {"head_dim_v", "must be <= 1024"});
}

TEST(Validation, RejectsUnknownDtype) {
  Problem prob;
  prob.params.dtype = static_cast<DType>(7);
  expect_rejected(prob, {"dtype", "must be one of", "got 7"});
}

TEST(Validation, RejectsUnknownMaskAlign) {
  Problem prob;
  prob.params.mask_align = static_cast<MaskAlign>(2);
  expect_rejected(prob, {"mask_align", "bottom-right", "top-left", "got 2"});
}

TEST(Validation, RejectsUnknownPath) {
  Problem prob;
  prob.params.path = static_cast<KernelPath>(9);
  expect_rejected(prob, {"path", "must be one of", "got 9"});
}

TEST(Validation, RejectsNegativeNumSplits) {
  Problem prob;
  prob.params.num_splits = -2;
  expect_rejected(prob, {"num_splits", "must be >= 0"});
}

// ---- score function -----------------------------------------------------------------------------

TEST(Validation, RejectsNanSoftmaxScale) {
  Problem prob;
  prob.params.softmax_scale = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(prob, {"softmax_scale", "must be finite"});
}

TEST(Validation, RejectsInfiniteSoftmaxScale) {
  Problem prob;
  prob.params.softmax_scale = std::numeric_limits<float>::infinity();
  expect_rejected(prob, {"softmax_scale", "must be finite"});
}

TEST(Validation, RejectsInfiniteSoftcap) {
  Problem prob;
  prob.params.softcap = std::numeric_limits<float>::infinity();
  expect_rejected(prob, {"softcap", "must be finite"});
}

TEST(Validation, RejectsNegativeSoftcap) {
  Problem prob;
  prob.params.softcap = -30.0f;
  expect_rejected(prob, {"softcap", "must be >= 0"});
}

// ---- visibility ---------------------------------------------------------------------------------

TEST(Validation, RejectsWindowLeftBelowMinusOne) {
  Problem prob;
  prob.params.window_left = -2;
  expect_rejected(prob, {"window_left", "must be >= -1", "got -2"});
}

TEST(Validation, RejectsWindowRightBelowMinusOne) {
  Problem prob;
  prob.params.window_right = -5;
  expect_rejected(prob, {"window_right", "must be >= -1", "got -5"});
}

TEST(Validation, RejectsCausalWithPositiveWindowRight) {
  Problem prob;
  prob.params.causal = true;
  prob.params.window_right = 3;
  expect_rejected(prob, {"causal", "window_right must be -1 or 0", "window_right=3"});
}

// ---- ALiBi --------------------------------------------------------------------------------------

TEST(Validation, RejectsAlibiBatchStrideBelowHeadsQ) {
  Problem prob;
  prob.set_alibi(2);  // heads_q = 4
  expect_rejected(prob, {"alibi_batch_stride", "0", ">= heads_q", "alibi_batch_stride=2", "heads_q=4"});
}

TEST(Validation, RejectsNegativeAlibiBatchStride) {
  Problem prob;
  prob.set_alibi(-4);
  expect_rejected(prob, {"alibi_batch_stride", ">= heads_q", "alibi_batch_stride=-4"});
}

TEST(Validation, RejectsMisalignedAlibiSlopes) {
  Problem prob;
  prob.set_alibi(0);
  prob.params.alibi_slopes = offset_bytes(prob.params.alibi_slopes, 2);
  expect_rejected(prob, {"alibi_slopes", "4-byte aligned"});
}

// ---- varlen shape -------------------------------------------------------------------------------

TEST(Validation, RejectsCuSeqlensQWithoutCuSeqlensK) {
  Problem prob(Shape{.varlen = true});
  prob.params.cu_seqlens_k = nullptr;
  expect_rejected(prob, {"cu_seqlens_q, cu_seqlens_k", "both set", "both null", "cu_seqlens_k=null"});
}

TEST(Validation, RejectsCuSeqlensKWithoutCuSeqlensQ) {
  Problem prob;
  prob.write_ints(Problem::kCuK, {0, 7, 14});
  prob.params.cu_seqlens_k = prob.ints(Problem::kCuK);
  expect_rejected(prob, {"cu_seqlens_q, cu_seqlens_k", "both set", "cu_seqlens_q=null"});
}

TEST(Validation, RejectsNegativeTotalQ) {
  Problem prob(Shape{.varlen = true});
  prob.params.total_q = -1;
  expect_rejected(prob, {"total_q", "must be in [0, 2^31-1]", "got -1"});
}

TEST(Validation, RejectsNegativeTotalK) {
  Problem prob(Shape{.varlen = true});
  prob.params.total_k = -1;
  expect_rejected(prob, {"total_k", "must be in [0, 2^31-1]"});
}

TEST(Validation, RejectsTotalQBeyondInt32) {
  Problem prob(Shape{.varlen = true});
  prob.params.total_q = int64_t{1} << 31;
  expect_rejected(prob, {"total_q", "2^31-1", "cu_seqlens are int32"});
}

TEST(Validation, RejectsMisalignedCuSeqlens) {
  Problem prob(Shape{.varlen = true});
  prob.params.cu_seqlens_q = offset_bytes(prob.params.cu_seqlens_q, 1);
  expect_rejected(prob, {"cu_seqlens_q", "4-byte aligned"});
}

TEST(Validation, RejectsMisalignedSequsedK) {
  Problem prob;
  prob.write_ints(Problem::kSeqused, {3, 4});
  prob.params.seqused_k = offset_bytes(prob.ints(Problem::kSeqused), 2);
  expect_rejected(prob, {"seqused_k", "4-byte aligned"});
}

// ---- pointers -----------------------------------------------------------------------------------

TEST(Validation, RejectsNullQ) {
  Problem prob;
  prob.params.q = nullptr;
  expect_rejected(prob, {"q", "must not be null"});
}

TEST(Validation, RejectsNullKWhenThereAreKeys) {
  Problem prob;
  prob.params.k = nullptr;
  expect_rejected(prob, {"k", "must not be null", "seqlen_k > 0"});
}

TEST(Validation, RejectsNullVWhenThereAreKeys) {
  Problem prob(Shape{.varlen = true});
  prob.params.v = nullptr;
  expect_rejected(prob, {"v", "must not be null", "total_k > 0"});
}

TEST(Validation, RejectsNullO) {
  Problem prob;
  prob.params.o = nullptr;
  expect_rejected(prob, {"o", "must not be null"});
}

// ---- strides and offsets ------------------------------------------------------------------------

TEST(Validation, RejectsNegativeStride) {
  Problem prob;
  prob.params.k_seq_stride = -32;
  expect_rejected(prob, {"k_seq_stride", "must be >= 0", "got -32"});
}

TEST(Validation, RejectsOffsetsBeyondInt64) {
  Problem prob;
  prob.params.q_batch_stride = std::numeric_limits<int64_t>::max() - 7;  // a multiple of 8 elements
  expect_rejected(prob, {"q", "largest byte offset does not fit in int64", "q_batch_stride="});
}

TEST(Validation, RejectsByteOffsetBeyondInt64) {
  Problem prob;  // the element offset fits, the byte offset (x 2 bytes) does not
  prob.params.q_batch_stride = (int64_t{1} << 62) + 8;
  expect_rejected(prob, {"q", "largest byte offset does not fit in int64"});
}

// ---- alignment ----------------------------------------------------------------------------------

TEST(Validation, RejectsQNotAlignedToItsElementSize) {
  Problem prob;
  prob.params.q = offset_bytes(prob.params.q, 1);
  expect_rejected(prob, {"q: base pointer must be 2-byte aligned", "element size", "address % 2 = 1"});
}

TEST(Validation, RejectsKNotAlignedToItsElementSize) {
  Problem prob;
  prob.params.k = offset_bytes(prob.params.k, 1);
  expect_rejected(prob, {"k: base pointer must be 2-byte aligned"});
}

TEST(Validation, RejectsVNotAlignedToItsElementSize) {
  Problem prob;
  prob.params.v = offset_bytes(prob.params.v, 1);
  expect_rejected(prob, {"v: base pointer must be 2-byte aligned"});
}

TEST(Validation, RejectsONotAlignedToItsElementSize) {
  Problem prob(Shape{.dtype = DType::kFloat32});
  prob.params.o = offset_bytes(prob.params.o, 2);
  expect_rejected(prob, {"o: base pointer must be 4-byte aligned", "address % 4 = 2"});
}

// 16-byte vector alignment is a capability of the fast paths (reported by their supports()), not
// a validation rule: the reference paths run any element-aligned layout.
TEST(VectorAlignment, AcceptsElementAlignedPointerThatIsNot16ByteAligned) {
  Problem prob;
  prob.params.q = offset_bytes(prob.params.q, 2);
  EXPECT_TRUE(flashcore::validate(prob.params).ok());
  const std::string why = flashcore::detail::vector_alignment_problem(prob.params, 16);
  EXPECT_NE(why.find("q: base pointer must be 16-byte aligned"), std::string::npos) << why;
  EXPECT_NE(why.find("address % 16 = 2"), std::string::npos) << why;
}

TEST(VectorAlignment, ReportsInputStrideNotMultipleOf16Bytes) {
  Problem prob;
  prob.params.q_head_stride = 20;  // 40 bytes of fp16
  prob.params.q_seq_stride = 80;
  prob.params.q_batch_stride = 400;
  EXPECT_TRUE(flashcore::validate(prob.params).ok());
  const std::string why = flashcore::detail::vector_alignment_problem(prob.params, 16);
  for (const char* part : {"q_head_stride", "multiple of 8 elements", "16 bytes of fp16", "got 20"})
    EXPECT_NE(why.find(part), std::string::npos) << why;
}

TEST(VectorAlignment, ReportsOutputStrideNotMultipleOf16Bytes) {
  Problem prob(Shape{.dtype = DType::kFloat32});
  prob.params.o_seq_stride = 4 * 16 + 2;
  prob.params.o_batch_stride = 5 * 128;
  EXPECT_TRUE(flashcore::validate(prob.params).ok());
  const std::string why = flashcore::detail::vector_alignment_problem(prob.params, 16);
  for (const char* part : {"o_seq_stride", "multiple of 4 elements", "16 bytes of fp32", "got 66"})
    EXPECT_NE(why.find(part), std::string::npos) << why;
}

TEST(VectorAlignment, ReportsHeadDimThatIsNotWholeVectors) {
  Problem prob(Shape{.head_dim_qk = 12, .head_dim_v = 16});
  // Pad the rows to 16 elements so every stride is whole vectors and only the extent is odd.
  prob.params.q_head_stride = 16;
  prob.params.q_seq_stride = 4 * 16;
  prob.params.q_batch_stride = 5 * 4 * 16;
  prob.params.k_head_stride = 16;
  prob.params.k_seq_stride = 2 * 16;
  prob.params.k_batch_stride = 7 * 2 * 16;
  EXPECT_TRUE(flashcore::validate(prob.params).ok());
  const std::string why = flashcore::detail::vector_alignment_problem(prob.params, 16);
  EXPECT_NE(why.find("head_dim_qk: must be a multiple of 8"), std::string::npos) << why;
}

TEST(VectorAlignment, DenseProblemWithHeadDim16IsVectorAligned) {
  Problem prob;
  EXPECT_EQ(flashcore::detail::vector_alignment_problem(prob.params, 16), "");
}

TEST(Validation, RejectsMisalignedLse) {
  Problem prob;
  prob.params.lse = offset_bytes(prob.params.lse, 2);
  expect_rejected(prob, {"lse", "4-byte aligned"});
}

// ---- o and lse do not overlap themselves or the inputs --------------------------------------------

TEST(Validation, RejectsOutputHeadsOverlapping) {
  Problem prob;
  prob.params.o_head_stride = 8;  // < head_dim_v = 16: heads share elements
  expect_rejected(prob, {"o_head_stride", "o would overlap itself", "must be >= 16", "heads_q must be 1"});
}

TEST(Validation, RejectsOutputSeqStrideZero) {
  Problem prob;
  prob.params.o_seq_stride = 0;
  expect_rejected(prob, {"o_seq_stride", "o would overlap itself", "seqlen_q must be 1"});
}

TEST(Validation, RejectsOutputBatchesOverlapping) {
  Problem prob;
  prob.params.o_batch_stride = 2 * 4 * 16;  // 2 rows of 5: batch entries overlap
  expect_rejected(prob, {"o_batch_stride", "o would overlap itself"});
}

TEST(Validation, RejectsLseOverlappingItself) {
  Problem prob;
  prob.params.lse_head_stride = 2;  // < seqlen_q = 5
  expect_rejected(prob, {"lse_head_stride", "lse would overlap itself"});
}

TEST(Validation, RejectsOutputOverlappingQ) {
  Problem prob;
  prob.params.o = const_cast<void*>(prob.params.q);  // in place: o is written while q is read
  expect_rejected(prob, {"o: must not overlap q"});
}

TEST(Validation, RejectsOutputOverlappingK) {
  Problem prob;
  prob.params.o = prob.slot(Problem::kK) + 64;
  expect_rejected(prob, {"o: must not overlap k"});
}

TEST(Validation, RejectsOutputOverlappingV) {
  Problem prob;
  prob.params.v = prob.slot(Problem::kO) + 512;  // v starts inside o's span
  expect_rejected(prob, {"o: must not overlap v"});
}

TEST(Validation, RejectsLseOverlappingO) {
  Problem prob;
  prob.params.lse = reinterpret_cast<float*>(prob.slot(Problem::kO) + 256);
  expect_rejected(prob, {"lse: must not overlap o"});
}

TEST(Validation, RejectsLseOverlappingQ) {
  Problem prob;
  prob.params.lse = reinterpret_cast<float*>(prob.slot(Problem::kQ));
  expect_rejected(prob, {"lse: must not overlap q"});
}

// ---- varlen contents (host-readable cu_seqlens / seqused_k) --------------------------------------

TEST(Validation, RejectsCuSeqlensNotStartingAtZero) {
  Problem prob(Shape{.varlen = true});
  prob.write_ints(Problem::kCuQ, {1, 5, 9});
  expect_rejected(prob, {"cu_seqlens_q[0]: must be 0", "got 1"});
}

TEST(Validation, RejectsDecreasingCuSeqlens) {
  Problem prob(Shape{.varlen = true});
  prob.write_ints(Problem::kCuK, {0, 7, 6});
  expect_rejected(prob, {"cu_seqlens_k[2]: must be >= cu_seqlens_k[1]", "got 6 < 7"});
}

TEST(Validation, RejectsQuerySequenceLongerThanSeqlenQ) {
  Problem prob(Shape{.varlen = true});
  prob.params.seqlen_q = 4;  // sequence 0 has 5 query tokens
  expect_rejected(prob, {"cu_seqlens_q[1]", "sequence 0 has 5 tokens", "more than seqlen_q = 4", "maximum"});
}

TEST(Validation, RejectsKeySequenceLongerThanSeqlenK) {
  Problem prob(Shape{.varlen = true});
  prob.write_ints(Problem::kCuK, {0, 2, 10});  // sequence 1 has 8 keys > 7
  expect_rejected(prob, {"cu_seqlens_k[2]", "sequence 1 has 8 tokens", "more than seqlen_k = 7"});
}

TEST(Validation, RejectsCuSeqlensQBeyondTotalQ) {
  Problem prob(Shape{.varlen = true});
  prob.params.total_q = 8;
  expect_rejected(prob, {"cu_seqlens_q[2]: must be <= total_q", "got 9 > 8"});
}

TEST(Validation, RejectsCuSeqlensKBeyondTotalK) {
  Problem prob(Shape{.varlen = true});
  prob.params.total_k = 9;
  expect_rejected(prob, {"cu_seqlens_k[2]: must be <= total_k", "got 10 > 9"});
}

TEST(Validation, RejectsSequsedKAboveSequenceKeys) {
  Problem prob(Shape{.varlen = true});
  prob.write_ints(Problem::kSeqused, {7, 4});  // sequence 1 has 3 keys
  prob.params.seqused_k = prob.ints(Problem::kSeqused);
  expect_rejected(prob, {"seqused_k[1]: must be in [0, 3]", "sequence 1", "got 4"});
}

TEST(Validation, RejectsNegativeSequsedK) {
  Problem prob;
  prob.write_ints(Problem::kSeqused, {-1, 4});
  prob.params.seqused_k = prob.ints(Problem::kSeqused);
  expect_rejected(prob, {"seqused_k[0]: must be in [0, 7]", "got -1"});
}

TEST(Validation, RejectsSequsedKAboveSeqlenK) {
  Problem prob;
  prob.write_ints(Problem::kSeqused, {7, 8});
  prob.params.seqused_k = prob.ints(Problem::kSeqused);
  expect_rejected(prob, {"seqused_k[1]: must be in [0, 7]", "got 8"});
}

// ---- valid edge cases ---------------------------------------------------------------------------

TEST(Validation, AcceptsEmptyBatchWithNullPointers) {
  AttentionParams p;
  p.batch = 0;
  p.seqlen_q = 128;
  p.seqlen_k = 128;
  p.heads_q = 8;
  p.heads_kv = 8;
  p.head_dim_qk = 64;
  p.head_dim_v = 64;
  EXPECT_TRUE(flashcore::validate(p).ok()) << flashcore::validate(p).message;
  const Status run = flashcore::attention_forward(p);  // nothing to write: no path is needed
  EXPECT_TRUE(run.ok()) << run.message;
}

TEST(Validation, AcceptsNoQueryRowsWithNullPointers) {
  AttentionParams p;
  p.batch = 3;
  p.seqlen_q = 0;
  p.seqlen_k = 17;
  p.heads_q = 4;
  p.heads_kv = 1;
  p.head_dim_qk = 64;
  p.head_dim_v = 64;
  EXPECT_TRUE(flashcore::validate(p).ok()) << flashcore::validate(p).message;
  EXPECT_TRUE(flashcore::attention_forward(p).ok());
}

TEST(Validation, AcceptsVarlenWithNoQueryTokens) {
  Problem prob(Shape{.varlen = true});
  prob.params.total_q = 0;
  prob.params.q = nullptr;
  prob.params.o = nullptr;
  prob.params.lse = nullptr;
  expect_valid(prob);
}

TEST(Validation, AcceptsNoKeysWithNullKAndV) {
  Problem prob(Shape{.seqlen_k = 0});  // rows get o = 0, lse = -inf
  prob.params.k = nullptr;
  prob.params.v = nullptr;
  expect_valid(prob);
}

TEST(Validation, AcceptsVarlenWithNoKeyTokensAndNullKAndV) {
  Problem prob(Shape{.varlen = true});
  prob.write_ints(Problem::kCuK, {0, 0, 0});
  prob.params.total_k = 0;
  prob.params.k = nullptr;
  prob.params.v = nullptr;
  expect_valid(prob);
}

TEST(Validation, AcceptsStridedBhsdLayout) {
  Problem prob;  // q/k/v/o stored [B, H, S, D] (PyTorch's layout), described by strides
  AttentionParams& p = prob.params;
  const int d = 16;
  p.q_seq_stride = d;
  p.q_head_stride = int64_t(p.seqlen_q) * d;
  p.q_batch_stride = int64_t(p.heads_q) * p.seqlen_q * d;
  p.k_seq_stride = p.v_seq_stride = d;
  p.k_head_stride = p.v_head_stride = int64_t(p.seqlen_k) * d;
  p.k_batch_stride = p.v_batch_stride = int64_t(p.heads_kv) * p.seqlen_k * d;
  p.o_seq_stride = p.q_seq_stride;
  p.o_head_stride = p.q_head_stride;
  p.o_batch_stride = p.q_batch_stride;
  expect_valid(prob);
}

TEST(Validation, AcceptsGqaEightToOne) {
  Problem prob(Shape{.heads_q = 8, .heads_kv = 1});
  expect_valid(prob);
}

TEST(Validation, AcceptsPackedQkvInputs) {
  Problem prob;  // q, k, v interleaved in one [B, S, 3, H, D] buffer (Sq == Sk); o separate
  AttentionParams& p = prob.params;
  p.seqlen_k = p.seqlen_q;
  p.heads_kv = p.heads_q;
  const int64_t token = 3 * int64_t(p.heads_q) * p.head_dim_qk;
  uint8_t* qkv = prob.slot(Problem::kQ);
  const int64_t part_bytes = int64_t(p.heads_q) * p.head_dim_qk * 2;
  p.q = qkv;
  p.k = qkv + part_bytes;
  p.v = qkv + 2 * part_bytes;
  p.q_seq_stride = p.k_seq_stride = p.v_seq_stride = token;
  p.q_batch_stride = p.k_batch_stride = p.v_batch_stride = token * p.seqlen_q;
  p.q_head_stride = p.k_head_stride = p.v_head_stride = p.head_dim_qk;
  expect_valid(prob);
}

TEST(Validation, AcceptsBroadcastInputStrideZero) {
  Problem prob;  // one K/V shared by every batch entry (an expanded tensor)
  prob.params.k_batch_stride = 0;
  prob.params.v_batch_stride = 0;
  expect_valid(prob);
}

TEST(Validation, AcceptsAnyStrideOfExtentOneDimension) {
  Problem prob(Shape{.batch = 1, .heads_q = 1, .heads_kv = 1});
  prob.params.q_batch_stride = 3;  // never used: batch == 1
  prob.params.o_head_stride = 1;   // never used: heads_q == 1
  expect_valid(prob);
}

TEST(Validation, AcceptsCausalWithWindowRightZeroOrInfinite) {
  Problem prob;
  prob.params.causal = true;
  prob.params.window_right = 0;
  expect_valid(prob);
  prob.params.window_right = flashcore::kWindowInfinite;
  prob.params.window_left = 3;  // causal local attention
  expect_valid(prob);
}

TEST(Validation, AcceptsAlibiWithPerBatchSlopes) {
  Problem prob;
  prob.set_alibi(4);
  expect_valid(prob);
  prob.set_alibi(0);
  expect_valid(prob);
}

TEST(Validation, AcceptsSequsedKWithAndWithoutVarlen) {
  Problem dense;
  dense.write_ints(Problem::kSeqused, {0, 7});
  dense.params.seqused_k = dense.ints(Problem::kSeqused);
  expect_valid(dense);
  Problem varlen(Shape{.varlen = true});
  varlen.write_ints(Problem::kSeqused, {7, 3});
  varlen.params.seqused_k = varlen.ints(Problem::kSeqused);
  expect_valid(varlen);
}

TEST(Validation, AcceptsSoftcapNegativeScaleAndTopLeftMask) {
  Problem prob;
  prob.params.softcap = 30.0f;
  prob.params.softmax_scale = -0.25f;
  prob.params.mask_align = MaskAlign::kTopLeft;
  expect_valid(prob);
}

TEST(Validation, AcceptsFp32AndBf16) {
  Problem fp32(Shape{.dtype = DType::kFloat32});
  expect_valid(fp32);
  Problem bf16(Shape{.dtype = DType::kBFloat16});
  expect_valid(bf16);
}

}  // namespace
