// Every softmax ladder variant against the fp64 CPU path, on every dtype and on the row lengths
// that stress each kernel's shape (1, sub-warp, warp +-1, odd, vector-unaligned, one block, vocab
// sized, longer than any block keeps in registers), with special-value rows in every case.
// Outputs are poisoned with a signalling-NaN bit pattern no arithmetic produces, so an element a
// kernel forgot to write is told apart from a NaN it computed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "common/gpu.hpp"
#include "flashcore/softmax.h"
#include "flashcore/softmax.hpp"

namespace flashcore {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr uint32_t kPoison32 = 0xffbadbadu;  // signalling NaN: never the result of arithmetic
constexpr uint16_t kPoisonFp16 = 0xfdbau;
constexpr uint16_t kPoisonBf16 = 0xffbau;
constexpr double kFp32RelTolerance = 1e-5;     // design.md: SIMT fp32 paths
constexpr double kFp32MaxAbsTolerance = 2e-6;  // probabilities are <= 1
constexpr double kLowPrecisionFloor = 1e-6;    // below the 16-bit rounding error: fp32 noise

const SoftmaxVariant kAllVariants[] = {
    SoftmaxVariant::kAuto,        SoftmaxVariant::kSharedMemReduction, SoftmaxVariant::kWarpShuffle,
    SoftmaxVariant::kVectorized,  SoftmaxVariant::kOnline,             SoftmaxVariant::kRowPerWarp,
    SoftmaxVariant::kRowPerBlock, SoftmaxVariant::kMultiBlock,         SoftmaxVariant::kRowInSharedMem};
const DType kAllDtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};

uint32_t poison_bits(DType dtype) {
  return dtype == DType::kFloat32 ? kPoison32 : (dtype == DType::kFloat16 ? kPoisonFp16 : kPoisonBf16);
}

uint32_t element_bits(const std::vector<uint8_t>& bytes, int64_t index, DType dtype) {
  if (dtype == DType::kFloat32) {
    uint32_t bits;
    std::memcpy(&bits, bytes.data() + index * 4, 4);
    return bits;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes.data() + index * 2, 2);
  return bits;
}

void poison(std::vector<uint8_t>& bytes, DType dtype) {
  const int64_t count = int64_t(bytes.size()) / dtype_size(dtype);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == DType::kFloat32) {
      std::memcpy(bytes.data() + i * 4, &kPoison32, 4);
    } else {
      const uint16_t bits = uint16_t(poison_bits(dtype));
      std::memcpy(bytes.data() + i * 2, &bits, 2);
    }
  }
}

// Rounds a float to what `dtype` stores.
float round_to(float value, DType dtype) {
  uint8_t storage[4];
  store_from_float(storage, 0, value, dtype);
  return load_as_float(storage, 0, dtype);
}

// A [rows, cols] input: random normal rows (scale 1 or 10 to stress the exponent range), with the
// special rows the semantics name when there are enough rows.
std::vector<float> make_input(int64_t rows, int64_t cols, DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int64_t> pick_col(0, cols - 1);
  const float huge = dtype == DType::kFloat32 ? 1e30f : 1e4f;  // +-1e4 stays finite in fp16
  std::vector<float> x(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = r % 2 == 0 ? 1.0f : 10.0f;
    float* row = x.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) row[c] = scale * normal(rng);
    switch (r) {
      case 0: row[pick_col(rng)] = std::numeric_limits<float>::quiet_NaN(); break;  // whole row NaN
      case 1: for (int64_t c = 0; c < cols; ++c) row[c] = -kInf; break;              // NaN row, lse -inf
      case 2: row[pick_col(rng)] = kInf; break;                                      // NaN row, lse +inf
      case 3: for (int64_t c = 0; c < cols; c += 2) row[c] = -kInf; break;           // -inf entries -> 0
      case 4: for (int64_t c = 0; c < cols; ++c) row[c] = (c % 3 == 0 ? huge : -huge) * (1.0f - 1e-3f * float(c % 7)); break;
      default: break;
    }
    for (int64_t c = 0; c < cols; ++c) row[c] = round_to(row[c], dtype);
  }
  return x;
}

