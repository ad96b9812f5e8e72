// merge_attention_states on device pointers (the CUDA kernel) against the CPU implementation on the
// same inputs: fp32 outputs and lse bitwise equal or within 1 ulp, fp16/bf16 outputs bitwise equal
// (both sides round the same fp32 value), NaN where the CPU has NaN. Device outputs are poisoned
// with NaN before each run: every logical element must be overwritten, padding never. Covers the
// 16-byte vector path and the scalar path (odd head dims, misaligned bases and strides), in place,
// strided layouts, empty sides, NaN, several blocks, and the placement rule.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include "common/dtype.hpp"
#include "common/gpu.hpp"
#include "flashcore/flashcore.hpp"
#include "merge/merge_states.hpp"

namespace {

using flashcore::DType;
using flashcore::MergeStatesParams;
using flashcore::Status;
using flashcore::StatusCode;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr uint8_t kPoison = 0xFF;  // NaN in every dtype

struct Case {
  int batch = 2, seqlen = 7, heads = 3, head_dim = 64;
  DType dtype = DType::kFloat16;
  int pad = 0;            // unused elements after each head, token and batch entry of o_a, o_b, o
  int lse_pad = 0;        // unused floats after each head and batch entry of the lse tensors
  int misalign = 0;       // o_a, o_b, o start this many elements into their allocations
  bool nan_inputs = false;
  uint64_t seed = 1;
};

std::string describe(const Case& c) {
  return std::string(flashcore::dtype_name(c.dtype)) + " B=" + std::to_string(c.batch) + " S=" +
         std::to_string(c.seqlen) + " H=" + std::to_string(c.heads) + " D=" + std::to_string(c.head_dim) +
         " pad=" + std::to_string(c.pad) + " lse_pad=" + std::to_string(c.lse_pad) +
         " misalign=" + std::to_string(c.misalign) + (c.nan_inputs ? " nan" : "");
}

// Strides of every o tensor ([B, S, H, D] with padding) and every lse tensor ([B, H, S] with padding).
struct Layout {
  int64_t head, seq, batch, o_elems;  // o_elems includes `misalign`
  int64_t lse_head, lse_batch, lse_elems;
};

Layout layout_of(const Case& c) {
  Layout l;
  l.head = c.head_dim + c.pad;
  l.seq = c.heads * l.head + c.pad;
  l.batch = c.seqlen * l.seq + c.pad;
  l.o_elems = c.batch * l.batch + c.misalign;
  l.lse_head = c.seqlen + c.lse_pad;
  l.lse_batch = c.heads * l.lse_head + c.lse_pad;
  l.lse_elems = c.batch * l.lse_batch;
  return l;
}

// Host inputs: o ~ N(0, 1) in the dtype, lse uniform in [-8, 8] with empty sides (-inf, +inf), both
// empty, far-apart and equal values mixed in; with nan_inputs also NaN lse rows and NaN o elements.
// Everything outside the logical tensors (padding, the misaligned prefix) is poison (NaN): a kernel
// that read it would show NaN, and in place the o_a / lse_a buffers start out as the host's poisoned
// outputs do.
struct Inputs {
  std::vector<uint8_t> o_a, o_b;
  std::vector<float> lse_a, lse_b;
};

int64_t o_index(const Case& c, const Layout& l, int b, int s, int h) {
  return c.misalign + b * l.batch + s * l.seq + h * l.head;
}
int64_t lse_index(const Layout& l, int b, int s, int h) { return b * l.lse_batch + h * l.lse_head + s; }

Inputs make_inputs(const Case& c, const Layout& l) {
  const int elem = flashcore::dtype_size(c.dtype);
  Inputs in;
  in.o_a.assign(size_t(l.o_elems * elem), kPoison);
  in.o_b.assign(size_t(l.o_elems * elem), kPoison);
  in.lse_a.assign(size_t(l.lse_elems), kNaN);
  in.lse_b.assign(size_t(l.lse_elems), kNaN);
  std::mt19937_64 rng(c.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  int64_t row = 0, element = 0;
  for (int b = 0; b < c.batch; ++b)
    for (int s = 0; s < c.seqlen; ++s)
      for (int h = 0; h < c.heads; ++h, ++row) {
        for (int d = 0; d < c.head_dim; ++d, ++element) {
          const int64_t at = o_index(c, l, b, s, h) + d;
          const bool nan = c.nan_inputs && element % 37 == 5;
          flashcore::store_from_float(in.o_a.data(), at, nan ? kNaN : normal(rng), c.dtype);
          flashcore::store_from_float(in.o_b.data(), at, normal(rng), c.dtype);
        }
        float x = uniform(rng), y = uniform(rng);
        switch (row % 11) {
          case 0: x = -kInf; break;
          case 1: y = kInf; break;
          case 2: x = y = -kInf; break;
          case 3: x = kInf, y = -kInf; break;
          case 4: y = x - 60.0f; break;
          case 5: y = x; break;
          default: break;
        }
        if (c.nan_inputs && row % 13 == 7) (row % 2 ? x : y) = kNaN;
        in.lse_a[size_t(lse_index(l, b, s, h))] = x;
        in.lse_b[size_t(lse_index(l, b, s, h))] = y;
      }
  return in;
}

// params over the given o and lse base pointers (element offset `misalign` applied to the o tensors).
MergeStatesParams make_params(const Case& c, const Layout& l, const void* o_a, const float* lse_a, const void* o_b,
                              const float* lse_b, void* o, float* lse) {
  const int elem = flashcore::dtype_size(c.dtype);
  auto shift = [&](const void* p) { return static_cast<const uint8_t*>(p) + c.misalign * elem; };
  MergeStatesParams p;
  p.o_a = shift(o_a), p.o_b = shift(o_b), p.o = const_cast<uint8_t*>(shift(o));
  p.lse_a = lse_a, p.lse_b = lse_b, p.lse = lse;
  p.batch = c.batch, p.seqlen = c.seqlen, p.heads = c.heads, p.head_dim = c.head_dim, p.dtype = c.dtype;
  p.o_a_batch_stride = p.o_b_batch_stride = p.o_batch_stride = l.batch;
  p.o_a_seq_stride = p.o_b_seq_stride = p.o_seq_stride = l.seq;
  p.o_a_head_stride = p.o_b_head_stride = p.o_head_stride = l.head;
  p.lse_a_batch_stride = p.lse_b_batch_stride = p.lse_batch_stride = l.lse_batch;
  p.lse_a_head_stride = p.lse_b_head_stride = p.lse_head_stride = l.lse_head;
  return p;
}

// A device allocation freed on scope exit.
struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  explicit DeviceBuffer(size_t n) : bytes(n) { EXPECT_EQ(cudaMalloc(&ptr, n == 0 ? 1 : n), cudaSuccess); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <class T>
  static DeviceBuffer* upload(const std::vector<T>& host) {
    auto* d = new DeviceBuffer(host.size() * sizeof(T));
    EXPECT_EQ(cudaMemcpy(d->ptr, host.data(), d->bytes, cudaMemcpyHostToDevice), cudaSuccess);
    return d;
  }
  template <class T>
  std::vector<T> download() const {
    std::vector<T> host(bytes / sizeof(T));
    EXPECT_EQ(cudaMemcpy(host.data(), ptr, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }
};

// Ordered distance of two floats in ulps (0 for +0 and -0; NaN only matches NaN).
bool within_one_ulp(float x, float y) {
  if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);
  if (x == y) return true;
  auto ordered = [](float f) {
    const int64_t b = int32_t(flashcore::float_to_bits(f));
    return b < 0 ? int64_t(INT32_MIN) - b : b;
  };
  return std::llabs(ordered(x) - ordered(y)) <= 1;
}

struct Outputs {
  std::vector<uint8_t> o;
  std::vector<float> lse;
};

// The CPU implementation's outputs (o and lse poisoned first, like the device's).
Outputs run_on_host(const Case& c, const Layout& l, const Inputs& in) {
  Outputs out;
  out.o.assign(size_t(l.o_elems) * flashcore::dtype_size(c.dtype), kPoison);
  out.lse.assign(size_t(l.lse_elems), kNaN);
  const MergeStatesParams p =
      make_params(c, l, in.o_a.data(), in.lse_a.data(), in.o_b.data(), in.lse_b.data(), out.o.data(), out.lse.data());
  const Status st = flashcore::merge_attention_states(p);
  EXPECT_TRUE(st.ok()) << st.message;
  return out;
}

// Compares device outputs with the host's over the whole buffers: logical elements as described at
// the top, everything else (padding, the misaligned prefix) still poison on both.
void expect_device_matches_host(const Case& c, const Outputs& host, const Outputs& dev) {
  ASSERT_EQ(host.o.size(), dev.o.size());
  ASSERT_EQ(host.lse.size(), dev.lse.size());
  int64_t bad = 0;
  const int64_t elems = int64_t(host.o.size()) / flashcore::dtype_size(c.dtype);
  for (int64_t i = 0; i < elems && bad < 10; ++i) {
    const float h = flashcore::load_as_float(host.o.data(), i, c.dtype);
    const float d = flashcore::load_as_float(dev.o.data(), i, c.dtype);
    const bool ok = c.dtype == DType::kFloat32 ? within_one_ulp(h, d)
                                               : (std::isnan(h) ? std::isnan(d) : std::memcmp(&host.o[size_t(i) * 2],
                                                                                             &dev.o[size_t(i) * 2], 2) == 0);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << describe(c) << ": o element " << i << ": device " << d << ", host " << h;
    }
  }
  for (size_t i = 0; i < host.lse.size() && bad < 10; ++i) {
    if (!within_one_ulp(host.lse[i], dev.lse[i])) {
      ++bad;
      ADD_FAILURE() << describe(c) << ": lse " << i << ": device " << dev.lse[i] << ", host " << host.lse[i];
    }
  }
  // Poison is NaN, so unwritten logical elements show up above wherever the host wrote a number;
  // where the host left poison (padding), the device's bytes must be poison too.
  const int elem = flashcore::dtype_size(c.dtype);
  int64_t padding_written = 0;
  for (int64_t i = 0; i < elems; ++i) {
    bool host_poison = true, dev_poison = true;
    for (int k = 0; k < elem; ++k) {
      host_poison = host_poison && host.o[size_t(i * elem + k)] == kPoison;
      dev_poison = dev_poison && dev.o[size_t(i * elem + k)] == kPoison;
    }
    padding_written += host_poison && !dev_poison;
  }
  EXPECT_EQ(padding_written, 0) << describe(c);
}

// Runs `c` on the device (outputs poisoned with NaN first) on a non-default stream.
Outputs run_on_device(const Case& c, const Layout& l, const Inputs& in, bool in_place = false) {
  std::unique_ptr<DeviceBuffer> o_a(DeviceBuffer::upload(in.o_a)), o_b(DeviceBuffer::upload(in.o_b));
  std::unique_ptr<DeviceBuffer> lse_a(DeviceBuffer::upload(in.lse_a)), lse_b(DeviceBuffer::upload(in.lse_b));
  DeviceBuffer o(in.o_a.size()), lse(in.lse_a.size() * sizeof(float));
  EXPECT_EQ(cudaMemset(o.ptr, kPoison, o.bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(lse.ptr, kPoison, lse.bytes), cudaSuccess);
  // cudaMemset runs on the legacy default stream, which the non-blocking stream below does not wait
  // for: finish the poison before the kernel can write.
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  void* o_out = o.ptr;
  float* lse_out = static_cast<float*>(lse.ptr);
  if (in_place) {  // o_a's and lse_a's buffers: padding and prefix are already poison (make_inputs)
    o_out = o_a->ptr;
    lse_out = static_cast<float*>(lse_a->ptr);
  }
  cudaStream_t stream = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const MergeStatesParams p = make_params(c, l, o_a->ptr, static_cast<const float*>(lse_a->ptr), o_b->ptr,
                                          static_cast<const float*>(lse_b->ptr), o_out, lse_out);
  const Status st = flashcore::merge_attention_states(p, stream);
  EXPECT_TRUE(st.ok()) << describe(c) << ": " << st.message;
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  Outputs out;
  out.o = in_place ? o_a->download<uint8_t>() : o.download<uint8_t>();
  out.lse = in_place ? lse_a->download<float>() : lse.download<float>();
  return out;
}

// The whole check of one case; `vector_path` is what can_use_vector_loads must say.
void check_case(const Case& c, bool vector_path, bool in_place = false) {
  const Layout l = layout_of(c);
  const Inputs in = make_inputs(c, l);
  {
    // The kernel's choice is made on the device pointers; alignments of cudaMalloc (256 bytes) and
    // of std::vector (16) agree for every offset used here, so the host pointers predict it.
    const MergeStatesParams p = make_params(c, l, in.o_a.data(), in.lse_a.data(), in.o_b.data(), in.lse_b.data(),
                                            const_cast<uint8_t*>(in.o_b.data()), nullptr);
    EXPECT_EQ(flashcore::merge::can_use_vector_loads(p), vector_path) << describe(c);
  }
  const Outputs host = run_on_host(c, l, in);
  const Outputs dev = run_on_device(c, l, in, in_place);
  expect_device_matches_host(c, host, dev);
}

TEST(MergeStatesGpu, VectorPathMatchesCpuInEveryDtype) {
  FC_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int d : {8, 64, 128, 256, 1024}) {
      Case c;
      c.dtype = dtype, c.head_dim = d, c.seed = uint64_t(d) + 100 * int(dtype);
      check_case(c, true);
    }
}

TEST(MergeStatesGpu, OddHeadDimsTakeTheScalarPath) {
  FC_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int d : {1, 3, 33, 100, 1023}) {
      Case c;
      c.dtype = dtype, c.head_dim = d, c.seed = uint64_t(d) + 7;
      const int per_vector = 16 / flashcore::dtype_size(dtype);
      check_case(c, d % per_vector == 0);  // d = 100 is whole vectors of fp32 only
    }
}

TEST(MergeStatesGpu, MisalignedBasesAndStridesTakeTheScalarPath) {
  FC_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Case c;
    c.dtype = dtype, c.misalign = 1;  // base one element past a 16-byte boundary
    check_case(c, false);
    Case s;
    s.dtype = dtype, s.pad = 3, s.lse_pad = 1;  // head stride D + 3
    check_case(s, false);
  }
}

