// Fused scaled dot-product attention, blocked "flash" style: per (group,
// block of 64 query rows) the scores against every visible key are formed
// in f32 (one row block at a time: O(64 S) scratch per thread, never the
// L x S matrix), softmaxed with f32 statistics, and multiplied into V. The
// block GEMMs run on oneDNN in the inputs' dtype (bf16 on avx512_bf16) with
// f32 accumulation; a dtype oneDNN has no fast matmul for (f16 on most
// CPUs) runs through f32 copies of the operands. Backward recomputes the
// weights from the saved log-normalizers, one group per task, so dK and dV
// accumulate without atomics.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/onednn_compat.h"
#include "backends/cpu/onednn_context.h"
#include "backends/cpu/parallel.h"
#include "mixrt/float_convert.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/attention_math.h"

namespace mixrt::cpu {
namespace {

using sdk::AttentionCall;
using sdk::TensorRef;

// Query rows per block: large enough that each block GEMM amortizes
// oneDNN's per-call cost (64 rows spent more time calling than computing),
// small enough that the f32 score block (kRows x S) stays a few MiB.
constexpr int64_t kRows = 256;
constexpr int64_t kKeyStep = 128;  // Causal key extents round up to this
                                   // (fewer distinct GEMM shapes to create).

// A matrix operand: element (r, c) at data + r * row_stride + c * col_stride
// (in elements of dtype).
struct Operand {
  const void* data;
  MixrtDtype dtype;
  int64_t rows, cols, row_stride, col_stride;
};

// c (f32, rows a.rows, cols b.cols, row stride ldc) = a x b, or += with
// `accumulate`. oneDNN primitives are cached per thread by shape.
void Gemm(const Operand& a, const Operand& b, float* c, int64_t ldc,
          bool accumulate) {
  dnnl::memory::dims a_dims = {a.rows, a.cols}, a_str = {a.row_stride, a.col_stride};
  dnnl::memory::dims b_dims = {b.rows, b.cols}, b_str = {b.row_stride, b.col_stride};
  dnnl::memory::dims c_dims = {a.rows, b.cols}, c_str = {ldc, 1};
  NormalizeUnitStrides(a_dims, &a_str);
  NormalizeUnitStrides(b_dims, &b_str);
  NormalizeUnitStrides(c_dims, &c_str);
  const dnnl::memory::desc a_md(a_dims, *OneDnnType(a.dtype), a_str);
  const dnnl::memory::desc b_md(b_dims, *OneDnnType(b.dtype), b_str);
  const dnnl::memory::desc c_md(c_dims, dnnl::memory::data_type::f32, c_str);
  const std::string key = absl::StrCat(
      "attention_gemm|", a.dtype, ":", a.rows, "x", a.cols, "/", a_str[0], ",",
      a_str[1], "|", b.dtype, ":", b.rows, "x", b.cols, "/", b_str[0], ",",
      b_str[1], "|", ldc, "|", accumulate);
  auto prim = GetPrimitive(key, [&] {
    dnnl::post_ops ops;
    if (accumulate) ops.append_sum(1.0f);
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    const dnnl::matmul::primitive_desc pd = MatmulPd(a_md, b_md, nullptr, c_md, attr);
    return CachedPrimitive{dnnl::matmul(pd), pd.impl_info_str()};
  });
  prim->primitive.execute(
      ThreadStream(), {{DNNL_ARG_SRC, Memory(a_md, const_cast<void*>(a.data))},
                       {DNNL_ARG_WEIGHTS, Memory(b_md, const_cast<void*>(b.data))},
                       {DNNL_ARG_DST, Memory(c_md, c)}});
  ThreadStream().wait();
}

// exp(x) for x <= 0 in f32, as Exp8 below computes it lane by lane: the
// tails of the vector loops. Exactly 0 below -87 (masked scores are -inf);
// NaN stays NaN (and never reaches a float-to-int conversion).
inline float ExpNonPositive(float x) {
  if (std::isnan(x)) return x;
  if (x < -87.0f) return 0.0f;
  const float t = x * 1.44269504088896341f;
  const float n = std::nearbyint(t);
  const float f = (t - n) * 0.693147180559945309f;
  float p = 1.0f / 720;
  p = p * f + 1.0f / 120;
  p = p * f + 1.0f / 24;
  p = p * f + 1.0f / 6;
  p = p * f + 0.5f;
  p = p * f + 1.0f;
  p = p * f + 1.0f;
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(n) + 127)
                        << 23;
  return p * __builtin_bit_cast(float, bits);
}

// Row kernels. The exponentials, not the GEMMs, are what this kernel spends
// most of its time on, and GCC 12 emitted the plain loops scalar (no ymm in
// them, although -fopt-info reported them vectorized): AVX2 intrinsics,
// which the plugin's x86-64-v3 baseline guarantees.

// exp(x) of 8 lanes, x <= 0 (masked lanes are -inf): 2^(x log2 e) with the
// exponent rounded to nearest, so the polynomial (Taylor, degree 6) sees
// |f| <= ln2 / 2 (relative error ~1e-7); exactly 0 below -87; NaN stays NaN
// (a NaN score must reach the output, where the GradScaler looks for it).
inline __m256 Exp8(__m256 x) {
  const __m256 zero = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  // max_ps returns its second operand when either is NaN: x's NaN survives.
  const __m256 c = _mm256_max_ps(_mm256_set1_ps(-87.0f), x);
  const __m256 t = _mm256_mul_ps(c, _mm256_set1_ps(1.44269504088896341f));
  const __m256 n =
      _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f =
      _mm256_mul_ps(_mm256_sub_ps(t, n), _mm256_set1_ps(0.693147180559945309f));
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(zero, _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));
}

