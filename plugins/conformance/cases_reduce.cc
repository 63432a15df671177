#include <optional>

#include "absl/strings/str_cat.h"
#include "core/kernels/reduce.h"
#include "plugins/conformance/case_util.h"

namespace mixrt::conformance {

using namespace ::mixrt::kernels;  // The ops the cases run.

namespace {

// Sum of |x| over the reduced group of each output, for reductions' error
// bounds: accumulating n terms in f32 costs up to n * 2^-24 * sum|x|.
std::vector<double> AbsSumBound(const std::vector<double>& x, int64_t outer,
                                int64_t group, int64_t inner) {
  std::vector<double> bound(outer * inner, 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t g = 0; g < group; ++g)
      for (int64_t i = 0; i < inner; ++i) {
        double v = std::fabs(x[(o * group + g) * inner + i]);
        if (!std::isfinite(v)) v = 0;
        bound[o * inner + i] += v;
      }
  for (double& b : bound)
    b *= static_cast<double>(group) * std::ldexp(1.0, -23);
  return bound;
}

struct R {
  const char* name;
  MixrtReduceKind kind;
};

// [outer, group, inner] views of the input for an axis set.
struct Axes {
  const char* name;
  std::vector<int64_t> dims;
  int64_t outer, group, inner;
};

// Reduction r over axes a of x, within the f32 accumulation bound.
// out_dtype: the result's, when not the input's.
void AddReduceCase(const std::string& name, const R& r, const Axes& a,
                   const InputSpec& x, std::vector<Case>* cases,
                   std::optional<DType> out_dtype = std::nullopt) {
  const DType dtype = x.dtype;
  const DType result_dtype = out_dtype.value_or(dtype);
  cases->push_back(
      {name, MIXRT_OP_CLASS_REDUCTION, dtype, [=](const Devices& d) {
         CompareOp(
             d, {x},
             [r, a, out_dtype](const std::vector<Tensor>& in) {
               return One(reduce(r.kind, in[0], a.dims, /*keepdim=*/true,
                                 r.kind == MIXRT_REDUCE_VAR ? 1.0 : 0.0,
                                 out_dtype));
             },
             [=](int, const std::vector<std::vector<double>>& in) {
               Tolerance t = TranscendentalTolerance(result_dtype);
               t.extra = AbsSumBound(in[0], a.outer, a.group, a.inner);
               if (r.kind == MIXRT_REDUCE_MEAN) {
                 for (double& e : t.extra) e /= a.group;
               }
               if (r.kind == MIXRT_REDUCE_VAR) {
                 // Sums of squares: bounded by the squares' sum.
                 for (double& e : t.extra) e = e * 8 / (a.group - 1);
               }
               return t;
             },
             kSeed);
       }});
}

}  // namespace

void AddReduceCases(std::vector<Case>* cases) {
  const R kinds[] = {
      {"sum", MIXRT_REDUCE_SUM},         {"mean", MIXRT_REDUCE_MEAN},
      {"amax", MIXRT_REDUCE_MAX},        {"amin", MIXRT_REDUCE_MIN},
      {"abs_max", MIXRT_REDUCE_ABS_MAX}, {"var", MIXRT_REDUCE_VAR}};
  // Views of a [513, 7, 3] tensor.
  const Axes axes[] = {{"last", {2}, 513 * 7, 3, 1},
                       {"first", {0}, 1, 513, 21},
                       {"middle", {1}, 513, 7, 3},
                       {"all", {}, 1, 513 * 21, 1}};
  for (DType dtype : kFloatTypes) {
    for (const R& r : kinds) {
      for (const Axes& a : axes) {
        AddReduceCase(
            absl::StrCat("reduce/", r.name, "/", a.name, "/", DTypeName(dtype)),
            r, a, {{513, 7, 3}, dtype}, cases);
      }
    }
  }
  // Sums and means of bf16/f16 stored in f32 (torch.sum's dtype=; autocast's
  // bias gradients), within f32's bound: no rounding to the input's dtype.
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    for (const R& r : {kinds[0], kinds[1]}) {
      for (const Axes& a : {axes[2], axes[1], axes[3]}) {
        AddReduceCase(absl::StrCat("reduce/", r.name, "/", a.name, "/",
                                   DTypeName(dtype), "_to_f32"),
                      r, a, {{513, 7, 3}, dtype}, cases, DType::kF32);
      }
    }
  }
  // Sums long enough that a kernel splits them (a whole 140002-element
  // tensor, rows of 70001): its pieces' partial sums must still add up.
  // Positive values, so that the f32 error bound (~500) stays far below
  // what a lost or repeated piece would cost (~50000).
  for (DType dtype : kFloatTypes) {
    for (const R& r : {kinds[0], kinds[1]}) {
      for (const Axes& a :
           {Axes{"all", {}, 1, 2 * 70001, 1}, Axes{"rows", {1}, 2, 70001, 1}}) {
        AddReduceCase(absl::StrCat("reduce/", r.name, "/long_", a.name, "/",
                                   DTypeName(dtype)),
                      r, a, {{2, 70001}, dtype, Values::kPositive}, cases);
      }
    }
  }
  // ABI 1.1: the total norm of many tensors (sizes past one GPU chunk, an
  // empty one, one element; NaN and inf propagate in "special").
  for (DType dtype : kFloatTypes) {
    for (Values values : {Values::kNormal, Values::kSpecial}) {
      const std::vector<InputSpec> specs = {{{513, 7}, dtype, values},
                                            {{70000}, dtype},
                                            {{0, 5}, dtype},
                                            {{1}, dtype, values}};
      cases->push_back(
          {absl::StrCat("multi_tensor_norm/",
                        values == Values::kSpecial ? "special/" : "",
                        DTypeName(dtype)),
           MIXRT_OP_CLASS_REDUCTION, dtype, [=](const Devices& d) {
             CompareOp(
                 d, specs,
                 [](const std::vector<Tensor>& in) {
                   return One(multi_tensor_norm(in, in[0].device()));
                 },
                 // A sum of ~7e4 squares accumulated in f32 or better.
                 Fixed({1e-5, 0, {}}), kSeed);
           }});
    }
  }
}

}  // namespace mixrt::conformance
