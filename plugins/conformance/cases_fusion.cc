// Fusion cases (ABI 1.1): chains compiled with mixrt::compile run on the
// plugin as it fuses them (its fused kernels, where it claims groups) and
// on the reference plugin op by op, compared within the chain's budget:
// each op may round once more on either side, relative to the magnitudes
// it combines. A plugin that fuses nothing runs them op by op and passes
// as the pointwise cases do.
#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "core/compiler/compile.h"
#include "core/kernels/attention.h"
#include "core/kernels/conv2d.h"
#include "core/kernels/layer_norm.h"
#include "core/kernels/matmul.h"
#include "core/kernels/pointwise.h"
#include "core/kernels/pool2d.h"
#include "core/kernels/reduce.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "mixrt/status_macros.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

namespace {

using Fn = std::function<Outputs(const std::vector<Tensor>&)>;

// Runs `fn` compiled: the first call traces (eagerly), the second replays
// the plan with the plugin's fused kernels.
Fn Compiled(Fn fn) {
  return [fn](const std::vector<Tensor>& in) -> Outputs {
    MIXRT_ASSIGN_OR_RETURN(CompiledFunction f, compile(fn));
    MIXRT_RETURN_IF_ERROR(f(in).status());
    return f(in);
  };
}

// `ops` roundings of the dtype relative to each element's magnitude bound
// (the sum of the absolute terms the chain combines), plus libm's budget
// where the chain has transcendental ops.
Tolerance ChainTolerance(DType dtype, int ops,
                         const std::vector<double>& magnitude,
                         bool transcendental) {
  Tolerance t =
      transcendental ? TranscendentalTolerance(dtype) : ExactTolerance(dtype);
  t.rtol *= ops;
  const double per = ops * 2 * UnitRoundoff(dtype) +
                     (transcendental ? 32 * UnitRoundoff(DType::kF32) : 0.0);
  for (double m : magnitude)
    t.extra.push_back(std::isfinite(m) ? per * m : 0.0);
  return t;
}

double Finite(double v) { return std::isfinite(v) ? std::fabs(v) : 0.0; }

// Per element of a linear's [rows, cols] result over `inner` terms (inputs
// x, w, bias, then one more [rows, cols] operand when `residual`): the sum
// of the absolute terms, with the f32 accumulation's rounding (inner
// roundings of 2^-23) in units of the dtype's.
std::vector<double> LinearMagnitude(const std::vector<std::vector<double>>& in,
                                    int rows, int cols, int inner, DType dtype,
                                    bool residual) {
  std::vector<double> m(rows * cols);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      double dot = 0;
      for (int k = 0; k < inner; ++k) {
        dot += Finite(in[0][r * inner + k]) * Finite(in[1][c * inner + k]);
      }
      m[r * cols + c] =
          dot * (1 + inner * std::ldexp(1.0, -23) / (2 * UnitRoundoff(dtype))) +
          Finite(in[2][c]) + (residual ? Finite(in[3][r * cols + c]) : 0.0);
    }
  }
  return m;
}

// Per element of conv2d(x [n, c, h, w], w [o, c, 3, 3], padding 1) times
// a per-channel scale plus a shift (inputs x, w, scale, shift): the sum of
// the absolute terms, the accumulation's rounding as LinearMagnitude's.
std::vector<double> ConvScaleShiftMagnitude(
    const std::vector<std::vector<double>>& in, int n, int c, int o, int h,
    int w, DType dtype) {
  std::vector<double> m(static_cast<size_t>(n) * o * h * w);
  const int taps = c * 9;
  for (int b = 0; b < n; ++b) {
    for (int oc = 0; oc < o; ++oc) {
      for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
          double dot = 0;
          for (int ic = 0; ic < c; ++ic) {
            for (int ky = 0; ky < 3; ++ky) {
              for (int kx = 0; kx < 3; ++kx) {
                const int iy = y + ky - 1, ix = x + kx - 1;
                if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                dot += Finite(in[0][((b * c + ic) * h + iy) * w + ix]) *
                       Finite(in[1][((oc * c + ic) * 3 + ky) * 3 + kx]);
              }
            }
          }
          dot *= 1 + taps * std::ldexp(1.0, -23) / (2 * UnitRoundoff(dtype));
          m[((b * o + oc) * h + y) * w + x] =
              dot * Finite(in[2][oc]) + Finite(in[3][oc]);
        }
      }
    }
  }
  return m;
}

