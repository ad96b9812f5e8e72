// The score of a (query, key) pair as one small functor shared by the CPU reference, the naive GPU
// reference, the sm80 path and the sm90 path, so every path computes one function:
//
//   score(i, j) = alibi(softcap(scale * <q_i, k_j>))
//   softcap(x)  = c * tanh(x / c)                      (c > 0; off otherwise)
//   alibi(s)    = s - slope_h * |i + Sk - Sq - j|      (bottom-right aligned; off when slope is 0)
#pragma once

#include <cmath>

#include "attention/constants.hpp"
#include "common/host_device.hpp"
#include "flashcore/flashcore.hpp"
#if defined(__CUDACC__)
#include "ptx/math.hpp"
#endif

namespace flashcore::attn {

// softcap(scale * dot) / scale as a function of dot: dot -> softcap_over_scale * tanh(dot *
// scale_over_softcap). Kernels that fold the scale into exp2 apply this to their accumulators. On
// the device the tanh is the SFU's (ptx::tanh_fast, within ~2e-7 absolute; tanhf costs a few dozen
// instructions per score).
struct DotSoftcap {
  float softcap_over_scale = 0.0f;
  float scale_over_softcap = 0.0f;
  FC_HOST_DEVICE float apply(float dot) const {
#if defined(__CUDA_ARCH__)
    return softcap_over_scale * ptx::tanh_fast(dot * scale_over_softcap);
#else
    return softcap_over_scale * tanhf(dot * scale_over_softcap);
#endif
  }
};

// score = alibi(softcap(scale * dot)). Kernels fold kLog2e after this transform.
struct ScoreTransform {
  float scale = 1.0f;
  float softcap = 0.0f;     // 0: off
  float alibi_slope = 0.0f; // 0: off
  int alibi_offset = 0;     // Sk - Sq of this sequence (ALiBi is always bottom-right aligned)

  FC_HOST_DEVICE float apply(float dot, int i, int j) const {
    float s = dot * scale;
    if (softcap > 0.0f) s = softcap * tanhf(s / softcap);
    return minus_alibi(s, i, j);
  }
  // s - the ALiBi bias of (i, j), in int positions (apply()'s and apply_fast()'s).
  FC_HOST_DEVICE float minus_alibi(float s, int i, int j) const {
    if (alibi_slope != 0.0f) {
      const int dist = i + alibi_offset - j;
      s -= alibi_slope * (float)(dist < 0 ? -dist : dist);
    }
    return s;
  }
  // The score's two parts, for the references' backward: softcap(scale * dot), and the ALiBi bias
  // subtracted from it (apply() = softcapped() - alibi_bias()). T: float (naive GPU) or double
  // (fp64 CPU reference).
  template <class T>
  FC_HOST_DEVICE T softcapped(T dot) const {
    const T s = dot * (T)scale;
    if (!(softcap > 0.0f)) return s;
    if constexpr (sizeof(T) == sizeof(float)) {
      return softcap * tanhf(s / softcap);
    } else {
      return (T)softcap * tanh(s / (T)softcap);
    }
  }
  template <class T>
  FC_HOST_DEVICE T alibi_bias(int i, int j) const {
    if (alibi_slope == 0.0f) return T(0);
    const long long dist = (long long)i + alibi_offset - j;
    return (T)alibi_slope * (T)(dist < 0 ? -dist : dist);
  }
  // The same in double, for the fp64 CPU reference.
  double apply(double dot, int i, int j) const {
    double s = dot * (double)scale;
    if (softcap > 0.0f) s = (double)softcap * std::tanh(s / (double)softcap);
    if (alibi_slope != 0.0f) {
      const long long dist = (long long)i + alibi_offset - j;
      s -= (double)alibi_slope * (double)(dist < 0 ? -dist : dist);
    }
    return s;
  }

  // The softcap in the units of the dot product, for kernels that keep scores as dots and fold the
  // scale into exp2: softcap(scale * dot) / scale (DotSoftcap).
  FC_HOST_DEVICE DotSoftcap dot_softcap() const {
    DotSoftcap c;
    if (softcap > 0.0f) {
      c.softcap_over_scale = softcap / scale;
      c.scale_over_softcap = scale / softcap;
    }
    return c;
  }

#if defined(__CUDACC__)
  // The backward kernels' softcapped() and softcap_derivative() of one dot product, from one SFU
  // tanh (ptx::tanh_fast, as DotSoftcap) and no division: softcap(scale dot) = softcap th with
  // th = tanh(dot scale_over_softcap), its derivative 1 - th^2. scale_over_softcap is
  // dot_softcap()'s, formed by the caller outside its per-score loop.
  FC_DEVICE float capped_score_fast(float dot, float scale_over_softcap, float* derivative) const {
    if (!(softcap > 0.0f)) {
      *derivative = 1.0f;
      return dot * scale;
    }
    const float th = ptx::tanh_fast(dot * scale_over_softcap);
    *derivative = fmaf(-th, th, 1.0f);
    return softcap * th;
  }
  // apply() with the softcap's tanh from the SFU (capped_score_fast): what the 16-bit kernels use
  // (the fp32 3xTF32 kernels keep apply(), whose tanhf stays within their tighter error budget).
  FC_DEVICE float apply_fast(float dot, int i, int j, float scale_over_softcap) const {
    float derivative;
    return minus_alibi(capped_score_fast(dot, scale_over_softcap, &derivative), i, j);
  }
#endif

  // d softcap(x) / dx at x = scale * dot, from the capped value y = softcap(x): 1 - (y / softcap)^2
  // (1 without a softcap). The backward's dS carries this factor.
  FC_HOST_DEVICE float softcap_derivative(float capped) const {
    if (!(softcap > 0.0f)) return 1.0f;
    const float t = capped / softcap;
    return 1.0f - t * t;
  }
  double softcap_derivative(double capped) const {
    if (!(softcap > 0.0f)) return 1.0;
    const double t = capped / (double)softcap;
    return 1.0 - t * t;
  }
};

// The softmax scale of a call (0 means 1/sqrt(Dqk)); the same for every sequence and head.
FC_HOST_DEVICE float softmax_scale(const AttentionParams& p) {
  return p.softmax_scale != 0.0f ? p.softmax_scale : 1.0f / sqrtf((float)p.head_dim_qk);
}

// The parts of the score transform every sequence and head share (scale, softcap; ALiBi off): what
// a launcher forms on the host, where the ALiBi slopes are device memory its kernel reads.
FC_HOST_DEVICE ScoreTransform shared_score_transform(const AttentionParams& p) {
  ScoreTransform t;
  t.scale = softmax_scale(p);
  t.softcap = p.softcap;
  return t;
}

// The score transform of one (sequence, head).
FC_HOST_DEVICE ScoreTransform make_score_transform(const AttentionParams& p, int b, int h,
                                                   int seqlen_q, int seqlen_k) {
  ScoreTransform t = shared_score_transform(p);
  if (p.alibi_slopes != nullptr) t.alibi_slope = p.alibi_slopes[b * p.alibi_batch_stride + h];
  t.alibi_offset = seqlen_k - seqlen_q;
  return t;
}

}  // namespace flashcore::attn