TEST(MergeStatesGpu, PaddedLayoutsWithVectorStridesTakeTheVectorPath) {
  FC_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    Case c;
    c.dtype = dtype, c.pad = 8, c.lse_pad = 3, c.head_dim = 128;
    check_case(c, true);
  }
}

TEST(MergeStatesGpu, InPlaceIntoOaAndLseAMatchesCpu) {
  FC_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int d : {64, 33}) {
      Case c;
      c.dtype = dtype, c.head_dim = d, c.pad = 8, c.lse_pad = 2;
      check_case(c, d == 64, /*in_place=*/true);
    }
}

TEST(MergeStatesGpu, NanPropagatesLikeTheCpu) {
  FC_REQUIRE_GPU();
  for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16})
    for (int d : {64, 17}) {
      Case c;
      c.dtype = dtype, c.head_dim = d, c.nan_inputs = true;
      check_case(c, d == 64);
    }
}

TEST(MergeStatesGpu, ManyRowsSpanManyBlocks) {
  FC_REQUIRE_GPU();
  Case big;
  big.dtype = DType::kBFloat16, big.batch = 3, big.seqlen = 1000, big.heads = 8, big.head_dim = 128;
  check_case(big, true);
  Case thin;  // one thread per row, 256 rows per block
  thin.dtype = DType::kFloat32, thin.batch = 2, thin.seqlen = 3001, thin.heads = 5, thin.head_dim = 1;
  check_case(thin, false);
}

