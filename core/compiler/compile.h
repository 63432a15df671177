// mixrt::compile, like torch.compile: the first call of each input
// signature traces the function into a graph (capture.h) and builds a plan
// (plan.h); later calls whose guards hold replay it. Guards cover what the
// trace assumed: every input's dtype, device, shape, strides, aliasing and
// requires_grad, grad and inference mode, this thread's whole autocast
// state (as PyTorch 2.15 does; older PyTorch did not, pytorch#112260) and
// MIXRT_DISABLE_AMP. A failed guard recompiles; past the recompile
// limit the function runs eagerly with one warning naming the guard that
// kept failing (under fullgraph: each such call is an error). A call that
// cannot be captured (a graph break: a host read of tensor data, random draws,
// a result needing autograd) runs eagerly and is remembered as such; with
// fullgraph it is an error naming why. `disable` or MIXRT_COMPILE_DISABLE=1
// runs eagerly, the guide's debugging switch; MIXRT_COMPILE_LOG=1 prints each
// compile, break and recompile.
#ifndef MIXRT_CORE_COMPILER_COMPILE_H_
#define MIXRT_CORE_COMPILER_COMPILE_H_

#include <memory>
#include <optional>
#include <string>
#include <typeinfo>
#include <vector>

#include "absl/status/statusor.h"
#include "core/compiler/capture.h"
#include "core/tensor/tensor.h"

namespace mixrt {

struct CompileOptions {
  // "default": intermediates from the caching allocator per call;
  // "reduce-overhead": intermediates held between calls (no allocation in
  // the steady state); "max-autotune" times each fused kernel the plugin
  // compiled against the launches it replaces, on the graph's shapes,
  // keeps the faster (Explain shows both times; the compile cache keeps
  // the decision) and replays as "reduce-overhead";
  // "max-autotune-no-cudagraphs" times the same way and runs as "default".
  std::string mode = "default";
  // Unset (auto): sizes start static; when a recompile comes from sizes
  // that changed together (one value to another), their two graphs are
  // generalized into formulas in that size, checked on a third size; then
  // each new size is traced once and checked against them (a size is
  // never extrapolated: host code may branch on it). Only the first two
  // traces count as compiles (PyTorch's automatic dynamic recompiles
  // once); the third verifies. false: always static. true: as PyTorch's
  // dynamic=True, sizes never count: a call whose sizes alone changed
  // learns them without counting as a recompile (mixrt generalizes from
  // traces, so the first is static; the graphs are proven the same way),
  // until a size's formulas are refuted.
  std::optional<bool> dynamic;
  bool fullgraph = false;
  bool disable = false;
  // "mixrt": traced graphs run as plans; "eager": the function as written
  // (torch.compile's backend="eager", for bisecting a problem).
  std::string backend = "mixrt";
  int recompile_limit = 8;
  // torch._dynamo's verify_correctness, for finding host values a graph
  // baked in: every call whose graph would replay traces the function
  // again (running it eagerly: its results are returned) and compares the
  // new graph with the cached one. A difference (a scalar argument, host
  // data written into a tensor, another weight tensor, another path) is
  // printed once per signature, naming the first differing node, and the
  // signature traces anew on its next call. MIXRT_COMPILE_VERIFY=1 turns
  // it on for every compiled function. Slower than eager: for debugging.
  bool verify = false;
  // compile(module) only: instances of the module's type whose parameters
  // have the same names, shapes and dtypes share graphs process-wide, so
  // the repeated blocks of a model trace once (regional compilation). Set
  // it only for blocks whose forward depends on nothing but their
  // parameters: settings outside them (a causal flag, an activation
  // choice) are not guards, and two blocks differing in one would share a
  // wrong graph.
  bool share_across_instances = false;
};

class CompiledFunction {
 public:
  absl::StatusOr<std::vector<Tensor>> operator()(
      const std::vector<Tensor>& inputs) const;

  // What happened so far: each signature's graph (or why it runs eagerly),
  // its guards, and each recompile's cause.
  std::string Explain() const;
  // Traces so far (recompiles included); graphs replayed; eager calls.
  int compiles() const;
  int64_t replays() const;
  int64_t eager_calls() const;

