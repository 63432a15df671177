// The core's differentiable ops for mixrt.nn.functional and the Tensor
// methods written in Python (python/mixrt/nn/functional.py arranges
// PyTorch's signatures over these). The GIL is released around each.
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/functional/checkpoint.h"
#include "core/functional/ops.h"
#include "nanobind/nanobind.h"
#include "nanobind/stl/function.h"
#include "nanobind/stl/optional.h"
#include "nanobind/stl/string.h"
#include "nanobind/stl/vector.h"
#include "python/src/bindings.h"
#include "python/src/python_callable.h"
#include "python/src/status_to_python.h"

namespace nb = nanobind;

namespace mixrt::python {
namespace {

using Release = nb::call_guard<nb::gil_scoped_release>;

Reduction ParseReduction(const std::string& name) {
  if (name == "mean") return Reduction::kMean;
  if (name == "sum") return Reduction::kSum;
  if (name == "none") return Reduction::kNone;
  throw nb::value_error(
      (name + " is not a valid value for reduction (expected 'mean', 'sum' "
              "or 'none')")
          .c_str());
}

Tensor OrUndefined(const std::optional<Tensor>& t) {
  return t.has_value() ? *t : Tensor();
}

template <typename Fn>
void Unary(nb::module_& m, const char* name, Fn fn) {
  m.def(
      name, [fn](const Tensor& x) { return ValueOrThrow(fn(x)); }, Release());
}

// A loss of (input, target, reduction) as nn.functional spells it.
template <typename Fn>
void Loss(nb::module_& m, const char* name, Fn fn) {
  m.def(name, [fn](const Tensor& x, const Tensor& target,
                   const std::string& reduction) {
    const Reduction r = ParseReduction(reduction);
    nb::gil_scoped_release release;
    return ValueOrThrow(fn(x, target, r));
  });
}

}  // namespace

void BindFunctional(nb::module_& m) {
  Unary(m, "relu", [](const Tensor& x) { return relu(x); });
  Unary(m, "silu", [](const Tensor& x) { return silu(x); });
  Unary(m, "sigmoid", [](const Tensor& x) { return sigmoid(x); });
  Unary(m, "tanh", [](const Tensor& x) { return tanh(x); });
  Unary(m, "exp", [](const Tensor& x) { return exp(x); });
  Unary(m, "log", [](const Tensor& x) { return log(x); });
  Unary(m, "sqrt", [](const Tensor& x) { return sqrt(x); });
  m.def(
      "gelu",
      [](const Tensor& x, bool tanh) { return ValueOrThrow(gelu(x, tanh)); },
      Release());
  m.def(
      "leaky_relu",
      [](const Tensor& x, double slope) {
        return ValueOrThrow(leaky_relu(x, slope));
      },
      Release());
  m.def(
      "clamp",
      [](const Tensor& x, double lo, double hi) {
        return ValueOrThrow(clamp(x, lo, hi));
      },
      Release());
  m.def(
      "matmul",
      [](const Tensor& a, const Tensor& b) {
        return ValueOrThrow(matmul(a, b));
      },
      Release());
  m.def(
      "linear",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b) {
        return ValueOrThrow(linear(x, w, OrUndefined(b)));
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("bias").none(), Release());
  m.def(
      "softmax",
      [](const Tensor& x, int64_t dim) {
        return ValueOrThrow(softmax(x, dim));
      },
      Release());
  m.def(
      "log_softmax",
      [](const Tensor& x, int64_t dim) {
        return ValueOrThrow(log_softmax(x, dim));
      },
      Release());
  m.def(
      "layer_norm",
      [](const Tensor& x, int dims, std::optional<Tensor> w,
         std::optional<Tensor> b, double eps) {
        return ValueOrThrow(
            layer_norm(x, dims, OrUndefined(w), OrUndefined(b), eps));
      },
      nb::arg("input"), nb::arg("normalized_dims"), nb::arg("weight").none(),
      nb::arg("bias").none(), nb::arg("eps"), Release());
  m.def(
      "dropout",
      [](const Tensor& x, double p) { return ValueOrThrow(dropout(x, p)); },
      Release());
  m.def(
      "embedding",
      [](const Tensor& weight, const Tensor& indices,
         std::optional<int64_t> padding_idx) {
        return ValueOrThrow(embedding(weight, indices, padding_idx));
      },
      nb::arg("weight"), nb::arg("indices"), nb::arg("padding_idx").none(),
      Release());
  m.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b,
         std::vector<int> stride, std::vector<int> padding,
         std::vector<int> dilation, int groups) {
        Conv2dOptions o;
        o.stride = {stride[0], stride[1]};
        o.padding = {padding[0], padding[1]};
        o.dilation = {dilation[0], dilation[1]};
        o.groups = groups;
        return ValueOrThrow(conv2d(x, w, OrUndefined(b), o));
      },
      nb::arg("input"), nb::arg("weight"), nb::arg("bias").none(),
      nb::arg("stride"), nb::arg("padding"), nb::arg("dilation"),
      nb::arg("groups"), Release());
  m.def(
      "pool2d",
      [](const Tensor& x, bool max, std::vector<int> kernel,
         std::vector<int> stride, std::vector<int> padding) {
        Pool2dOptions o;
        o.kind = max ? MIXRT_POOL_MAX : MIXRT_POOL_AVG;
        o.kernel = {kernel[0], kernel[1]};
        o.stride = {stride[0], stride[1]};
        o.padding = {padding[0], padding[1]};
        return ValueOrThrow(pool2d(x, o));
      },
      Release());
  m.def(
      "batch_norm",
      [](const Tensor& x, std::optional<Tensor> running_mean,
         std::optional<Tensor> running_var, std::optional<Tensor> w,
         std::optional<Tensor> b, bool training, double momentum, double eps) {
        return ValueOrThrow(batch_norm(
            x, OrUndefined(w), OrUndefined(b), OrUndefined(running_mean),
            OrUndefined(running_var), training, momentum, eps));
      },
      nb::arg("input"), nb::arg("running_mean").none(),
      nb::arg("running_var").none(), nb::arg("weight").none(),
      nb::arg("bias").none(), nb::arg("training"), nb::arg("momentum"),
      nb::arg("eps"), Release());
  m.def(
      "scaled_dot_product_attention",
      [](const Tensor& q, const Tensor& k, const Tensor& v,
         std::optional<Tensor> mask, double dropout_p, bool is_causal,
         std::optional<double> scale, bool enable_gqa) {
        AttentionOptions o;
        o.attn_mask = OrUndefined(mask);
        o.dropout_p = dropout_p;
        o.is_causal = is_causal;
        o.scale = scale;
        o.enable_gqa = enable_gqa;
        return ValueOrThrow(scaled_dot_product_attention(q, k, v, o));
      },
      nb::arg("query"), nb::arg("key"), nb::arg("value"),
      nb::arg("attn_mask").none(), nb::arg("dropout_p"), nb::arg("is_causal"),
      nb::arg("scale").none(), nb::arg("enable_gqa"), Release());
  Loss(m, "mse_loss",
       [](auto& x, auto& t, Reduction r) { return mse_loss(x, t, r); });
  Loss(m, "l1_loss",
       [](auto& x, auto& t, Reduction r) { return l1_loss(x, t, r); });
  m.def(
      "cross_entropy",
      [](const Tensor& logits, const Tensor& target, int64_t ignore_index,
         const std::string& reduction, double label_smoothing,
         std::optional<Tensor> weight) {
        CrossEntropyOptions o;
        o.weight = OrUndefined(weight);
        o.ignore_index = ignore_index;
        o.reduction = ParseReduction(reduction);
        o.label_smoothing = label_smoothing;
        nb::gil_scoped_release release;
        return ValueOrThrow(cross_entropy(logits, target, o));
      },
      nb::arg("logits"), nb::arg("target"), nb::arg("ignore_index"),
      nb::arg("reduction"), nb::arg("label_smoothing"),
      nb::arg("weight").none());
  m.def("nll_loss", [](const Tensor& log_probs, const Tensor& target,
                       int64_t ignore_index, const std::string& reduction) {
    CrossEntropyOptions o;
    o.ignore_index = ignore_index;
    o.reduction = ParseReduction(reduction);
    nb::gil_scoped_release release;
    return ValueOrThrow(nll_loss(log_probs, target, o));
  });
  m.def("smooth_l1_loss", [](const Tensor& x, const Tensor& t,
                             const std::string& reduction, double beta) {
    const Reduction r = ParseReduction(reduction);
    nb::gil_scoped_release release;
    return ValueOrThrow(smooth_l1_loss(x, t, r, beta));
  });
  Loss(m, "binary_cross_entropy", [](auto& x, auto& t, Reduction r) {
    return binary_cross_entropy(x, t, r);
  });
  Loss(m, "binary_cross_entropy_with_logits",
       [](auto& x, auto& t, Reduction r) {
         return binary_cross_entropy_with_logits(x, t, r);
       });
  m.def(
      "cat",
      [](const std::vector<Tensor>& ts, int64_t dim) {
        return ValueOrThrow(cat(ts, dim));
      },
      Release());
  m.def(
      "stack",
      [](const std::vector<Tensor>& ts, int64_t dim) {
        return ValueOrThrow(stack(ts, dim));
      },
      Release());
  // torch.utils.checkpoint.checkpoint: `fn` is Python, called with the GIL
  // (the core calls it again in the backward to recompute).
  m.def("checkpoint", [](nb::callable py_fn, const std::vector<Tensor>& inputs,
                         bool preserve_rng_state, bool use_reentrant) {
    const PythonCallable fn(std::move(py_fn));
    CheckpointFn call = [fn](const std::vector<Tensor>& in)
        -> absl::StatusOr<std::vector<Tensor>> {
      nb::gil_scoped_acquire gil;
      try {
        nb::object out = fn.get()(*nb::cast(in));
        if (nb::isinstance<Tensor>(out))
          return std::vector<Tensor>{nb::cast<Tensor>(out)};
        return nb::cast<std::vector<Tensor>>(out);
      } catch (nb::python_error& e) {
        return absl::InternalError(std::string("checkpointed function: ") +
                                   e.what());
      }
    };
    absl::StatusOr<std::vector<Tensor>> out;
    {
      nb::gil_scoped_release release;
      out = mixrt::checkpoint(call, inputs,
                              {.preserve_rng_state = preserve_rng_state,
                               .use_reentrant = use_reentrant});
    }
    return ValueOrThrow(std::move(out));
  });
}

}  // namespace mixrt::python