TEST(MergeStatesGpu, TensorsOnBothSidesAreRejectedNamingTheTensor) {
  FC_REQUIRE_GPU();
  Case c;
  const Layout l = layout_of(c);
  const Inputs in = make_inputs(c, l);
  std::unique_ptr<DeviceBuffer> o_a(DeviceBuffer::upload(in.o_a)), lse_a(DeviceBuffer::upload(in.lse_a));
  DeviceBuffer o(in.o_a.size());
  ASSERT_EQ(cudaMemset(o.ptr, kPoison, o.bytes), cudaSuccess);
  // o_b and lse_b on the host, the rest on the device.
  MergeStatesParams p = make_params(c, l, o_a->ptr, static_cast<const float*>(lse_a->ptr), in.o_b.data(),
                                    static_cast<const float*>(lse_a->ptr), o.ptr, nullptr);
  p.lse_b = in.lse_b.data();
  Status st = flashcore::merge_attention_states(p);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_NE(st.message.find("o_b: must live in the same memory as o_a (device)"), std::string::npos) << st.message;
  // A host o for device inputs.
  std::unique_ptr<DeviceBuffer> o_b(DeviceBuffer::upload(in.o_b));
  std::vector<uint8_t> host_o(in.o_a.size(), kPoison);
  p = make_params(c, l, o_a->ptr, static_cast<const float*>(lse_a->ptr), o_b->ptr,
                  static_cast<const float*>(lse_a->ptr), host_o.data(), nullptr);
  st = flashcore::merge_attention_states(p);
  EXPECT_EQ(st.code, StatusCode::kInvalidArgument);
  EXPECT_NE(st.message.find("o: must live in the same memory as o_a (device)"), std::string::npos) << st.message;
  EXPECT_EQ(host_o, std::vector<uint8_t>(in.o_a.size(), kPoison));
  const std::vector<uint8_t> dev_o = o.download<uint8_t>();
  EXPECT_EQ(dev_o, std::vector<uint8_t>(in.o_a.size(), kPoison));
}

TEST(MergeStatesGpu, ZeroSizeCallWithDevicePointersLaunchesNothing) {
  FC_REQUIRE_GPU();
  DeviceBuffer buf(1024);
  MergeStatesParams p;
  p.o_a = p.o_b = p.o = buf.ptr;  // would overlap if any row existed
  p.lse_a = p.lse_b = p.lse = static_cast<float*>(buf.ptr);
  p.batch = 2, p.seqlen = 0, p.heads = 4, p.head_dim = 64;
  EXPECT_TRUE(flashcore::merge_attention_states(p).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

}  // namespace