// `m` [n, o, h, w] through a 2x2, stride-2 max pool: a max's error is at
// most its window's largest.
std::vector<double> MaxPooled(const std::vector<double>& m, int n, int o, int h,
                              int w) {
  const int ho = h / 2, wo = w / 2;
  std::vector<double> out(static_cast<size_t>(n) * o * ho * wo, 0.0);
  for (int p = 0; p < n * o; ++p) {
    for (int y = 0; y < ho * 2; ++y) {
      for (int x = 0; x < wo * 2; ++x) {
        double& e = out[(p * ho + y / 2) * wo + x / 2];
        e = std::max(e, m[(static_cast<size_t>(p) * h + y) * w + x]);
      }
    }
  }
  return out;
}

void AddChain(
    std::vector<Case>* cases, const std::string& name, DType dtype,
    std::vector<InputSpec> inputs, Fn fn,
    std::function<Tolerance(int, const std::vector<std::vector<double>>&)>
        tol) {
  cases->push_back({absl::StrCat("fusion/", name, "/", DTypeName(dtype)),
                    MIXRT_OP_CLASS_ELEMENTWISE, dtype, [=](const Devices& d) {
                      CompareOp(d, WithDtype(inputs, dtype), Compiled(fn), tol,
                                kSeed);
                    }});
}