std::vector<uint8_t> to_storage(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * size_t(dtype_size(dtype)));
  for (size_t i = 0; i < values.size(); ++i) store_from_float(bytes.data(), int64_t(i), values[i], dtype);
  return bytes;
}

// The fp64 CPU path on the (already dtype-exact) inputs, kept in fp32: the reference.
struct Reference {
  std::vector<float> y;
  std::vector<float> lse;
};

Reference reference_for(const std::vector<float>& x, int64_t rows, int64_t cols) {
  Reference ref{std::vector<float>(x.size()), std::vector<float>(size_t(rows))};
  const Status st = softmax_forward(x.data(), ref.y.data(), ref.lse.data(), rows, cols, DType::kFloat32);
  EXPECT_TRUE(st.ok()) << st.message;
  return ref;
}

// Device buffers that free themselves.
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { EXPECT_EQ(cudaMalloc(&ptr, bytes < 1 ? 1 : bytes), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
};

struct RunResult {
  Status status;
  std::vector<uint8_t> y;   // dtype storage, poisoned before the launch
  std::vector<float> lse;   // poisoned before the launch
};

// Runs one variant on device copies of x (offset by `offset_elems` elements to test alignment);
// `in_place` writes y over x.
RunResult run_on_device(const std::vector<uint8_t>& x_bytes, int64_t rows, int64_t cols, DType dtype,
                        SoftmaxVariant variant, int64_t offset_elems = 0, bool in_place = false,
                        bool with_lse = true, cudaStream_t stream = nullptr) {
  const size_t elem = size_t(dtype_size(dtype));
  const size_t offset = size_t(offset_elems) * elem;
  RunResult result;
  result.y.resize(x_bytes.size());
  poison(result.y, dtype);
  result.lse.resize(size_t(rows));
  for (float& v : result.lse) std::memcpy(&v, &kPoison32, 4);

  DeviceBuffer x_dev(x_bytes.size() + offset), y_dev(x_bytes.size() + offset), lse_dev(size_t(rows) * 4);
  char* x_ptr = static_cast<char*>(x_dev.ptr) + offset;
  char* y_ptr = in_place ? x_ptr : static_cast<char*>(y_dev.ptr) + offset;
  EXPECT_EQ(cudaMemcpy(x_ptr, x_bytes.data(), x_bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
  if (!in_place) EXPECT_EQ(cudaMemcpy(y_ptr, result.y.data(), result.y.size(), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(lse_dev.ptr, result.lse.data(), size_t(rows) * 4, cudaMemcpyHostToDevice), cudaSuccess);

  result.status = softmax_forward(x_ptr, y_ptr, with_lse ? static_cast<float*>(lse_dev.ptr) : nullptr, rows, cols,
                                  dtype, variant, stream);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  if (result.status.ok() || !in_place) {
    EXPECT_EQ(cudaMemcpy(result.y.data(), y_ptr, result.y.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
  EXPECT_EQ(cudaMemcpy(result.lse.data(), lse_dev.ptr, size_t(rows) * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return result;
}

// Checks every element was written and agrees with the reference: NaN exactly where the reference
// is NaN, infinities equal, finite values within the tolerance (fp32: 1e-5 relative Frobenius; 16-bit:
// no worse than 2x the error of rounding the fp32 result to the dtype, the naive computation).
void expect_matches_reference(const RunResult& run, const Reference& ref, const std::vector<float>& x,
                              int64_t rows, int64_t cols, DType dtype, bool expect_lse = true) {
  (void)x;
  int64_t unwritten = 0, nan_mismatch = 0;
  double err_sq = 0.0, ref_sq = 0.0, naive_err_sq = 0.0, max_abs = 0.0, naive_max_abs = 0.0;
  const uint32_t poison_pattern = poison_bits(dtype);
  for (int64_t i = 0; i < rows * cols; ++i) {
    if (element_bits(run.y, i, dtype) == poison_pattern) {
      ++unwritten;
      continue;
    }
    const float out = load_as_float(run.y.data(), i, dtype);
    const float expected = ref.y[size_t(i)];
    if (std::isnan(expected) || std::isnan(out)) {
      nan_mismatch += std::isnan(expected) != std::isnan(out);
      continue;
    }
    const double err = std::fabs(double(out) - double(expected));
    const double naive_err = std::fabs(double(round_to(expected, dtype)) - double(expected));
    err_sq += err * err;
    naive_err_sq += naive_err * naive_err;
    ref_sq += double(expected) * double(expected);
    max_abs = std::max(max_abs, err);
    naive_max_abs = std::max(naive_max_abs, naive_err);
  }
  EXPECT_EQ(unwritten, 0) << "elements of y left unwritten";
  EXPECT_EQ(nan_mismatch, 0) << "elements NaN in exactly one of output and reference";
  const double rel = std::sqrt(err_sq / std::max(ref_sq, 1e-300));
  const double naive_rel = std::sqrt(naive_err_sq / std::max(ref_sq, 1e-300));
  if (dtype == DType::kFloat32) {
    EXPECT_LE(rel, kFp32RelTolerance) << "relative Frobenius error";
    EXPECT_LE(max_abs, kFp32MaxAbsTolerance) << "max abs error";
  } else {
    EXPECT_LE(rel, 2.0 * naive_rel + kLowPrecisionFloor) << "relative Frobenius error (naive " << naive_rel << ")";
    EXPECT_LE(max_abs, 2.0 * naive_max_abs + kLowPrecisionFloor) << "max abs error (naive " << naive_max_abs << ")";
  }
  if (!expect_lse) return;
  for (int64_t r = 0; r < rows; ++r) {
    uint32_t bits;
    std::memcpy(&bits, &run.lse[size_t(r)], 4);
    ASSERT_NE(bits, kPoison32) << "lse[" << r << "] unwritten";
    const float out = run.lse[size_t(r)], expected = ref.lse[size_t(r)];
    if (std::isnan(expected) || std::isinf(expected)) {
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(out)) << "lse[" << r << "] = " << out << ", expected NaN";
      } else {
        EXPECT_EQ(out, expected) << "lse[" << r << "]";
      }
      continue;
    }
    EXPECT_NEAR(out, expected, 1e-5 * (1.0 + std::fabs(double(expected)))) << "lse[" << r << "]";
  }
}

// Why `variant` refuses a (cols, dtype) on 256-byte aligned buffers, or "" when it takes it.
bool expect_unsupported(SoftmaxVariant variant, int64_t cols, DType dtype, int64_t offset_elems) {
  const int64_t vec = 16 / dtype_size(dtype);
  switch (variant) {
    case SoftmaxVariant::kVectorized: return cols % vec != 0 || (offset_elems * dtype_size(dtype)) % 16 != 0;
    case SoftmaxVariant::kRowPerWarp: return cols > kSoftmaxRowPerWarpMaxCols;
    case SoftmaxVariant::kRowPerBlock: return cols > kSoftmaxRowPerBlockMaxCols;
    // Every sm_80+ device opts in to more than 128 KiB of shared memory per block.
    case SoftmaxVariant::kRowInSharedMem: return cols * dtype_size(dtype) > kSoftmaxRowInSharedMemMaxBytes;
    default: return false;
  }
}

void expect_refused_and_untouched(const RunResult& run, int64_t rows, int64_t cols, DType dtype) {
  EXPECT_EQ(run.status.code, StatusCode::kUnsupported) << run.status.message;
  const uint32_t poison_pattern = poison_bits(dtype);
  int64_t written = 0;
  for (int64_t i = 0; i < rows * cols; ++i) written += element_bits(run.y, i, dtype) != poison_pattern;
  EXPECT_EQ(written, 0) << "a refused call wrote y";
}

// One (variant, dtype, shape) case: correct against the reference, or refused with nothing written
// when the variant does not take the shape. offset_elems shifts x and y off their 256-byte alignment.
void check_case(SoftmaxVariant variant, DType dtype, int64_t rows, int64_t cols, int64_t offset_elems, uint32_t seed) {
  SCOPED_TRACE(std::string(softmax_variant_name(variant)) + " " + dtype_name(dtype) + " rows=" + std::to_string(rows) +
               " cols=" + std::to_string(cols) + " offset=" + std::to_string(offset_elems));
  const std::vector<float> x = make_input(rows, cols, dtype, seed);
  const Reference ref = reference_for(x, rows, cols);
  const RunResult run = run_on_device(to_storage(x, dtype), rows, cols, dtype, variant, offset_elems);
  if (expect_unsupported(variant, cols, dtype, offset_elems)) {
    expect_refused_and_untouched(run, rows, cols, dtype);
    const char* rule = variant == SoftmaxVariant::kVectorized       ? "16-byte"
                       : variant == SoftmaxVariant::kRowInSharedMem ? "bytes <="
                                                                    : "cols <=";
    EXPECT_NE(run.status.message.find(rule), std::string::npos) << run.status.message;
    return;
  }
  ASSERT_TRUE(run.status.ok()) << run.status.message;
  expect_matches_reference(run, ref, x, rows, cols, dtype);
}

class SoftmaxVariantTest : public ::testing::TestWithParam<SoftmaxVariant> {};

TEST_P(SoftmaxVariantTest, MatchesFp64ReferenceForEveryDtypeAndRowLength) {
  FC_REQUIRE_SM(80);
  const int64_t kCols[] = {1, 7, 31, 32, 33, 1000, 4096, 32000, 100000};
  for (DType dtype : kAllDtypes) {
    for (int64_t cols : kCols) {
      const int64_t rows = std::clamp<int64_t>(300000 / cols, 8, 64);
      check_case(GetParam(), dtype, rows, cols, /*offset_elems=*/0, uint32_t(cols * 3 + int64_t(dtype)));
    }
  }
}

TEST_P(SoftmaxVariantTest, MisalignedRowsFallBackToScalarOrAreRefused) {
  FC_REQUIRE_SM(80);
  for (DType dtype : kAllDtypes) {
    for (int64_t cols : {int64_t(1000), int64_t(4096)}) check_case(GetParam(), dtype, 16, cols, /*offset_elems=*/1, 99u);
  }
}

TEST_P(SoftmaxVariantTest, InPlaceOnANonDefaultStreamWithoutLse) {
  FC_REQUIRE_SM(80);
  const SoftmaxVariant variant = GetParam();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  for (int64_t cols : {int64_t(1000), int64_t(4096)}) {
    const int64_t rows = 40;
    const DType dtype = DType::kBFloat16;
    SCOPED_TRACE(std::string(softmax_variant_name(variant)) + " cols=" + std::to_string(cols));
    const std::vector<float> x = make_input(rows, cols, dtype, 7u);
    const Reference ref = reference_for(x, rows, cols);
    const RunResult run = run_on_device(to_storage(x, dtype), rows, cols, dtype, variant, 0, /*in_place=*/true,
                                        /*with_lse=*/false, stream);
    if (expect_unsupported(variant, cols, dtype, 0)) {
      EXPECT_EQ(run.status.code, StatusCode::kUnsupported);
      continue;
    }
    ASSERT_TRUE(run.status.ok()) << run.status.message;
    expect_matches_reference(run, ref, x, rows, cols, dtype, /*expect_lse=*/false);
  }
  cudaStreamDestroy(stream);
}

// More rows than the grid has blocks (2^20 blocks; 4 rows per block for row_per_warp): the
// grid-stride loops must still cover every row.
TEST_P(SoftmaxVariantTest, CoversMoreRowsThanOneGrid) {
  FC_REQUIRE_SM(80);
  check_case(GetParam(), DType::kFloat32, (int64_t(4) << 20) + 5, 2, /*offset_elems=*/0, 5u);
}

INSTANTIATE_TEST_SUITE_P(Softmax, SoftmaxVariantTest, ::testing::ValuesIn(kAllVariants),
                         [](const ::testing::TestParamInfo<SoftmaxVariant>& info) {
                           return std::string(softmax_variant_name(info.param));
                         });

// One row far longer than any block keeps, in both dtypes: the multi-block split (and kAuto's
// choice for it) must merge many partial (max, sum) pairs correctly.
TEST(SoftmaxGpu, OneVeryLongRowSplitAcrossBlocks) {
  FC_REQUIRE_SM(80);
  for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
    for (SoftmaxVariant variant : {SoftmaxVariant::kAuto, SoftmaxVariant::kMultiBlock, SoftmaxVariant::kOnline}) {
      const int64_t rows = 1, cols = 1000003;  // odd: scalar accesses
      SCOPED_TRACE(std::string(softmax_variant_name(variant)) + " " + dtype_name(dtype));
      std::vector<float> x = make_input(rows + 8, cols, dtype, 11u);
      x.erase(x.begin(), x.begin() + 8 * cols);  // keep a plain random row (row 8 of the generator)
      const Reference ref = reference_for(x, rows, cols);
      const RunResult run = run_on_device(to_storage(x, dtype), rows, cols, dtype, variant);
      ASSERT_TRUE(run.status.ok()) << run.status.message;
      expect_matches_reference(run, ref, x, rows, cols, dtype);
    }
  }
}

// Step 6 runs 16-bit rows of at most 4096 columns on grids of more than one wave with its small-block
// kernel (always 256 threads, one barrier per reduction; row_in_registers.cuh): row lengths of one
// and two vectors per thread, the last threads' vectors past the row, and the special rows.
// 3001 rows are more than one wave of 256-thread blocks on any GPU with up to 187 SMs.
TEST(SoftmaxGpu, RowPerBlockSmallBlockKernelOnMultiWaveGrids) {
  FC_REQUIRE_SM(80);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (int64_t cols : {int64_t(1032), int64_t(2048), int64_t(2056), int64_t(4088), int64_t(4096)}) {
      check_case(SoftmaxVariant::kRowPerBlock, dtype, /*rows=*/3001, cols, /*offset_elems=*/0, uint32_t(cols));
    }
  }
}

// Enough rows of a long 16-bit row for kAuto to stage them in shared memory (step 8), aligned
// (cp.async) and one element off (plain staged loads).
TEST(SoftmaxGpu, AutoStagesLong16BitRowsInSharedMemory) {
  FC_REQUIRE_SM(80);
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (int64_t offset_elems : {int64_t(0), int64_t(1)}) {
      check_case(SoftmaxVariant::kAuto, dtype, /*rows=*/160, /*cols=*/32000, offset_elems, 21u);
    }
  }
}

TEST(SoftmaxGpu, AutoResolvesToAConcreteVariantOnDevice) {
  FC_REQUIRE_SM(80);
  DeviceBuffer x(4096 * 4), y(4096 * 4);
  SoftmaxVariant chosen = SoftmaxVariant::kAuto;
  ASSERT_TRUE(softmax_select_variant(x.ptr, y.ptr, 4, 1024, DType::kFloat32, SoftmaxVariant::kAuto, &chosen).ok());
  EXPECT_EQ(chosen, SoftmaxVariant::kRowPerWarp);
  // Enough rows to fill the GPU (256 >= any SM count here): long 16-bit rows are staged in shared
  // memory; 4096-wide 16-bit rows and fp32 rows stay in registers.
  const int64_t rows = 256, long_cols = 32000;
  DeviceBuffer big_x(rows * long_cols * 4), big_y(rows * long_cols * 4);
  ASSERT_TRUE(softmax_select_variant(big_x.ptr, big_y.ptr, rows, long_cols, DType::kBFloat16, SoftmaxVariant::kAuto, &chosen).ok());
  EXPECT_EQ(chosen, SoftmaxVariant::kRowInSharedMem);
  ASSERT_TRUE(softmax_select_variant(big_x.ptr, big_y.ptr, rows, 4096, DType::kFloat16, SoftmaxVariant::kAuto, &chosen).ok());
  EXPECT_EQ(chosen, SoftmaxVariant::kRowPerBlock);
  ASSERT_TRUE(softmax_select_variant(big_x.ptr, big_y.ptr, rows, long_cols, DType::kFloat32, SoftmaxVariant::kAuto, &chosen).ok());
  EXPECT_EQ(chosen, SoftmaxVariant::kRowPerBlock);
  const Status too_long = softmax_select_variant(big_x.ptr, big_y.ptr, 1, 65537, DType::kBFloat16,
                                                 SoftmaxVariant::kRowInSharedMem, &chosen);
  EXPECT_EQ(too_long.code, StatusCode::kUnsupported);
  EXPECT_NE(too_long.message.find("bytes <= "), std::string::npos) << too_long.message;
  const Status refused = softmax_select_variant(x.ptr, y.ptr, 1, 4095, DType::kFloat32, SoftmaxVariant::kVectorized, &chosen);
  EXPECT_EQ(refused.code, StatusCode::kUnsupported);
  EXPECT_NE(refused.message.find("cols = 4095"), std::string::npos) << refused.message;
}

TEST(SoftmaxGpu, RejectsHostOutputForDeviceInput) {
  FC_REQUIRE_SM(80);
  DeviceBuffer x(64 * 4);
  std::vector<float> y(64, 0.0f);
  const Status st = softmax_forward(x.ptr, y.data(), nullptr, 2, 32, DType::kFloat32);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message.rfind("y:", 0), 0u) << st.message;
  std::vector<float> lse(2);
  DeviceBuffer y_dev(64 * 4);
  const Status st_lse = softmax_forward(x.ptr, y_dev.ptr, lse.data(), 2, 32, DType::kFloat32);
  EXPECT_EQ(st_lse.code, StatusCode::kInvalidArgument);
  EXPECT_EQ(st_lse.message.rfind("lse:", 0), 0u) << st_lse.message;
}

TEST(SoftmaxGpu, CAbiRunsOnDevicePointers) {
  FC_REQUIRE_SM(80);
  const int64_t rows = 8, cols = 33;
  const std::vector<float> x = make_input(rows, cols, DType::kFloat32, 3u);
  const Reference ref = reference_for(x, rows, cols);
  DeviceBuffer x_dev(x.size() * 4), y_dev(x.size() * 4), lse_dev(rows * 4);
  ASSERT_EQ(cudaMemcpy(x_dev.ptr, x.data(), x.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(fc_softmax_forward(x_dev.ptr, y_dev.ptr, static_cast<float*>(lse_dev.ptr), rows, cols,
                               FC_SOFTMAX_DTYPE_FLOAT32, FC_SOFTMAX_VARIANT_ONLINE, nullptr),
            FC_SOFTMAX_OK)
      << fc_softmax_last_error();
  RunResult run;
  run.y.resize(x.size() * 4);
  run.lse.resize(rows);
  ASSERT_EQ(cudaMemcpy(run.y.data(), y_dev.ptr, run.y.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(run.lse.data(), lse_dev.ptr, rows * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  expect_matches_reference(run, ref, x, rows, cols, DType::kFloat32);
}

}  // namespace
}  // namespace flashcore
