// Differentiable losses. All are on autocast's f32 lists, so under autocast
// their inputs arrive in f32 and the loss is f32.
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/function_node.h"
#include "core/functional/cross_entropy_composite.h"
#include "core/functional/ops.h"
#include "core/kernels/loss.h"
#include "core/kernels/pointwise.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

using Grads = absl::StatusOr<std::vector<Tensor>>;
using LossFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&,
                                          Reduction);
using LossGradFn = absl::StatusOr<Tensor> (*)(const Tensor&, const Tensor&,
                                              const Tensor&, Reduction);

// The input's and target's gradients of a loss whose target gradient is
// the input's negated, each where needed (a target is usually data: no
// pass over it).
Grads InputAndTargetGrads(const Tensor& di, const std::vector<Tensor>& saved,
                          const InputGradMask& needs) {
  Tensor input_grad, target_grad;
  if (needs[1]) {
    MIXRT_ASSIGN_OR_RETURN(target_grad, kernels::neg(di));
    MIXRT_ASSIGN_OR_RETURN(target_grad,
                           SumToShape(target_grad, saved[1].shape()));
  }
  if (needs[0]) {
    MIXRT_ASSIGN_OR_RETURN(input_grad, SumToShape(di, saved[0].shape()));
  }
  return std::vector<Tensor>{input_grad, target_grad};
}

// A regression-style loss of (input, target) with gradients for both
// (the target's is the input's negated for these losses, except bce).
absl::StatusOr<Tensor> PairLoss(const char* name, LossFn loss, LossGradFn grad,
                                const Tensor& input_in, const Tensor& target_in,
                                Reduction reduction,
                                bool target_grad_is_negation) {
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs(name, MIXRT_OP_CLASS_LOSS, {input_in, target_in}));
  MIXRT_ASSIGN_OR_RETURN(Tensor y, loss(in[0], in[1], reduction));
  if (target_grad_is_negation || !in[1].requires_grad()) {
    RecordMasked(
        absl::StrCat(name, "Backward"), {in[0], in[1]}, {&y}, {in[0], in[1]},
        [grad, reduction](const std::vector<Tensor>& g,
                          const std::vector<Tensor>& s,
                          const InputGradMask& needs) -> Grads {
          MIXRT_ASSIGN_OR_RETURN(Tensor di, grad(g[0], s[0], s[1], reduction));
          return InputAndTargetGrads(di, s, needs);
        });
    return y;
  }
  return absl::UnimplementedError(
      absl::StrCat(name,
                   ": gradients with respect to the target are not "
                   "supported; detach() the target"));
}

absl::StatusOr<Tensor> ClassLoss(const char* name, bool log_probs,
                                 const Tensor& input_in, const Tensor& target,
                                 const CrossEntropyOptions& options) {
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> in,
                         AutocastInputs(name, MIXRT_OP_CLASS_LOSS, {input_in}));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor y, log_probs ? kernels::nll_loss(in[0], target, options)
                          : kernels::cross_entropy(in[0], target, options));
  Record(absl::StrCat(name, "Backward"), {in[0]}, {&y}, {in[0], target},
         [options, log_probs](const std::vector<Tensor>& g,
                              const std::vector<Tensor>& s) -> Grads {
           MIXRT_ASSIGN_OR_RETURN(
               Tensor dx,
               log_probs ? kernels::nll_loss_backward(g[0], s[0], s[1], options)
                         : kernels::cross_entropy_backward(g[0], s[0], s[1],
                                                           options));
           return std::vector<Tensor>{dx};
         });
  return y;
}

}  // namespace

absl::StatusOr<Tensor> cross_entropy(const Tensor& logits, const Tensor& target,
                                     const CrossEntropyOptions& options) {
  if (internal::NeedsCompositeCrossEntropy(logits, target, options)) {
    // Autocast as for the fused path: the loss runs in f32 (the ops it is
    // made of are f32-listed or follow their f32 inputs).
    MIXRT_ASSIGN_OR_RETURN(
        std::vector<Tensor> in,
        AutocastInputs("cross_entropy", MIXRT_OP_CLASS_LOSS, {logits}));
    return internal::CompositeCrossEntropy(in[0], target, options);
  }
  return ClassLoss("cross_entropy", false, logits, target, options);
}