// A multi-head attention's head split: q, k and v are strided views of one
// packed projection [B, T, 3, H, D] that the attention op makes dense (the
// copies a plugin may fuse into it, reading the heads in place). Causal
// and not, over 200 queries (more than one of the CPU kernel's 128-row
// blocks) and 64-wide heads. Then with infinities: in the q of the tokens
// where a second input, drawn per token, exceeds 2 (rare: their rows turn
// NaN, the others stay finite), and in the k of batch 1's last token. The
// definition adds -inf to a hidden key's score, and inf plus -inf is NaN,
// so that key makes every row of batch 1 NaN even where causal attention
// hides it: a kernel that skips hidden keys must find it first. The causal
// cases return the output alone with its heads merged, so a fused kernel
// keeps the log-normalizers to itself and may write the merged rows.
// With 8 heads ("wide"), a token's rows are 3 x 8 x 64 elements apart (6
// KiB in f32), which the CPU plugin copies back to back before oneDNN's
// AVX2 gemm reads them (operand_copies.h); with 2, it reads them in place.
void AddAttentionHeadsCases(DType dtype, int64_t heads,
                            std::vector<Case>* cases) {
  constexpr int64_t kBatch = 2, kSequence = 200, kHeadDim = 64;
  const int64_t kHeads = heads;
  // As the attention cases': weights and products rounded once or twice.
  const double u = UnitRoundoff(dtype);
  const Tolerance out_tol{8 * u + 1e-5, 8 * u + 1e-5, {}};
  const Tolerance lse_tol{1e-5, 1e-4, {}};
  for (bool causal : {false, true}) {
    for (Values values : {Values::kNormal, Values::kSpecial}) {
      const bool special = values == Values::kSpecial;
      std::vector<InputSpec> inputs = {
          {{kBatch, kSequence, 3, kHeads, kHeadDim}, dtype}};
      if (special) inputs.push_back({{kBatch, kSequence, 1, 1, 1}, dtype});
      Fn fn = [causal, special,
               kHeads](const std::vector<Tensor>& in) -> Outputs {
        Tensor packed = in[0];
        if (special) {
          const Device& device = packed.device();
          const DType dtype = packed.dtype();
          MIXRT_ASSIGN_OR_RETURN(Tensor two, full({1}, 2.0, dtype, device));
          MIXRT_ASSIGN_OR_RETURN(Tensor inf,
                                 full({1}, INFINITY, dtype, device));
          MIXRT_ASSIGN_OR_RETURN(
              Tensor q_only,
              from_floats({1, 0, 0}, {1, 1, 3, 1, 1}, dtype, device));
          std::vector<float> last_key(kBatch * kSequence * 3, 0.0f);
          last_key[((kBatch - 1) * kSequence + kSequence - 1) * 3 + 1] = 10;
          MIXRT_ASSIGN_OR_RETURN(
              Tensor k_spike,
              from_floats(last_key, {kBatch, kSequence, 3, 1, 1}, dtype,
                          device));
          MIXRT_ASSIGN_OR_RETURN(Tensor spike, mul(in[1], q_only));
          MIXRT_ASSIGN_OR_RETURN(spike, add(spike, k_spike));
          MIXRT_ASSIGN_OR_RETURN(spike, gt(spike, two));
          MIXRT_ASSIGN_OR_RETURN(packed, where(spike, inf, packed));
        }
        MIXRT_ASSIGN_OR_RETURN(Tensor p, packed.permute({2, 0, 3, 1, 4}));
        std::vector<Tensor> qkv;
        for (int64_t i = 0; i < 3; ++i) {
          MIXRT_ASSIGN_OR_RETURN(Tensor h, p.slice(0, i, i + 1));
          MIXRT_ASSIGN_OR_RETURN(h,
                                 h.view({kBatch, kHeads, kSequence, kHeadDim}));
          qkv.push_back(h);
        }
        FusedAttentionArgs args;
        args.scale = 0.125;
        args.is_causal = causal;
        MIXRT_ASSIGN_OR_RETURN(
            FusedAttentionOutput o,
            scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], args));
        if (!causal) return std::vector<Tensor>{o.out, o.lse};
        // The heads merged back, [B, T, H * D], as a multi-head attention
        // hands them on: a copy a plugin may fuse too, writing in place.
        MIXRT_ASSIGN_OR_RETURN(Tensor merged, o.out.permute({0, 2, 1, 3}));
        MIXRT_ASSIGN_OR_RETURN(
            merged, merged.reshape({kBatch, kSequence, kHeads * kHeadDim}));
        return std::vector<Tensor>{merged};
      };
      cases->push_back(
          {absl::StrCat("fusion/attention_heads", heads == 2 ? "" : "_wide",
                        causal ? "_causal" : "",
                        values == Values::kNormal ? "" : "/special", "/",
                        DTypeName(dtype)),
           MIXRT_OP_CLASS_MATMUL, dtype, [=](const Devices& d) {
             if (!HasFusedAttention(d.plugin)) {
               GTEST_SKIP() << "the plugin has no fused attention";
             }
             CompareOp(
                 d, inputs, Compiled(fn),
                 [=](int index, const std::vector<std::vector<double>>&) {
                   return index == 0 ? out_tol : lse_tol;
                 },
                 kSeed);
           }});
    }
  }
}

}  // namespace

