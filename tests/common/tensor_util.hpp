// Test utilities shared by the CPU tests and the GPU tests of every kernel path:
//   - TestCase: one attention problem (shape, dtype, masks, score transforms, varlen, layout, seed);
//   - HostProblem: its host tensors (random normal * scale, rounded to the dtype) and an
//     AttentionParams pointing at them with the strides of the chosen layout;
//   - error metrics against an fp64 reference (relative Frobenius, max-abs, NaN/Inf never pass);
//   - poisoning outputs and checking every element was written;
//   - the tolerance baseline: a naive same-dtype reference (fp32 accumulation, inputs and the
//     probabilities P rounded to the dtype) whose error a kernel may exceed by at most 2x.
// Dense reference order everywhere: out [rows, Hq, Dv], lse [rows, Hq] (see reference/cpu_reference.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "flashcore/flashcore.hpp"

namespace flashcore::testing {

// How q/k/v/o are laid out in memory (lse is always [B, Hq, Sq], or [Hq, total_q] for varlen).
enum class Layout {
  kBSHD,        // flash-attn's dense [B, S, H, D]
  kBHSD,        // PyTorch's [B, H, S, D] (dense only; not for varlen)
  kPaddedBSHD,  // [B, S, H, D] with kLayoutPad unused elements after each head and each token
  kOddBSHD,     // [B, S, H, D] with one unused element after each head and each token: strides that
                // no 16-byte vector access allows (the realigned-copy tests, api/realign.hpp)
};
inline constexpr int kLayoutPad = 8;  // a multiple of 8 keeps 16-byte alignment for vector loads

enum class AlibiLayout { kNone, kPerHead /* [Hq] */, kPerBatchHead /* [B, Hq] */ };

struct TestCase {
  int batch = 1;
  int seqlen_q = 1, seqlen_k = 1;  // dense sizes (varlen: derived from the lists below)
  int heads_q = 1, heads_kv = 1;
  int head_dim_qk = 64, head_dim_v = 64;
  DType dtype = DType::kFloat16;
  bool causal = false;
  MaskAlign align = MaskAlign::kBottomRight;
  int window_left = kWindowInfinite, window_right = kWindowInfinite;
  float softcap = 0.0f;
  float softmax_scale = 0.0f;  // 0: default 1/sqrt(Dqk)
  AlibiLayout alibi = AlibiLayout::kNone;
  // Varlen when non-empty: one entry per sequence (batch = size); lengths may be 0.
  std::vector<int> varlen_q, varlen_k;
  std::vector<int> seqused_k;  // optional [B]: keys that count (<= varlen_k[b] or seqlen_k)
  // Varlen: rows of the packed q / k tensors past the last sequence (tokens no sequence owns).
  int varlen_tail_q = 0, varlen_tail_k = 0;
  float input_scale = 1.0f;    // q, k, v ~ N(0, 1) * input_scale
  // (key position, gain): the K rows at that position of every sequence and head are multiplied by
  // gain after drawing (positions past a sequence's keys are skipped). A large gain makes the key's
  // scores jump far above or below those of its neighbours for every query: the online softmax's
  // running max must move in the middle of a row.
  std::vector<std::pair<int, float>> key_gain;
  uint64_t seed = 1;
  Layout layout = Layout::kBSHD;
  ForwardOverrides overrides;  // the sm90 plan's overrides (tests of forced kernels and schedules)
  // KV-cache layouts of the same logical K/V (BSHD layout only). Cache slots that hold no key of the
  // call are NaN, so reading one fails the check.
  int page_size = 0;            // > 0: paged, pages of this many rows in a shuffled pool with spare pages
  int page_gap = 0;             // paged: unused (NaN) rows after each page, so rows are not evenly spaced
  bool kv_batch_index = false;  // dense cache with two extra batch rows; entry b reads a shuffled row
  std::vector<int> leftpad_k;   // optional [B]: the first leftpad_k[b] cache rows are padding
  int num_splits = 0;           // AttentionParams::num_splits

  bool is_varlen() const { return !varlen_q.empty(); }
  // A readable one-line summary for failure messages.
  std::string describe() const;
};

// Host tensors of a TestCase. `params` points into the vectors below, so a HostProblem is moved,
// never copied (moving a std::vector keeps its heap buffer).
struct HostProblem {
  TestCase test_case;
  std::vector<uint8_t> q, k, v, o;  // raw dtype elements, sized for the layout (padding included)
  std::vector<float> lse;
  std::vector<float> alibi_slopes;
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k, seqused_k;
  std::vector<int32_t> block_table, kv_batch_idx, leftpad_k;
  AttentionParams params;