absl::StatusOr<Tensor> nll_loss(const Tensor& log_probs, const Tensor& target,
                                const CrossEntropyOptions& options) {
  return ClassLoss("nll_loss", true, log_probs, target, options);
}

absl::StatusOr<Tensor> mse_loss(const Tensor& input, const Tensor& target,
                                Reduction reduction) {
  return PairLoss("mse_loss", kernels::mse_loss, kernels::mse_loss_backward,
                  input, target, reduction, true);
}

absl::StatusOr<Tensor> l1_loss(const Tensor& input, const Tensor& target,
                               Reduction reduction) {
  return PairLoss("l1_loss", kernels::l1_loss, kernels::l1_loss_backward, input,
                  target, reduction, true);
}

absl::StatusOr<Tensor> smooth_l1_loss(const Tensor& input, const Tensor& target,
                                      Reduction reduction, double beta) {
  if (!(beta > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("smooth_l1_loss: beta must be > 0, got ", beta));
  }
  MIXRT_ASSIGN_OR_RETURN(
      std::vector<Tensor> in,
      AutocastInputs("smooth_l1_loss", MIXRT_OP_CLASS_LOSS, {input, target}));
  MIXRT_ASSIGN_OR_RETURN(
      Tensor y, kernels::smooth_l1_loss(in[0], in[1], reduction, beta));
  RecordMasked("SmoothL1LossBackward", {in[0], in[1]}, {&y}, {in[0], in[1]},
               [reduction, beta](const std::vector<Tensor>& g,
                                 const std::vector<Tensor>& s,
                                 const InputGradMask& needs) -> Grads {
                 MIXRT_ASSIGN_OR_RETURN(Tensor di,
                                        kernels::smooth_l1_loss_backward(
                                            g[0], s[0], s[1], reduction, beta));
                 return InputAndTargetGrads(di, s, needs);
               });
  return y;
}

absl::StatusOr<Tensor> binary_cross_entropy_with_logits(const Tensor& logits,
                                                        const Tensor& target,
                                                        Reduction reduction) {
  return PairLoss("binary_cross_entropy_with_logits",
                  kernels::binary_cross_entropy_with_logits,
                  kernels::binary_cross_entropy_with_logits_backward, logits,
                  target, reduction, false);
}

absl::StatusOr<Tensor> binary_cross_entropy(const Tensor& probs,
                                            const Tensor& target,
                                            Reduction reduction) {
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> in,
                         AutocastInputs("binary_cross_entropy",
                                        MIXRT_OP_CLASS_LOSS, {probs, target}));
  // -(t log p + (1 - t) log(1 - p)), composed from differentiable ops.
  MIXRT_ASSIGN_OR_RETURN(Tensor lp, log(in[0]));
  MIXRT_ASSIGN_OR_RETURN(Tensor one_minus_p, scale(in[0], -1.0, 1.0));
  MIXRT_ASSIGN_OR_RETURN(Tensor l1p, log(one_minus_p));
  MIXRT_ASSIGN_OR_RETURN(Tensor one_minus_t, scale(in[1], -1.0, 1.0));
  MIXRT_ASSIGN_OR_RETURN(Tensor a, mul(in[1], lp));
  MIXRT_ASSIGN_OR_RETURN(Tensor b, mul(one_minus_t, l1p));
  MIXRT_ASSIGN_OR_RETURN(Tensor s, add(a, b));
  MIXRT_ASSIGN_OR_RETURN(Tensor l, neg(s));
  switch (reduction) {
    case Reduction::kNone:
      return l;
    case Reduction::kSum:
      return sum(l);
    default:
      return mean(l);
  }
}

}  // namespace mixrt