  struct State;

 private:
  friend absl::StatusOr<CompiledFunction> compile(compiler::TracedFunction,
                                                  CompileOptions);
  friend absl::StatusOr<CompiledFunction> CompileModuleForward(
      compiler::TracedFunction, CompileOptions, std::vector<Tensor>,
      std::string);
  std::shared_ptr<State> state_;
};

// torch._dynamo.explain: compiles fn, calls it once on `inputs` (running
// it for real) and returns what compile made of the call: its graph or the
// break that kept it eager, and the guards.
absl::StatusOr<std::string> compile_explain(compiler::TracedFunction fn,
                                            const std::vector<Tensor>& inputs,
                                            CompileOptions options = {});

// compile() for a module's forward: constants that are its parameters are
// bound by position, so instances of one module type with parameters of the
// same names, shapes and dtypes share graphs (regional compilation: each
// repeated block traces once per signature, process-wide).
absl::StatusOr<CompiledFunction> CompileModuleForward(
    compiler::TracedFunction fn, CompileOptions options,
    std::vector<Tensor> parameters, std::string module_key);

// Refuses an unknown mode or backend, or a recompile limit below 1.
absl::StatusOr<CompiledFunction> compile(compiler::TracedFunction fn,
                                         CompileOptions options = {});

// A module compiled (torch.compile(model)): called like the module, its
// parameters constants of the graphs (updated in place by optimizers, so
// replays see each step's values). Training and eval mode trace apart
// (batch norm and dropout launch different work), so the module's mode is
// a guard too.
template <typename Module>
class CompiledModule {
 public:
  CompiledModule(std::shared_ptr<Module> module, CompiledFunction training,
                 CompiledFunction eval)
      : module_(std::move(module)),
        training_(std::move(training)),
        eval_(std::move(eval)) {}
  absl::StatusOr<Tensor> forward(const Tensor& x) const {
    absl::StatusOr<std::vector<Tensor>> out = compiled()({x});
    if (!out.ok()) return out.status();
    return (*out)[0];
  }
  absl::StatusOr<Tensor> operator()(const Tensor& x) const {
    return forward(x);
  }
  Module& module() const { return *module_; }
  // The compiled function of the module's current mode.
  const CompiledFunction& compiled() const {
    return module_->is_training() ? training_ : eval_;
  }

 private:
  std::shared_ptr<Module> module_;
  CompiledFunction training_, eval_;
};

template <typename Module>
absl::StatusOr<CompiledModule<Module>> compile(std::shared_ptr<Module> module,
                                               CompileOptions options = {}) {
  if (module == nullptr) {
    return absl::InvalidArgumentError("compile: no module given");
  }
  Module* m = module.get();
  std::string key = typeid(*m).name();
  std::vector<Tensor> parameters;
  for (const auto& [name, p] : m->named_parameters()) {
    key += "|" + name + ":" + std::string(DTypeName(p.dtype())) + ":" +
           std::to_string(p.requires_grad());
    for (int64_t d : p.shape()) key += "," + std::to_string(d);
    for (int64_t d : p.strides()) key += "/" + std::to_string(d);
    parameters.push_back(p);
  }
  auto forward = [m](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    absl::StatusOr<Tensor> out = m->forward(in.at(0));
    if (!out.ok()) return out.status();
    return std::vector<Tensor>{*std::move(out)};
  };
  absl::StatusOr<CompiledFunction> training =
      CompileModuleForward(forward, options, parameters, key + "|train");
  if (!training.ok()) return training.status();
  absl::StatusOr<CompiledFunction> eval = CompileModuleForward(
      forward, std::move(options), std::move(parameters), key + "|eval");
  if (!eval.ok()) return eval.status();
  return CompiledModule<Module>(std::move(module), *std::move(training),
                                *std::move(eval));
}

}  // namespace mixrt

#endif  // MIXRT_CORE_COMPILER_COMPILE_H_
