#include "core/functional/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include "absl/status/statusor.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/engine.h"
#include "core/autograd/function_node.h"
#include "core/autograd/grad_mode.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

struct RngState {
  Generator* generator;
  uint64_t seed;
  uint64_t offset;
};

std::vector<RngState> Capture(const std::vector<Generator*>& generators) {
  std::vector<RngState> states;
  for (Generator* g : generators) {
    states.push_back({g, g->seed(), g->offset()});
  }
  return states;
}

void Restore(const std::vector<RngState>& states) {
  for (const RngState& s : states) s.generator->set_state(s.seed, s.offset);
}

void WarnNoInputRequiresGrad() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(
        stderr,
        "mixrt checkpoint: None of the inputs have requires_grad=True. "
        "Gradients will be None\n");
  });
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> checkpoint(
    const CheckpointFn& fn, const std::vector<Tensor>& inputs,
    const CheckpointOptions& options) {
  if (!GradModeEnabled()) return fn(inputs);  // Nothing would be saved.
  std::vector<Generator*> generators;
  if (options.preserve_rng_state) generators.push_back(&DefaultGenerator());
  for (Generator* g : options.preserve_rng_state ? options.generators
                                                 : std::vector<Generator*>{}) {
    if (g != nullptr && std::find(generators.begin(), generators.end(), g) ==
                            generators.end()) {
      generators.push_back(g);
    }
  }
  const std::vector<RngState> forward_rng = Capture(generators);
  const AutocastState autocast = CaptureAutocastState();
  std::vector<bool> needs_grad;
  bool any = false;
  for (const Tensor& t : inputs) {
    needs_grad.push_back(t.defined() && t.requires_grad());
    any |= needs_grad.back();
  }
  // Non-reentrant: with no input that needs a gradient, an anchor of the
  // region's own gives it a node, whose backward recomputes `fn` and so
  // reaches the parameters inside. Its gradient is dropped.
  std::vector<Tensor> node_inputs = inputs;
  if (!any && !options.use_reentrant) {
    const Tensor* on = nullptr;
    for (const Tensor& t : inputs) {
      if (t.defined()) on = &t;
    }
    // No tensor to place the anchor by: run it plainly (right gradients,
    // no memory saved).
    if (on == nullptr) return fn(inputs);
    MIXRT_ASSIGN_OR_RETURN(Tensor anchor, zeros({}, DType::kF32, on->device()));
    MIXRT_RETURN_IF_ERROR(anchor.set_requires_grad(true));
    node_inputs.push_back(anchor);
  } else if (!any) {
    WarnNoInputRequiresGrad();
  }

  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    MIXRT_ASSIGN_OR_RETURN(outputs, fn(inputs));
  }
  std::vector<Tensor*> output_ptrs;
  for (Tensor& t : outputs) output_ptrs.push_back(&t);
  const size_t node_inputs_count = node_inputs.size();
  Record("CheckpointBackward", node_inputs, output_ptrs, inputs,
         [=](const std::vector<Tensor>& grads, const std::vector<Tensor>& saved)
             -> absl::StatusOr<std::vector<Tensor>> {
           // Recompute exactly as the forward ran, then put the generators
           // back: the recompute must not shift later random draws.
           const std::vector<RngState> now = Capture(generators);
           Restore(forward_rng);
           std::vector<Tensor> leaves;
           absl::StatusOr<std::vector<Tensor>> recomputed;
           {
             AutocastStateGuard same_precision(autocast);
             EnableGradGuard grad_on;
             for (size_t i = 0; i < saved.size(); ++i) {
               Tensor leaf = saved[i].defined() ? saved[i].detach() : Tensor();
               if (needs_grad[i])
                 MIXRT_RETURN_IF_ERROR(leaf.set_requires_grad(true));
               leaves.push_back(std::move(leaf));
             }
             recomputed = fn(leaves);
           }
           Restore(now);
           if (!recomputed.ok()) return recomputed.status();
           std::vector<Tensor> roots, root_grads;
           for (size_t k = 0; k < recomputed->size() && k < grads.size(); ++k) {
             const Tensor& out = (*recomputed)[k];
             if (grads[k].defined() && out.defined() && out.requires_grad()) {
               roots.push_back(out);
               root_grads.push_back(grads[k]);
             }
           }
           if (!roots.empty()) {
             // Its gradients reach the parameters through a backward of its
             // own, which a compiled backward's graph would not replay: a
             // trace of the backward stops here (the call runs eagerly)
             // before that backward adds to any parameter's .grad.
             if (ActiveCaptureHooks() != nullptr) {
               return absl::UnimplementedError(
                   "activation checkpointing recomputes its region and "
                   "backpropagates through it in a backward of its own, which "
                   "a compiled backward cannot replay");
             }
             MIXRT_RETURN_IF_ERROR(RunBackward(roots, root_grads,
                                               /*retain_graph=*/false));
           }
           std::vector<Tensor> input_grads;
           for (size_t i = 0; i < leaves.size(); ++i) {
             input_grads.push_back(needs_grad[i] ? leaves[i].grad() : Tensor());
           }
           input_grads.resize(node_inputs_count);  // The anchor's: none.
           return input_grads;
         });
  return outputs;
}

}  // namespace mixrt