inline float Sum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float Max8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

// sdk::F32ToBF16Bits on 8 lanes (round to nearest even), stored to
// out[0..8). With kExactNaN a NaN stays a quiet NaN; without, its rounding
// may turn it into anything: only for softmax weights, whose row sum carries
// any NaN into the output anyway (the blend cost 20% of a bf16 forward).
template <bool kExactNaN>
inline void StoreBF16x8(__m256 v, uint16_t* out) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb =
      _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  __m256i r = _mm256_srli_epi32(
      _mm256_add_epi32(_mm256_add_epi32(b, _mm256_set1_epi32(0x7fff)), lsb), 16);
  if constexpr (kExactNaN) {
    const __m256i nan =
        _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    const __m256i is_nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(b, _mm256_set1_epi32(0x7fffffff)),
                           _mm256_set1_epi32(0x7f800000));
    r = _mm256_blendv_epi8(r, nan, is_nan);
  }
  const __m256i packed =
      _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xD8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                   _mm256_castsi256_si128(packed));
}

// NaN when any element is NaN (max_ps alone would drop it).
float RowMax(const float* x, int64_t n) {
  __m256 m8 = _mm256_set1_ps(-INFINITY), nan8 = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    m8 = _mm256_max_ps(m8, v);
    nan8 = _mm256_or_ps(nan8, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  }
  float m = Max8(m8);
  bool nan = _mm256_movemask_ps(nan8) != 0;
  for (; j < n; ++j) {
    nan |= std::isnan(x[j]);
    m = x[j] > m ? x[j] : m;
  }
  return nan ? NAN : m;
}

// out[j] = exp((x[j] - shift) * mult) in f32 (Out = float) or rounded to
// bf16 (Out = uint16_t); returns the sum of the f32 values.
template <typename Out>
float ExpRow(const float* x, int64_t n, float shift, float mult, Out* out) {
  const __m256 s8 = _mm256_set1_ps(shift), m8 = _mm256_set1_ps(mult);
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 p =
        Exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + j), s8), m8));
    acc = _mm256_add_ps(acc, p);
    if constexpr (std::is_same_v<Out, float>) {
      _mm256_storeu_ps(out + j, p);
    } else {
      StoreBF16x8</*kExactNaN=*/false>(p, out + j);
    }
  }
  float total = Sum8(acc);
  for (; j < n; ++j) {
    const float p = ExpNonPositive((x[j] - shift) * mult);
    if constexpr (std::is_same_v<Out, float>) {
      out[j] = p;
    } else {
      out[j] = sdk::F32ToBF16Bits(p);
    }
    total += p;
  }
  return total;
}

// The dtype the block GEMMs run in: the inputs' when oneDNN multiplies it
// natively (not its reference implementation), else f32.
MixrtDtype GemmDtype(MixrtDtype dtype) {
  if (dtype == MIXRT_DTYPE_F32) return dtype;
  static const bool bf16 =
      OneDnnHasMatmul(MIXRT_DTYPE_BF16) &&
      !absl::StartsWith(OneDnnMatmulImplementation(MIXRT_DTYPE_BF16), "ref");
  static const bool f16 =
      OneDnnHasMatmul(MIXRT_DTYPE_F16) &&
      !absl::StartsWith(OneDnnMatmulImplementation(MIXRT_DTYPE_F16), "ref");
  const bool fast = dtype == MIXRT_DTYPE_BF16 ? bf16 : f16;
  return fast ? dtype : MIXRT_DTYPE_F32;
}