  HostProblem() = default;
  HostProblem(HostProblem&&) = default;
  HostProblem& operator=(HostProblem&&) = default;
  HostProblem(const HostProblem&) = delete;
  HostProblem& operator=(const HostProblem&) = delete;

  // Element offset of logical (b, token, h, 0) in o; token is the varlen packed row for varlen.
  int64_t o_offset(int b, int64_t token, int h) const;
  // Element offset of lse for (b, row-in-sequence-or-packed-token, h).
  int64_t lse_offset(int b, int64_t token, int h) const;
};

// Builds the tensors (fresh generator seeded with test_case.seed; values drawn in logical
// (b, s, h, d) order, so two layouts of one case hold the same logical tensors), o filled with
// poison, lse with NaN, and params with host pointers and the layout's strides.
HostProblem make_problem(const TestCase& test_case);

// ---- reading outputs in the dense reference order -------------------------------------------
// Reads o (host memory in params' dtype and strides) as out [rows, Hq, Dv].
std::vector<double> read_output(const HostProblem& problem, const void* o_host);
// Reads lse (host, params' strides) as [rows, Hq].
std::vector<double> read_lse(const HostProblem& problem, const float* lse_host);

// ---- error metrics --------------------------------------------------------------------------
struct ErrorStats {
  double rel_fro = 0;      // ||got - ref||_F / ||ref||_F over finite reference entries
  double max_abs = 0;      // max |got - ref| over finite reference entries
  double ref_max_abs = 0;  // max |ref|, to scale absolute floors
  int64_t compared = 0;
  int64_t non_finite = 0;     // got is NaN/Inf where ref is finite (NaN never passes)
  int64_t inf_mismatch = 0;   // ref is +-inf (an empty row's lse) and got differs from it
  bool finite_ok() const { return non_finite == 0 && inf_mismatch == 0; }
  std::string describe() const;
};
// got and ref in the same order and size. Entries where ref is NaN are a test bug: counted as
// non_finite so they fail.
ErrorStats compare(const std::vector<double>& got, const std::vector<double>& ref);

// ---- poison and "every element written" -----------------------------------------------------
// Fills the whole o buffer (padding included) with the NaN pattern (0xFFFF per 16-bit element,
// 0xFFFFFFFF per fp32 element) and lse with NaN.
void poison_outputs(HostProblem& problem);
void poison_buffer(std::vector<uint8_t>& bytes);
// Logical o elements (or lse entries) still holding the poison pattern after a run.
int64_t count_unwritten_output(const HostProblem& problem, const void* o_host);
int64_t count_unwritten_lse(const HostProblem& problem, const float* lse_host);
// Elements of the o buffer outside the logical tensor (layout padding) that no longer hold the
// poison pattern: a kernel must not write there, so this must stay 0.
int64_t count_written_padding(const HostProblem& problem, const void* o_host);

// ---- the tolerance baseline -----------------------------------------------------------------
// Naive same-dtype attention over params (host pointers): scores and softmax in fp32 from the
// dtype's inputs, the probabilities P rounded to the dtype before P.V (fp32 accumulation), the
// output rounded to the dtype — what PyTorch's math backend does in half precision (except that
// it also rounds the scores; we keep them fp32, the stricter baseline). Dense reference order.
std::vector<double> naive_same_dtype_reference(const AttentionParams& params);

// Bounds a kernel's ErrorStats must meet, derived from the naive baseline's ErrorStats:
//   rel_fro <= 2 * naive.rel_fro + rel_floor,   max_abs <= 2 * naive.max_abs + rel_floor * ref_max_abs.
// rel_floor keeps the bound meaningful where the naive error is ~0 (fp32 inputs: the naive fp32
// error is ~1e-7 and a kernel summing in another order may differ by a few ulps): 1e-6 for
// fp16/bf16 (far below their 1e-3 / 1e-2 rounding), 1e-5 for fp32 (design.md's SIMT bound;
// a tf32 path passes its own, 5e-4).
struct Tolerance {
  double rel_fro = 0, max_abs = 0;
  std::string describe() const;
};
double default_rel_floor(DType dtype);
Tolerance tolerance_from_naive(const ErrorStats& naive, double rel_floor);
// True when `got` meets `tol` and has no NaN/Inf.
bool within(const ErrorStats& got, const Tolerance& tol);

}  // namespace flashcore::testing