void AddFusionCases(std::vector<Case>* cases) {
  for (DType dtype : kFloatTypes) {
    // x * y + z through relu, neg and abs: a pointwise chain over an odd
    // shape, then with NaN, infinities and signed zeros among the values.
    for (Values values : {Values::kNormal, Values::kSpecial}) {
      const InputSpec v{{513, 7}, dtype, values};
      AddChain(
          cases,
          values == Values::kNormal ? "pointwise_chain"
                                    : "pointwise_chain/special",
          dtype, {v, v, v},
          [](const std::vector<Tensor>& in) -> Outputs {
            MIXRT_ASSIGN_OR_RETURN(Tensor t, mul(in[0], in[1]));
            MIXRT_ASSIGN_OR_RETURN(t, add(t, in[2]));
            MIXRT_ASSIGN_OR_RETURN(t, relu(t));
            MIXRT_ASSIGN_OR_RETURN(t, neg(t));
            return One(abs(t));
          },
          [dtype](int, const std::vector<std::vector<double>>& in) {
            std::vector<double> m(in[0].size());
            for (size_t i = 0; i < m.size(); ++i) {
              m[i] = Finite(in[0][i]) * Finite(in[1][i]) + Finite(in[2][i]);
            }
            return ChainTolerance(dtype, 5, m, false);
          });
    }
    // A bias broadcast over rows, then GELU (a transformer MLP's epilogue).
    AddChain(
        cases, "bias_gelu", dtype, {{{37, 70}, dtype}, {{70}, dtype}},
        [](const std::vector<Tensor>& in) -> Outputs {
          MIXRT_ASSIGN_OR_RETURN(Tensor t, add(in[0], in[1]));
          return One(gelu(t));
        },
        [dtype](int, const std::vector<std::vector<double>>& in) {
          std::vector<double> m(in[0].size());
          for (size_t i = 0; i < m.size(); ++i) {
            m[i] = Finite(in[0][i]) + Finite(in[1][i % 70]);
          }
          return ChainTolerance(dtype, 3, m, true);
        });
    // A GELU and its gradient at the same x (one erfc for both where a
    // plugin fuses them): with an incoming gradient, and with ones (the
    // derivative a compiled training forward saves, from a fill the plan
    // keeps); then with NaN, infinities and signed zeros in x.
    for (Values values : {Values::kNormal, Values::kSpecial}) {
      for (bool ones : {false, true}) {
        std::vector<InputSpec> inputs = {{{37, 70}, dtype, values}};
        if (!ones) inputs.push_back({{37, 70}, dtype});
        AddChain(
            cases,
            absl::StrCat(ones ? "gelu_with_slope" : "gelu_with_gradient",
                         values == Values::kNormal ? "" : "/special"),
            dtype, inputs,
            [ones](const std::vector<Tensor>& in) -> Outputs {
              const Tensor& x = in[0];
              Tensor g;
              if (ones) {
                MIXRT_ASSIGN_OR_RETURN(
                    g, full(x.shape(), 1.0, x.dtype(), x.device()));
              } else {
                g = in[1];
              }
              MIXRT_ASSIGN_OR_RETURN(Tensor y, gelu(x));
              MIXRT_ASSIGN_OR_RETURN(Tensor d,
                                     unary_backward(MIXRT_UNARY_GELU, g, x));
              return std::vector<Tensor>{y, d};
            },
            [dtype, ones](int index,
                          const std::vector<std::vector<double>>& in) {
              // gelu(x) is at most |x|; its slope at most 1.13 (x = 2.4).
              std::vector<double> m(in[0].size());
              for (size_t i = 0; i < m.size(); ++i) {
                m[i] = index == 0 ? Finite(in[0][i])
                                  : 1.13 * (ones ? 1.0 : Finite(in[1][i]));
              }
              return ChainTolerance(dtype, 2, m, true);
            });
      }
    }
    // An activation's gradient and its bias gradient: a reduction with a
    // pointwise prologue whose result is also read on its own.
    AddChain(
        cases, "relu_grad_and_column_sum", dtype,
        {{{33, 70}, dtype}, {{33, 70}, dtype}},
        [](const std::vector<Tensor>& in) -> Outputs {
          MIXRT_ASSIGN_OR_RETURN(
              Tensor g, unary_backward(MIXRT_UNARY_RELU, in[0], in[1]));
          MIXRT_ASSIGN_OR_RETURN(Tensor s, sum(g, {0}, /*keepdim=*/true));
          return std::vector<Tensor>{g, s};
        },
        [dtype](int index, const std::vector<std::vector<double>>& in) {
          std::vector<double> m(index == 0 ? in[0].size() : 70, 0.0);
          for (size_t i = 0; i < in[0].size(); ++i) {
            if (index == 0) {
              m[i] = Finite(in[0][i]);
            } else {
              m[i % 70] += 33 * Finite(in[0][i]);  // 33 f32 additions.
            }
          }
          return ChainTolerance(dtype, 2, m, false);
        });
    // mean((x - y)^2): the mse pattern, a whole-tensor reduction.
    AddChain(
        cases, "squared_error_mean", dtype,
        {{{257, 9}, dtype}, {{257, 9}, dtype}},
        [](const std::vector<Tensor>& in) -> Outputs {
          MIXRT_ASSIGN_OR_RETURN(Tensor d, sub(in[0], in[1]));
          MIXRT_ASSIGN_OR_RETURN(d, mul(d, d));
          return One(mean(d));
        },
        [dtype](int, const std::vector<std::vector<double>>& in) {
          double m = 0;
          const double n = static_cast<double>(in[0].size());
          for (size_t i = 0; i < in[0].size(); ++i) {
            const double a = Finite(in[0][i]) + Finite(in[1][i]);
            m += a * a / n;
          }
          return ChainTolerance(dtype, 4, {m * n}, false);
        });
    // Casts in between: to f32, scaled by a broadcast scalar, back.
    AddChain(
        cases, "casts_between", dtype, {{{129, 5}, dtype}, {{1}, DType::kF32}},
        [dtype](const std::vector<Tensor>& in) -> Outputs {
          MIXRT_ASSIGN_OR_RETURN(Tensor t, in[0].to(DType::kF32));
          MIXRT_ASSIGN_OR_RETURN(t, mul(t, in[1]));
          MIXRT_ASSIGN_OR_RETURN(t, relu(t));
          return One(t.to(dtype));
        },
        [dtype](int, const std::vector<std::vector<double>>& in) {
          std::vector<double> m(in[0].size());
          for (size_t i = 0; i < m.size(); ++i)
            m[i] = Finite(in[0][i]) * Finite(in[1][0]);
          return ChainTolerance(dtype, 3, m, false);
        });
    // A linear with its relu and a residual add: GEMM plus epilogues; then
    // with NaN and infinities among the values, which the relu must pass
    // on (a fused epilogue that turned NaN into 0 would hide an overflow
    // from the grad scaler).
    for (Values values : {Values::kNormal, Values::kSpecial}) {
      AddChain(
          cases,
          values == Values::kNormal ? "linear_relu_residual"
                                    : "linear_relu_residual/special",
          dtype,
          {{{17, 33}, dtype, values},
           {{19, 33}, dtype},
           {{19}, dtype},
           {{17, 19}, dtype}},
          [](const std::vector<Tensor>& in) -> Outputs {
            MIXRT_ASSIGN_OR_RETURN(Tensor t, linear(in[0], in[1], in[2]));
            MIXRT_ASSIGN_OR_RETURN(t, relu(t));
            return One(add(t, in[3]));
          },
          [dtype](int, const std::vector<std::vector<double>>& in) {
            return ChainTolerance(
                dtype, 4, LinearMagnitude(in, 17, 19, 33, dtype, true), false);
          });
    }
    // A convolution, an eval batch_norm's per-channel scale and shift, and
    // a relu: a CNN layer in inference, and with the max pool after it.
    // Then with NaN and infinities in x, which the relu and the pool must
    // pass on as op by op; there with an even channel count: oneDNN
    // 2.6.3's bf16 convolution pads an odd one with zero weights, and inf
    // times that zero makes NaN where the sum is inf (op by op too; the
    // conv2d cases' specials use 2 channels).
    for (const auto& [values, pool] :
         std::vector<std::pair<Values, bool>>{{Values::kNormal, false},
                                              {Values::kSpecial, false},
                                              {Values::kNormal, true},
                                              {Values::kSpecial, true}}) {
      const int c = values == Values::kNormal ? 5 : 4;
      AddChain(
          cases,
          absl::StrCat(
              pool ? "conv_scale_shift_relu_max_pool" : "conv_scale_shift_relu",
              values == Values::kNormal ? "" : "/special"),
          dtype,
          {{{2, c, 7, 9}, dtype, values},
           {{6, c, 3, 3}, dtype},
           {{6, 1, 1}, dtype},
           {{6, 1, 1}, dtype}},
          [pool](const std::vector<Tensor>& in) -> Outputs {
            Conv2dOptions options;
            options.padding = {1, 1};
            MIXRT_ASSIGN_OR_RETURN(Tensor t,
                                   conv2d(in[0], in[1], Tensor(), options));
            MIXRT_ASSIGN_OR_RETURN(t, mul(t, in[2]));
            MIXRT_ASSIGN_OR_RETURN(t, add(t, in[3]));
            MIXRT_ASSIGN_OR_RETURN(t, relu(t));
            if (!pool) return One(t);
            return One(pool2d(t, {}));
          },
          [dtype, c, pool](int, const std::vector<std::vector<double>>& in) {
            std::vector<double> m =
                ConvScaleShiftMagnitude(in, 2, c, 6, 7, 9, dtype);
            if (pool) m = MaxPooled(m, 2, 6, 7, 9);
            return ChainTolerance(dtype, 4, m, false);
          });
    }
    // A linear's GELU (a transformer MLP's first half) and the f32 residual
    // stream it is added back to after a cast, as autocast writes it.
    AddChain(
        cases, "linear_gelu_cast_residual", dtype,
        {{{64, 48}, dtype},
         {{40, 48}, dtype},
         {{40}, dtype},
         {{64, 40}, DType::kF32}},
        [](const std::vector<Tensor>& in) -> Outputs {
          MIXRT_ASSIGN_OR_RETURN(Tensor t, linear(in[0], in[1], in[2]));
          MIXRT_ASSIGN_OR_RETURN(t, gelu(t));
          MIXRT_ASSIGN_OR_RETURN(t, t.to(DType::kF32));
          return One(add(t, in[3]));
        },
        [dtype](int, const std::vector<std::vector<double>>& in) {
          return ChainTolerance(
              dtype, 4, LinearMagnitude(in, 64, 40, 48, dtype, true), true);
        });
    // An f32 layer_norm (autocast runs it in f32) cast for the next
    // linear: the normalized rows, rounded once to the dtype. Over
    // [batch, sequence, features] too (a transformer's): the layer_norm
    // runs on [rows, features] and the cast reads its result through a
    // reshape view, so the group stores the cast alone.
    for (const auto& [name, shape] :
         std::vector<std::pair<std::string, std::vector<int64_t>>>{
             {"layer_norm_cast", {65, 96}},
             {"layer_norm_cast/3d", {3, 11, 96}}}) {
      AddChain(
          cases, name, dtype,
          {{shape, DType::kF32}, {{96}, DType::kF32}, {{96}, DType::kF32}},
          [dtype](const std::vector<Tensor>& in) -> Outputs {
            MIXRT_ASSIGN_OR_RETURN(LayerNormOutput o,
                                   layer_norm(in[0], 1, in[1], in[2]));
            MIXRT_ASSIGN_OR_RETURN(Tensor y, o.y.to(dtype));
            return One(mul(y, y));
          },
          [dtype](int, const std::vector<std::vector<double>>& in) {
            // |y| is at most sqrt(96) |w| + |b|; the f32 statistics' error,
            // then the cast's and the product's roundings.
            std::vector<double> m(in[0].size());
            for (size_t i = 0; i < m.size(); ++i) {
              const double y = std::sqrt(96.0) * Finite(in[1][i % 96]) +
                               Finite(in[2][i % 96]);
              m[i] = y * y;
            }
            Tolerance t = ChainTolerance(dtype, 3, m, false);
            t.rtol += 64 * UnitRoundoff(DType::kF32);
            return t;
          });
    }
    // A pre-norm block's layer_norm backward as autocast records it: the
    // linear backward's gradient (in the dtype) widened to f32, the
    // layer_norm_backward, the residual branch's gradient added, the sum
    // cast back for the next linear backward; and the parameters' sums.
    AddChain(
        cases, "layer_norm_backward_residual_cast", dtype,
        {{{65, 96}}, {{65, 96}}, {{96}}, {{96}}, {{65, 96}}},
        [dtype](const std::vector<Tensor>& in) -> Outputs {
          std::vector<Tensor> f32;
          for (const Tensor& t : in) {
            MIXRT_ASSIGN_OR_RETURN(Tensor w, t.to(DType::kF32));
            f32.push_back(w);
          }
          MIXRT_ASSIGN_OR_RETURN(LayerNormOutput o,
                                 layer_norm(f32[1], 1, f32[2], f32[3]));
          MIXRT_ASSIGN_OR_RETURN(
              LayerNormGrads g,
              layer_norm_backward(f32[0], f32[1], o, 1, f32[2]));
          MIXRT_ASSIGN_OR_RETURN(Tensor sum, add(g.grad_x, f32[4]));
          MIXRT_ASSIGN_OR_RETURN(sum, sum.to(dtype));
          return std::vector<Tensor>{sum, g.grad_weight, g.grad_bias};
        },
        [dtype](int output, const std::vector<std::vector<double>>& in) {
          // Per element, the absolute terms each result sums: dx_i = rstd
          // (g_i w_i - mean(g w) - xhat_i mean(g w xhat)) (+ residual),
          // dw_i = sum over rows of g xhat, db_i = sum over rows of g.
          constexpr int kRows = 65, kCols = 96;
          std::vector<double> m(output == 0 ? kRows * kCols : kCols, 0.0);
          for (int r = 0; r < kRows; ++r) {
            double mean = 0, var = 0;
            for (int c = 0; c < kCols; ++c)
              mean += in[1][r * kCols + c] / kCols;
            for (int c = 0; c < kCols; ++c) {
              var += std::pow(in[1][r * kCols + c] - mean, 2) / kCols;
            }
            const double rstd = 1 / std::sqrt(var + 1e-5);
            double gw = 0, gwx = 0;
            std::vector<double> xhat(kCols);
            for (int c = 0; c < kCols; ++c) {
              const double g = Finite(in[0][r * kCols + c]);
              xhat[c] = std::fabs(in[1][r * kCols + c] - mean) * rstd;
              gw += g * Finite(in[2][c]) / kCols;
              gwx += g * Finite(in[2][c]) * xhat[c] / kCols;
            }
            for (int c = 0; c < kCols; ++c) {
              const double g = Finite(in[0][r * kCols + c]);
              if (output == 0) {
                m[r * kCols + c] =
                    rstd * (g * Finite(in[2][c]) + gw + xhat[c] * gwx) +
                    Finite(in[4][r * kCols + c]);
              } else {
                m[c] += output == 1 ? g * xhat[c] : g;
              }
            }
          }
          // The sum is cast to the dtype; the parameters' sums stay f32.
          Tolerance t =
              ChainTolerance(output == 0 ? dtype : DType::kF32, 4, m, false);
          t.rtol += 64 * UnitRoundoff(DType::kF32);
          return t;
        });
    // softmax spelled out: exp(x - max) / sum: reductions feeding pointwise
    // ops feeding reductions.
    AddChain(
        cases, "softmax_pattern", dtype, {{{31, 67}, dtype}},
        [](const std::vector<Tensor>& in) -> Outputs {
          MIXRT_ASSIGN_OR_RETURN(Tensor m, amax(in[0], {1}, /*keepdim=*/true));
          MIXRT_ASSIGN_OR_RETURN(Tensor e, sub(in[0], m));
          MIXRT_ASSIGN_OR_RETURN(e, exp(e));
          MIXRT_ASSIGN_OR_RETURN(Tensor s, sum(e, {1}, /*keepdim=*/true));
          return One(div(e, s));
        },
        [dtype](int, const std::vector<std::vector<double>>& in) {
          // Probabilities: each a few roundings of itself and of its row's
          // sum (67 terms of at most 1).
          std::vector<double> m(in[0].size(), 1.0);
          Tolerance t = ChainTolerance(dtype, 6, m, true);
          for (double& e : t.extra) e += 67 * std::ldexp(1.0, -23);
          return t;
        });
    AddAttentionHeadsCases(dtype, 2, cases);
    AddAttentionHeadsCases(dtype, 8, cases);
  }
}

}  // namespace mixrt::conformance