size_t Bytes(MixrtDtype d) { return d == MIXRT_DTYPE_F32 ? 4 : 2; }

// `count` elements of `t` from element `at`, in `dtype`: the tensor's own
// memory when the dtypes agree, else an f32 copy in `scratch`.
const void* InDtype(const TensorRef& t, int64_t at, int64_t count,
                    MixrtDtype dtype, std::vector<float>* scratch) {
  if (t.dtype() == dtype) {
    return static_cast<const char*>(t.data()) + at * Bytes(dtype);
  }
  scratch->resize(count);
  for (int64_t i = 0; i < count; ++i) (*scratch)[i] = t.LoadFloat(at + i);
  return scratch->data();
}

// Stores f32 `values` into `dtype` storage.
void StoreAs(MixrtDtype dtype, const float* values, int64_t count, void* out) {
  if (dtype == MIXRT_DTYPE_F32) {
    std::memcpy(out, values, count * 4);
  } else if (dtype == MIXRT_DTYPE_BF16) {
    auto* o = static_cast<uint16_t*>(out);
    int64_t i = 0;
    for (; i + 8 <= count; i += 8) {
      StoreBF16x8</*kExactNaN=*/true>(_mm256_loadu_ps(values + i), o + i);
    }
    for (; i < count; ++i) o[i] = sdk::F32ToBF16Bits(values[i]);
  } else {
    auto* o = static_cast<uint16_t*>(out);
    for (int64_t i = 0; i < count; ++i) o[i] = sdk::F32ToF16Bits(values[i]);
  }
}

// The visible key extent of the query block [r0, r0 + rows).
int64_t KeyExtent(const AttentionCall& a, int64_t r0, int64_t rows) {
  if (!a.attrs->is_causal) return a.keys;
  const int64_t needed = std::min(a.keys, r0 + rows);
  return std::min(a.keys, (needed + kKeyStep - 1) / kKeyStep * kKeyStep);
}

// scores[i][j] * scale + bias (causal and mask), row by row.
void ScaleAndMask(const AttentionCall& a, int64_t g, int64_t r0, int64_t rows,
                  int64_t extent, float* scores) {
  const float scale = static_cast<float>(a.attrs->scale);
  for (int64_t i = 0; i < rows; ++i) {
    float* s = scores + i * extent;
#pragma omp simd
    for (int64_t j = 0; j < extent; ++j) s[j] *= scale;
    if (a.mask != nullptr) {
      for (int64_t j = 0; j < extent; ++j) {
        s[j] += static_cast<float>(sdk::AttentionBias(a, g, r0 + i, j));
      }
    } else if (a.attrs->is_causal) {
      for (int64_t j = r0 + i + 1; j < extent; ++j) s[j] = -INFINITY;
    }
  }
}

struct Scratch {
  std::vector<float> scores, weights_f32, acc, inv_total, kbuf, vbuf, qbuf;
  std::vector<uint16_t> weights_low;
};

// Weights in the GEMM dtype (dropout applied) for the next GEMM.
const void* WeightsForGemm(const AttentionCall& a, MixrtDtype gemm, int64_t g,
                           int64_t r0, int64_t rows, int64_t extent,
                           const float* p, Scratch* s) {
  const int64_t n = rows * extent;
  const float* src = p;
  if (a.attrs->dropout_p > 0) {
    s->weights_f32.resize(n);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < extent; ++j) {
        s->weights_f32[i * extent + j] =
            p[i * extent + j] *
            static_cast<float>(sdk::AttentionDropoutFactor(a, g, r0 + i, j));
      }
    src = s->weights_f32.data();
  }
  if (gemm == MIXRT_DTYPE_F32) return src;
  s->weights_low.resize(n);
  StoreAs(gemm, src, n, s->weights_low.data());
  return s->weights_low.data();
}

