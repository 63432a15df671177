// reduce: sum, mean, max, min, amax, var over any set of axes.
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "mixrt/status_macros.h"
#include "plugins/reference/reference_kernels.h"
#include "plugins/sdk/call_decoders.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::reference {
namespace {

using sdk::TensorRef;

// Calls fn(out_index, value) for every input element, where out_index is the
// row-major index of the output element it reduces into.
template <typename Fn>
void ForEachInput(const TensorRef& in, uint32_t mask, Fn&& fn) {
  std::array<int64_t, MIXRT_MAX_DIMS> acc_strides{};
  int64_t stride = 1;
  for (int d = in.ndim() - 1; d >= 0; --d) {
    const bool reduced = (mask >> d) & 1u;
    acc_strides[d] = reduced ? 0 : stride;
    if (!reduced) stride *= in.dim(d);
  }
  sdk::ForEachElement<2>(in.ndim(), in.shape(),
                         {in.strides(), acc_strides.data()},
                         [&](const std::array<int64_t, 2>& o) {
                           fn(o[1], static_cast<double>(in.LoadFloat(o[0])));
                         });
}

}  // namespace

namespace {

sdk::Status Reduce(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(ExpectArity(call, 1, 1, 1));
  MIXRT_ASSIGN_OR_RETURN(auto attrs, call.GetAttrs<MixrtReduceAttrs>());
  const MixrtReduceAttrs a = *attrs;
  const TensorRef& in = call.inputs[0];
  const TensorRef& out = call.outputs[0];
  if (a.kind >= MIXRT_REDUCE_COUNT) {
    return sdk::UnimplementedError(
        absl::StrCat("reduce kind ", a.kind, " is unknown here"));
  }
  if (!sdk::IsFloatingDtype(in.dtype()) || !sdk::IsFloatingDtype(out.dtype())) {
    return sdk::InvalidArgumentError("reduce needs floating tensors");
  }
  if (in.ndim() != out.ndim()) {
    return sdk::InvalidArgumentError("reduce keeps the rank (keepdim form)");
  }
  int64_t group = 1;
  for (int d = 0; d < in.ndim(); ++d) {
    const bool reduced = (a.axes_mask >> d) & 1u;
    if (out.dim(d) != (reduced ? 1 : in.dim(d))) {
      return sdk::InvalidArgumentError(
          absl::StrCat("reduce: output dim ", d, " is ", out.dim(d),
                       ", expected ", reduced ? 1 : in.dim(d)));
    }
    if (reduced) group *= in.dim(d);
  }
  const int64_t n_out = out.numel();
  const auto kind = static_cast<MixrtReduceKind>(a.kind);
  const bool extremum = kind == MIXRT_REDUCE_MAX || kind == MIXRT_REDUCE_MIN ||
                        kind == MIXRT_REDUCE_ABS_MAX;
  if (extremum && group == 0) {
    return sdk::InvalidArgumentError(
        "max/min/amax of an empty set of elements is undefined");
  }
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> acc(n_out, kind == MIXRT_REDUCE_MAX   ? -inf
                                 : kind == MIXRT_REDUCE_MIN ? inf
                                                            : 0.0);
  std::vector<double> mean;
  if (kind == MIXRT_REDUCE_VAR) {
    mean.assign(n_out, 0.0);
    ForEachInput(in, a.axes_mask, [&](int64_t i, double v) { mean[i] += v; });
    for (double& m : mean) m /= static_cast<double>(group);
  }
  ForEachInput(in, a.axes_mask, [&](int64_t i, double v) {
    double& r = acc[i];
    switch (kind) {
      case MIXRT_REDUCE_SUM:
      case MIXRT_REDUCE_MEAN:
        r += v;
        break;
      case MIXRT_REDUCE_MAX:
        r = (v != v || r != r) ? v + r : (v > r ? v : r);
        break;
      case MIXRT_REDUCE_MIN:
        r = (v != v || r != r) ? v + r : (v < r ? v : r);
        break;
      case MIXRT_REDUCE_ABS_MAX:
        r = (v != v || r != r) ? v + r : std::max(r, std::fabs(v));
        break;
      default:  // VAR
        r += (v - mean[i]) * (v - mean[i]);
        break;
    }
  });
  if (kind == MIXRT_REDUCE_MEAN) {
    for (double& r : acc) r /= static_cast<double>(group);
  } else if (kind == MIXRT_REDUCE_VAR) {
    const double dof = static_cast<double>(group) - a.correction;
    for (double& r : acc) r = dof > 0 ? r / dof : std::nan("");
  }
  int64_t k = 0;
  sdk::ForEachElement<1>(out.ndim(), out.shape(), {out.strides()},
                         [&](const std::array<int64_t, 1>& o) {
                           out.StoreFloat(o[0], static_cast<float>(acc[k++]));
                         });
  return sdk::OkStatus();
}

}  // namespace

namespace {

sdk::Status MultiTensorNorm(const sdk::KernelCall& call) {
  MIXRT_RETURN_IF_ERROR(sdk::ExpectMultiTensorNorm(call));
  double sum = 0;
  for (const TensorRef& t : call.inputs) {
    sdk::ForEachElement<1>(t.ndim(), t.shape(), {t.strides()},
                           [&](const std::array<int64_t, 1>& o) {
                             const double v = t.LoadFloat(o[0]);
                             sum += v * v;
                           });
  }
  call.outputs[0].StoreFloat(0, static_cast<float>(std::sqrt(sum)));
  return sdk::OkStatus();
}

}  // namespace

std::vector<sdk::OpTable::Row> ReduceOps() {
  return {
      {MIXRT_OP_REDUCE, Reduce},
      {MIXRT_OP_MULTI_TENSOR_NORM, MultiTensorNorm},
  };
}

}  // namespace mixrt::reference
