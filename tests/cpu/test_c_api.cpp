// The C ABI (include/flashcore/flashcore.h): defaults, status codes, the thread-local error message,
// fc_supports' reason text. Host pointers only; runs without a GPU.
#include "flashcore/flashcore.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "flashcore/flashcore.hpp"

namespace {

constexpr uint8_t kPoison = 0xA5;

// A small valid fp16 host problem: B=1, Sq=Sk=4, Hq=Hkv=2, D=16.
struct HostProblem {
  static constexpr int kElems = 1 * 4 * 2 * 16;
  alignas(64) uint16_t q[kElems];
  alignas(64) uint16_t k[kElems];
  alignas(64) uint16_t v[kElems];
  alignas(64) uint16_t o[kElems];
  alignas(64) float lse[1 * 2 * 4];
  fc_attention_params params;

  HostProblem() {
    std::memset(this, kPoison, sizeof(*this));
    EXPECT_EQ(fc_params_init(&params), FC_STATUS_OK);
    params.q = q;
    params.k = k;
    params.v = v;
    params.o = o;
    params.lse = lse;
    params.batch = 1;
    params.seqlen_q = params.seqlen_k = 4;
    params.heads_q = params.heads_kv = 2;
    params.head_dim_qk = params.head_dim_v = 16;
    EXPECT_EQ(fc_set_dense_strides(&params), FC_STATUS_OK);
  }
  bool outputs_poisoned() const {
    const auto* o_bytes = reinterpret_cast<const uint8_t*>(o);
    const auto* lse_bytes = reinterpret_cast<const uint8_t*>(lse);
    for (size_t i = 0; i < sizeof(o); ++i) {
      if (o_bytes[i] != kPoison) return false;
    }
    for (size_t i = 0; i < sizeof(lse); ++i) {
      if (lse_bytes[i] != kPoison) return false;
    }
    return true;
  }
};

bool contains(const char* text, const char* word) { return std::strstr(text, word) != nullptr; }

TEST(CApi, ParamsInitSetsDefaults) {
  fc_attention_params p;
  std::memset(&p, 0x5a, sizeof(p));
  ASSERT_EQ(fc_params_init(&p), FC_STATUS_OK);
  EXPECT_EQ(p.struct_size, sizeof(fc_attention_params));
  EXPECT_EQ(p.window_left, FC_WINDOW_INFINITE);
  EXPECT_EQ(p.window_right, FC_WINDOW_INFINITE);
  EXPECT_EQ(p.causal, 0);
  EXPECT_EQ(p.dtype, FC_DTYPE_FLOAT16);
  EXPECT_EQ(p.mask_align, FC_MASK_ALIGN_BOTTOM_RIGHT);
  EXPECT_EQ(p.path, FC_PATH_AUTO);
  EXPECT_EQ(p.softmax_scale, 0.0f);
  EXPECT_EQ(p.softcap, 0.0f);
  EXPECT_EQ(p.num_splits, 0);
  EXPECT_EQ(p.batch, 0);
  EXPECT_EQ(p.q_seq_stride, 0);
  EXPECT_EQ(p.total_q, 0);
  EXPECT_EQ(p.q, nullptr);
  EXPECT_EQ(p.lse, nullptr);
  EXPECT_EQ(p.alibi_slopes, nullptr);
  EXPECT_EQ(p.cu_seqlens_q, nullptr);
  EXPECT_EQ(p.seqused_k, nullptr);
  EXPECT_STREQ(fc_last_error_message(), "");
}

TEST(CApi, NullParamsIsAnErrorNamingParams) {
  EXPECT_EQ(fc_params_init(nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "params: must not be null")) << fc_last_error_message();
  EXPECT_EQ(fc_set_dense_strides(nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(fc_validate(nullptr, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(fc_attention_forward(nullptr, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "params")) << fc_last_error_message();
  char reason[128];
  EXPECT_EQ(fc_supports(nullptr, FC_PATH_AUTO, reason, sizeof(reason)), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(reason, "params: must not be null")) << reason;
}

TEST(CApi, RejectsStructNotInitialisedByParamsInit) {
  HostProblem prob;
  prob.params.struct_size = 0;  // e.g. a zero-filled ctypes struct: windows would read as 0, not -1
  EXPECT_EQ(fc_attention_forward(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "params.struct_size")) << fc_last_error_message();
  EXPECT_TRUE(contains(fc_last_error_message(), "fc_params_init")) << fc_last_error_message();
  EXPECT_TRUE(prob.outputs_poisoned());
}

TEST(CApi, RejectsCausalOtherThanZeroOrOne) {
  HostProblem prob;
  prob.params.causal = 2;
  EXPECT_EQ(fc_validate(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "causal: must be 0 or 1 (got 2)")) << fc_last_error_message();
}

TEST(CApi, DenseStridesMatchTheCppApi) {
  fc_attention_params c;
  fc_params_init(&c);
  c.batch = 3; c.seqlen_q = 5; c.seqlen_k = 9; c.heads_q = 8; c.heads_kv = 2;
  c.head_dim_qk = 64; c.head_dim_v = 32;
  ASSERT_EQ(fc_set_dense_strides(&c), FC_STATUS_OK);
  flashcore::AttentionParams p;
  p.batch = 3; p.seqlen_q = 5; p.seqlen_k = 9; p.heads_q = 8; p.heads_kv = 2;
  p.head_dim_qk = 64; p.head_dim_v = 32;
  flashcore::set_dense_strides(p);
  EXPECT_EQ(c.q_batch_stride, p.q_batch_stride);
  EXPECT_EQ(c.q_seq_stride, p.q_seq_stride);
  EXPECT_EQ(c.k_batch_stride, p.k_batch_stride);
  EXPECT_EQ(c.v_seq_stride, p.v_seq_stride);
  EXPECT_EQ(c.o_head_stride, p.o_head_stride);
  EXPECT_EQ(c.o_batch_stride, p.o_batch_stride);
  EXPECT_EQ(c.lse_batch_stride, p.lse_batch_stride);
  EXPECT_EQ(c.lse_head_stride, p.lse_head_stride);
}

TEST(CApi, InvalidCallReturnsCodeAndMessageAndWritesNothing) {
  HostProblem prob;
  prob.params.heads_q = 6;
  prob.params.heads_kv = 4;
  EXPECT_EQ(fc_attention_forward(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_STREQ(fc_last_error_message(), "heads_q: must be a multiple of heads_kv (got heads_q=6, heads_kv=4)");
  EXPECT_TRUE(prob.outputs_poisoned());
}

TEST(CApi, EnumFieldsReachValidationUnchanged) {
  HostProblem prob;
  prob.params.dtype = 7;
  EXPECT_EQ(fc_validate(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "dtype: must be one of")) << fc_last_error_message();
  prob.params.dtype = FC_DTYPE_FLOAT16;
  prob.params.mask_align = 5;
  EXPECT_EQ(fc_validate(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "mask_align")) << fc_last_error_message();
}

TEST(CApi, SuccessClearsTheMessage) {
  HostProblem prob;
  prob.params.window_left = -3;
  ASSERT_EQ(fc_validate(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  ASSERT_STRNE(fc_last_error_message(), "");
  prob.params.window_left = FC_WINDOW_INFINITE;
  EXPECT_EQ(fc_validate(&prob.params, nullptr), FC_STATUS_OK);
  EXPECT_STREQ(fc_last_error_message(), "");
}

TEST(CApi, LastErrorMessageIsThreadLocal) {
  HostProblem prob;
  prob.params.softcap = -1.0f;
  ASSERT_EQ(fc_validate(&prob.params, nullptr), FC_STATUS_INVALID_ARGUMENT);
  const std::string main_message = fc_last_error_message();
  ASSERT_TRUE(contains(main_message.c_str(), "softcap")) << main_message;

  std::string fresh_thread_message = "unset", other_thread_message;
  std::thread fresh([&] { fresh_thread_message = fc_last_error_message(); });
  fresh.join();
  EXPECT_EQ(fresh_thread_message, "") << "a thread that made no call must see no message";

  std::thread other([&] {
    HostProblem other_prob;
    other_prob.params.window_right = -7;
    fc_validate(&other_prob.params, nullptr);
    other_thread_message = fc_last_error_message();
  });
  other.join();
  EXPECT_TRUE(contains(other_thread_message.c_str(), "window_right")) << other_thread_message;
  EXPECT_EQ(std::string(fc_last_error_message()), main_message) << "another thread's failure changed ours";

  std::thread clearing([&] {
    HostProblem ok_prob;
    fc_validate(&ok_prob.params, nullptr);  // success on that thread clears only its own message
  });
  clearing.join();
  EXPECT_EQ(std::string(fc_last_error_message()), main_message);
}

TEST(CApi, SupportsAnswersWithReasonText) {
  HostProblem prob;
  char reason[512];
  // Host pointers: the CPU reference can run the call, so auto finds a path.
  EXPECT_EQ(fc_supports(&prob.params, FC_PATH_CPU_REFERENCE, reason, sizeof(reason)), FC_STATUS_OK) << reason;
  EXPECT_STREQ(reason, "");
  EXPECT_STREQ(fc_last_error_message(), "");
  EXPECT_EQ(fc_supports(&prob.params, FC_PATH_AUTO, reason, sizeof(reason)), FC_STATUS_OK) << reason;
  // A GPU path cannot run host pointers (or is not built): unsupported, with the reason in both places.
  EXPECT_EQ(fc_supports(&prob.params, FC_PATH_SM90, reason, sizeof(reason)), FC_STATUS_UNSUPPORTED);
  EXPECT_GT(std::strlen(reason), 10u);
  EXPECT_STREQ(reason, fc_last_error_message());
}

TEST(CApi, SupportsTruncatesTheReasonToTheBuffer) {
  HostProblem prob;
  char full[512];
  ASSERT_EQ(fc_supports(&prob.params, FC_PATH_SM90, full, sizeof(full)), FC_STATUS_UNSUPPORTED);
  char small[8];
  std::memset(small, 'x', sizeof(small));
  ASSERT_EQ(fc_supports(&prob.params, FC_PATH_SM90, small, sizeof(small)), FC_STATUS_UNSUPPORTED);
  EXPECT_EQ(std::strlen(small), sizeof(small) - 1);
  EXPECT_EQ(std::string(full).substr(0, sizeof(small) - 1), std::string(small));
  EXPECT_EQ(fc_supports(&prob.params, FC_PATH_SM90, nullptr, 0), FC_STATUS_UNSUPPORTED);
}

TEST(CApi, SupportsRejectsInvalidCallsAndUnknownPaths) {
  HostProblem prob;
  char reason[256];
  EXPECT_EQ(fc_supports(&prob.params, 9, reason, sizeof(reason)), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(reason, "path: must be one of")) << reason;
  prob.params.head_dim_qk = 0;
  EXPECT_EQ(fc_supports(&prob.params, FC_PATH_CPU_REFERENCE, reason, sizeof(reason)), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(reason, "head_dim_qk: must be >= 1")) << reason;
}

TEST(CApi, StatusNamesMatchTheCppApi) {
  EXPECT_STREQ(fc_status_name(FC_STATUS_OK), "ok");
  EXPECT_STREQ(fc_status_name(FC_STATUS_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(fc_status_name(FC_STATUS_UNSUPPORTED), "unsupported");
  EXPECT_STREQ(fc_status_name(FC_STATUS_CUDA_ERROR), "CUDA error");
  EXPECT_STREQ(fc_status_name(FC_STATUS_INTERNAL), "internal error");
  EXPECT_STREQ(fc_status_name(42), "unknown");
  EXPECT_EQ(FC_STATUS_INVALID_ARGUMENT, static_cast<int>(flashcore::StatusCode::kInvalidArgument));
}

TEST(CApi, BuildInfoNamesTheLibrary) {
  const std::string info = fc_build_info();
  EXPECT_EQ(info.rfind("flashcore ", 0), 0u) << info;
  EXPECT_EQ(info, flashcore::build_info());
}

}  // namespace

namespace {

// The backward through the C ABI computes exactly what the C++ API does, and its errors name the
// argument (here the missing lse) with nothing written.
TEST(CApi, BackwardMatchesTheCppApiAndNamesErrors) {
  HostProblem h;
  ASSERT_EQ(fc_attention_forward(&h.params, nullptr), FC_STATUS_OK) << fc_last_error_message();
  alignas(64) uint16_t dout[HostProblem::kElems];
  alignas(64) uint16_t dq[HostProblem::kElems], dk[HostProblem::kElems], dv[HostProblem::kElems];
  alignas(64) uint16_t dq_cpp[HostProblem::kElems], dk_cpp[HostProblem::kElems], dv_cpp[HostProblem::kElems];
  for (int i = 0; i < HostProblem::kElems; ++i) dout[i] = uint16_t(0x3000 + (i * 37) % 0x0800);  // fp16 in [0.125, 0.25)
  fc_backward_params bp;
  ASSERT_EQ(fc_backward_params_init(&bp), FC_STATUS_OK);
  bp.forward = h.params;
  ASSERT_EQ(fc_set_grad_strides_like_forward(&bp), FC_STATUS_OK);
  bp.dout = dout, bp.dq = dq, bp.dk = dk, bp.dv = dv;

  fc_backward_params no_lse = bp;
  no_lse.forward.lse = nullptr;
  std::memset(dq, 0xA5, sizeof(dq));
  EXPECT_EQ(fc_attention_backward(&no_lse, nullptr), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_TRUE(contains(fc_last_error_message(), "lse")) << fc_last_error_message();
  for (uint16_t x : dq) ASSERT_EQ(x, 0xA5A5);

  ASSERT_EQ(fc_attention_backward(&bp, nullptr), FC_STATUS_OK) << fc_last_error_message();
  flashcore::BackwardParams cpp;
  flashcore::AttentionParams& f = cpp.forward;
  f.q = h.q, f.k = h.k, f.v = h.v, f.o = h.o, f.lse = h.lse;
  f.batch = 1, f.seqlen_q = f.seqlen_k = 4, f.heads_q = f.heads_kv = 2, f.head_dim_qk = f.head_dim_v = 16;
  flashcore::set_dense_strides(f);
  flashcore::set_grad_strides_like_forward(cpp);
  cpp.dout = dout, cpp.dq = dq_cpp, cpp.dk = dk_cpp, cpp.dv = dv_cpp;
  ASSERT_TRUE(flashcore::attention_backward(cpp).ok());
  EXPECT_EQ(std::memcmp(dq, dq_cpp, sizeof(dq)), 0);
  EXPECT_EQ(std::memcmp(dk, dk_cpp, sizeof(dk)), 0);
  EXPECT_EQ(std::memcmp(dv, dv_cpp, sizeof(dv)), 0);
  EXPECT_EQ(fc_attention_backward(nullptr, nullptr), FC_STATUS_INVALID_ARGUMENT);
}

}  // namespace

// The slow-path policy through the C ABI: the three values round-trip, anything else is refused
// with the argument named and the policy unchanged. (Host calls never reach the naive GPU kernel,
// so the policy does not touch them: a CPU-reference call runs in strict mode.)
TEST(CApi, SlowPathPolicyRoundTripsAndRejectsUnknownValues) {
  const int32_t saved = fc_slow_path_policy();
  for (int32_t policy : {FC_SLOW_PATH_ERROR, FC_SLOW_PATH_ALLOW, FC_SLOW_PATH_WARN}) {
    EXPECT_EQ(fc_set_slow_path_policy(policy), FC_STATUS_OK);
    EXPECT_EQ(fc_slow_path_policy(), policy);
  }
  EXPECT_EQ(fc_set_slow_path_policy(7), FC_STATUS_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fc_last_error_message()).find("policy"), std::string::npos) << fc_last_error_message();
  EXPECT_EQ(fc_slow_path_policy(), FC_SLOW_PATH_WARN);
  EXPECT_EQ(fc_set_slow_path_policy(saved), FC_STATUS_OK);
}

// Without a device check having run (CPU-only calls), fc_check_errors has nothing to report and needs
// no device.
TEST(CApi, CheckErrorsIsOkWhenNoDeviceCheckRan) {
  EXPECT_EQ(fc_check_errors(nullptr), FC_STATUS_OK) << fc_last_error_message();
}