void Forward(const AttentionCall& a) {
  const MixrtDtype dt = a.q->dtype(), gemm = GemmDtype(dt);
  const int64_t e = a.head_dim, ev = a.value_dim;
  const int64_t blocks = (a.queries + kRows - 1) / kRows;
  ParallelFor(a.groups * blocks, 1, [&](int64_t begin, int64_t end) {
    Scratch s;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t g = task / blocks, r0 = (task % blocks) * kRows;
      const int64_t rows = std::min(kRows, a.queries - r0);
      const int64_t extent = KeyExtent(a, r0, rows);
      const void* q = InDtype(*a.q, (g * a.queries + r0) * e, rows * e, gemm, &s.qbuf);
      const void* k = InDtype(*a.k, g * a.keys * e, extent * e, gemm, &s.kbuf);
      const void* v = InDtype(*a.v, g * a.keys * ev, extent * ev, gemm, &s.vbuf);
      s.scores.resize(rows * extent);
      // scores = q_block k^T: k read as [E, extent] through its strides.
      Gemm({q, gemm, rows, e, e, 1}, {k, gemm, e, extent, 1, e},
           s.scores.data(), extent, false);
      // The scale folds into the exponent (exp((x - max) * scale)) unless a
      // mask or a non-positive scale needs the scaled scores themselves.
      const float scale = static_cast<float>(a.attrs->scale);
      const bool folded = a.mask == nullptr && scale > 0;
      if (!folded) ScaleAndMask(a, g, r0, rows, extent, s.scores.data());
      const float mult = folded ? scale : 1.0f;
      const bool dropout = a.attrs->dropout_p > 0;
      // Weights go straight to bf16 from the exp; f16 (a oneDNN 3 build
      // has f16 matmul) and dropout take the f32 row first.
      const bool low = gemm == MIXRT_DTYPE_BF16 && !dropout;
      s.weights_f32.resize(rows * extent);
      if (low) s.weights_low.resize(rows * extent);
      std::vector<float>& inv_total = s.inv_total;
      inv_total.assign(rows, 0.0f);
      float* lse = static_cast<float*>(a.lse->data()) + g * a.queries + r0;
      for (int64_t i = 0; i < rows; ++i) {
        const float* row = s.scores.data() + i * extent;
        // Causal without a mask: only keys j <= i are visible.
        const int64_t n = folded && a.attrs->is_causal
                              ? std::min(extent, r0 + i + 1)
                              : extent;
        const float max = RowMax(row, n);
        float* wf = s.weights_f32.data() + i * extent;
        uint16_t* wl = low ? s.weights_low.data() + i * extent : nullptr;
        if (max == -INFINITY) {  // Nothing visible: weights 0.
          lse[i] = -INFINITY;
          if (low) std::fill(wl, wl + extent, uint16_t{0});
          std::fill(wf, wf + extent, 0.0f);
          continue;
        }
        const float total = low ? ExpRow(row, n, max, mult, wl)
                                : ExpRow(row, n, max, mult, wf);
        if (low) {
          std::fill(wl + n, wl + extent, uint16_t{0});
        } else {
          std::fill(wf + n, wf + extent, 0.0f);
        }
        inv_total[i] = 1.0f / total;
        lse[i] = max * mult + std::log(total);
        if (dropout) {
          for (int64_t j = 0; j < n; ++j) {
            wf[j] *= static_cast<float>(
                sdk::AttentionDropoutFactor(a, g, r0 + i, j));
          }
        }
      }
      // Unnormalized weights into the GEMM; each output row is divided by
      // its normalizer afterwards (rows x Ev, not rows x S, multiplies).
      const void* p = s.weights_f32.data();
      if (low) {
        p = s.weights_low.data();
      } else if (gemm != MIXRT_DTYPE_F32) {
        s.weights_low.resize(rows * extent);
        StoreAs(gemm, s.weights_f32.data(), rows * extent, s.weights_low.data());
        p = s.weights_low.data();
      }
      s.acc.resize(rows * ev);
      Gemm({p, gemm, rows, extent, extent, 1}, {v, gemm, extent, ev, ev, 1},
           s.acc.data(), ev, false);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t c = 0; c < ev; ++c) s.acc[i * ev + c] *= inv_total[i];
      }
      StoreAs(dt, s.acc.data(), rows * ev,
              static_cast<char*>(a.out->data()) + (g * a.queries + r0) * ev * Bytes(dt));
    }
  });
}

void Backward(const AttentionCall& a) {
  const MixrtDtype dt = a.q->dtype(), gemm = GemmDtype(dt);
  const int64_t e = a.head_dim, ev = a.value_dim;
  const float scale = static_cast<float>(a.attrs->scale);
  ParallelFor(a.groups, 1, [&](int64_t begin, int64_t end) {
    Scratch s;
    std::vector<float> dk, dv, dp, go_buf, dq;
    std::vector<uint16_t> ds_low;
    for (int64_t g = begin; g < end; ++g) {
      dk.assign(a.keys * e, 0.0f);
      dv.assign(a.keys * ev, 0.0f);
      const void* k = InDtype(*a.k, g * a.keys * e, a.keys * e, gemm, &s.kbuf);
      const void* v = InDtype(*a.v, g * a.keys * ev, a.keys * ev, gemm, &s.vbuf);
      const float* lse = static_cast<const float*>(a.lse->data()) + g * a.queries;
      for (int64_t r0 = 0; r0 < a.queries; r0 += kRows) {
        const int64_t rows = std::min(kRows, a.queries - r0);
        const int64_t extent = KeyExtent(a, r0, rows);
        const int64_t at_q = (g * a.queries + r0) * e;
        const int64_t at_o = (g * a.queries + r0) * ev;
        const void* q = InDtype(*a.q, at_q, rows * e, gemm, &s.qbuf);
        const void* go = InDtype(*a.grad_out, at_o, rows * ev, gemm, &go_buf);
        s.scores.resize(rows * extent);
        Gemm({q, gemm, rows, e, e, 1}, {k, gemm, e, extent, 1, e},
             s.scores.data(), extent, false);
        ScaleAndMask(a, g, r0, rows, extent, s.scores.data());
        for (int64_t i = 0; i < rows; ++i) {
          float* row = s.scores.data() + i * extent;
          const float l = lse[r0 + i];
          if (l == -INFINITY) {
            std::fill(row, row + extent, 0.0f);
            continue;
          }
          ExpRow(row, extent, l, 1.0f, row);  // In place: p = exp(x - lse).
        }
        // dV += (dropped weights)^T dO.
        const void* p = WeightsForGemm(a, gemm, g, r0, rows, extent,
                                       s.scores.data(), &s);
        Gemm({p, gemm, extent, rows, 1, extent}, {go, gemm, rows, ev, ev, 1},
             dv.data(), ev, true);
        // dP = dO V^T, through the dropout mask.
        dp.resize(rows * extent);
        Gemm({go, gemm, rows, ev, ev, 1}, {v, gemm, ev, extent, 1, ev},
             dp.data(), extent, false);
        // D_i = sum_c dO_ic O_ic; dS = P (dP - D) scale.
        for (int64_t i = 0; i < rows; ++i) {
          float d = 0;
          for (int64_t c = 0; c < ev; ++c) {
            d += a.grad_out->LoadFloat(at_o + i * ev + c) *
                 a.out->LoadFloat(at_o + i * ev + c);
          }
          float* prow = s.scores.data() + i * extent;
          float* dprow = dp.data() + i * extent;
          for (int64_t j = 0; j < extent; ++j) {
            float grad_weight = dprow[j];
            if (a.attrs->dropout_p > 0) {
              grad_weight *= static_cast<float>(
                  sdk::AttentionDropoutFactor(a, g, r0 + i, j));
            }
            dprow[j] = prow[j] * (grad_weight - d) * scale;
          }
        }
        const void* ds = dp.data();
        if (gemm != MIXRT_DTYPE_F32) {
          ds_low.resize(rows * extent);
          StoreAs(gemm, dp.data(), rows * extent, ds_low.data());
          ds = ds_low.data();
        }
        // dQ = dS K; dK += dS^T Q.
        dq.resize(rows * e);
        Gemm({ds, gemm, rows, extent, extent, 1}, {k, gemm, extent, e, e, 1},
             dq.data(), e, false);
        StoreAs(dt, dq.data(), rows * e,
                static_cast<char*>(a.grad_q->data()) + at_q * Bytes(dt));
        Gemm({ds, gemm, extent, rows, 1, extent}, {q, gemm, rows, e, e, 1},
             dk.data(), e, true);
      }
      StoreAs(dt, dk.data(), a.keys * e,
              static_cast<char*>(a.grad_k->data()) + g * a.keys * e * Bytes(dt));
      StoreAs(dt, dv.data(), a.keys * ev,
              static_cast<char*>(a.grad_v->data()) + g * a.keys * ev * Bytes(dt));
    }
  });
}

}  // namespace

absl::Status RunAttention(const sdk::KernelCall& call) {
  MIXRT_ASSIGN_OR_RETURN(const AttentionCall a, sdk::DecodeAttention(call));
  if (a.groups == 0 || a.queries == 0) return absl::OkStatus();
  if (a.keys == 0) {
    return absl::InvalidArgumentError(
        "scaled_dot_product_attention: no keys (S = 0)");
  }
  try {
    if (a.backward) {
      Backward(a);
    } else {
      Forward(a);
    }
  } catch (const dnnl::error& e) {
    return absl::InternalError(
        absl::StrCat("scaled_dot_product_attention: oneDNN: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace mixrt::cpu
