#include "core/compiler/compile.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/on_off.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/call_signature.h"
#include "core/compiler/dynamic_artifact.h"
#include "core/compiler/dynamic_sizes.h"
#include "core/compiler/lower.h"
#include "core/compiler/passes.h"
#include "core/compiler/plan.h"
#include "core/compiler/random_draws.h"
#include "core/compiler/symbolic.h"
#include "core/compiler/trace_entry.h"
#include "core/compiler/training_passes.h"
#include "core/plugin/backend.h"
#include "core/tensor/factories.h"
#include "core/tensor/shape.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

using compiler::FirstGuardDifference;
using compiler::Guard;
using compiler::GuardsFor;
using compiler::SignatureKey;

constexpr char kDisableEnv[] = "MIXRT_COMPILE_DISABLE";
constexpr char kLogEnv[] = "MIXRT_COMPILE_LOG";
constexpr char kVerifyEnv[] = "MIXRT_COMPILE_VERIFY";

// Unset or not understood: off.
bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && ParseOnOff(v).value_or(false);
}

// ", 2 launches on constants kept (8388608 bytes)" for a plan keeping
// some, and how many of those bytes the fused kernels' own copies let go.
std::string KeptText(const compiler::Plan& plan) {
  if (plan.kept_launches() == 0) return "";
  const uint64_t released = plan.released_bytes();
  return absl::StrCat(", ", plan.kept_launches(), " launch",
                      plan.kept_launches() == 1 ? "" : "es",
                      " on constants kept (", plan.kept_bytes(), " bytes",
                      released > 0
                          ? absl::StrCat(", ", released,
                                         " of them released: the fused kernels "
                                         "reading them keep their own copies")
                          : "",
                      ")");
}

// The autograd node of a replayed training call: runs the compiled
// backward on the gradients of the call's results and the activations its
// forward saved, and hands each gradient to its sink's edge.
class CompiledBackwardNode : public Node {
 public:
  CompiledBackwardNode(std::shared_ptr<compiler::Plan> plan,
                       const compiler::TrainingGraphs& training,
                       std::vector<compiler::SavedMemory> saved,
                       std::vector<Tensor> results,
                       std::vector<std::shared_ptr<Storage>> constants,
                       compiler::RandomBase random)
      : Node("CompiledFunctionBackward"),
        plan_(std::move(plan)),
        sink_result_(training.sink_result),
        saved_(std::move(saved)),
        constants_(std::move(constants)),
        random_(random) {
    for (int k : training.grad_outputs) {
      result_dtypes_.push_back(results[k].dtype());
      result_shapes_.push_back(results[k].shape());
    }
  }

  absl::StatusOr<std::vector<Tensor>> Apply(
      std::vector<Tensor> grad_outputs) override {
    // The backward was traced on dense gradients of the results' dtypes.
    std::vector<Tensor> grads(result_dtypes_.size());
    for (size_t j = 0; j < grads.size(); ++j) {
      const Device& device = plan_->graph().device;
      if (j >= grad_outputs.size() || !grad_outputs[j].defined()) {
        MIXRT_ASSIGN_OR_RETURN(
            grads[j], zeros(result_shapes_[j], result_dtypes_[j], device));
        continue;
      }
      MIXRT_ASSIGN_OR_RETURN(Tensor g, grad_outputs[j].to(result_dtypes_[j]));
      MIXRT_ASSIGN_OR_RETURN(grads[j], g.contiguous());
    }
    // Without retain_graph this is the activations' last use: the run
    // frees each after its last node.
    std::vector<compiler::SavedMemory> saved;
    if (frees_saved_after_apply()) {
      saved.swap(saved_);
    } else {
      saved = saved_;
    }
    const std::vector<std::shared_ptr<Storage>> constants = constants_;
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> results,
                           plan_->Run(grads, std::move(saved),
                                      /*saved_out=*/nullptr, &random_));
    std::vector<Tensor> out;
    for (int r : sink_result_) {
      out.push_back(r >= 0 ? results[r] : Tensor());
    }
    return out;
  }

  void ReleaseSaved() override {
    saved_.clear();
    constants_.clear();
  }

 private:
  std::shared_ptr<compiler::Plan> plan_;
  std::vector<int> sink_result_;
  std::vector<compiler::SavedMemory> saved_;
  // The graphs' constants, held from the forward to the backward as an
  // eager graph's saved tensors hold the weights they read.
  std::vector<std::shared_ptr<Storage>> constants_;
  // The numbers its forward drew, which a dropout's backward regenerates.
  compiler::RandomBase random_;
  std::vector<DType> result_dtypes_;
  std::vector<Shape> result_shapes_;
};

// Graphs traced on one instance of a module type, for its other
// instances: constants are parameters by position.
struct SharedGraphs {
  struct Template {
    compiler::Graph forward;
    std::optional<compiler::Graph> backward;
    compiler::TrainingGraphs training;
  };
  std::mutex mutex;
  absl::flat_hash_map<std::string, Template> by_signature;
};

std::shared_ptr<SharedGraphs> SharedGraphsFor(const std::string& module_key) {
  static std::mutex mutex;
  static auto* registry =
      new absl::flat_hash_map<std::string, std::shared_ptr<SharedGraphs>>();
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<SharedGraphs>& g = (*registry)[module_key];
  if (g == nullptr) g = std::make_shared<SharedGraphs>();
  return g;
}

// Whether every constant of g is a whole parameter (offset 0).
bool ConstantsAreParameters(const compiler::Graph& g,
                            const std::vector<Tensor>& parameters) {
  for (const compiler::StorageSlot& slot : g.slots) {
    if (slot.kind != compiler::StorageSlot::Kind::kConstant) continue;
    if (slot.parameter < 0 || parameters[slot.parameter].offset() != 0) {
      return false;
    }
  }
  return true;
}

// g with its constants bound to `parameters`.
std::optional<compiler::Graph> Rebind(compiler::Graph g,
                                      const std::vector<Tensor>& parameters) {
  // A generator of the traced instance's own is not this one's.
  if (!ConstantsAreParameters(g, parameters) ||
      !compiler::DrawsOnlyFromDefaultGenerator(g)) {
    return std::nullopt;
  }
  for (compiler::StorageSlot& slot : g.slots) {
    if (slot.kind == compiler::StorageSlot::Kind::kConstant) {
      slot.constant = parameters[slot.parameter].storage();
    }
  }
  return g;
}

}  // namespace

struct CompiledFunction::State {
  using Entry = compiler::TraceEntry;
  using Dynamic = compiler::DynamicSize;

  State(compiler::TracedFunction traced, CompileOptions compile_options)
      : fn(std::move(traced)),
        options(std::move(compile_options)),
        dynamics(options.dynamic, options.mode,
                 [this](std::string line) { Event(std::move(line)); }) {}

  compiler::TracedFunction fn;
  CompileOptions options;

  // A module's forward: its parameters and the graphs its type shares.
  std::vector<Tensor> parameters;
  std::shared_ptr<SharedGraphs> shared;

  std::mutex mutex;
  // Per signature, its traces (torch.compile's cache entries): the first
  // whose host guards hold serves a call.
  absl::flat_hash_map<std::string, std::vector<std::shared_ptr<Entry>>> cache;
  static constexpr size_t kEntriesPerSignature = 8;
  std::shared_ptr<Entry> last_entry;  // The latest trace.
  // Why a trace verify dropped must be made again (told by the next).
  std::string retrace_cause;
  compiler::DynamicSizes dynamics;
  std::vector<std::string> events;
  int compiles = 0;
  bool over_limit = false;
  std::atomic<int64_t> replays{0};
  std::atomic<int64_t> eager_calls{0};
  int64_t verified_calls = 0;       // Under the mutex.
  int64_t host_value_retraces = 0;  // Under the mutex (Respecialize).
  absl::flat_hash_set<std::string> warned_signatures;

  // The latest trace's guards, what a recompile's cause is told against.
  const std::vector<Guard>& LastGuards() const {
    static const std::vector<Guard>* none = new std::vector<Guard>();
    return last_entry != nullptr ? last_entry->guards : *none;
  }

  // Whether `e` can serve a call now; else why not, in *why. Pins its
  // constants into *pins when it can.
  static bool Serves(const Entry& e, std::string* why,
                     std::vector<std::shared_ptr<Storage>>* pins) {
    std::string stale = e.Stale();
    std::optional<std::vector<std::shared_ptr<Storage>>> held;
    if (stale.empty() && !(held = e.Pin())) {
      stale = "a tensor it read that is not an input is gone";
    }
    if (!stale.empty()) {
      *why = std::move(stale);
      return false;
    }
    *pins = *std::move(held);
    return true;
  }

  // The first of a signature's traces that can serve a call; traces whose
  // constants are gone are dropped (nothing can make them serve again).
  std::shared_ptr<Entry> Serving(std::vector<std::shared_ptr<Entry>>* traces,
                                 std::string* why,
                                 std::vector<std::shared_ptr<Storage>>* pins) {
    for (auto it = traces->begin(); it != traces->end();) {
      if (Serves(**it, why, pins)) return *it;
      const bool gone = absl::StrContains(*why, "is gone");
      if (gone && last_entry == *it) last_entry = nullptr;
      it = gone ? traces->erase(it) : it + 1;
    }
    return nullptr;
  }

  // A trace's plan run on this call's inputs; in training, its results get
  // the compiled backward as their autograd node, holding `pins` (the memory
  // its graphs read without owning it) until it runs.
  static absl::StatusOr<std::vector<Tensor>> Replay(
      const Entry& entry, const std::vector<Tensor>& inputs,
      std::vector<std::shared_ptr<Storage>> pins) {
    // Every run draws the call's random numbers anew, as eager would.
    MIXRT_ASSIGN_OR_RETURN(const compiler::RandomBase random,
                           compiler::ReserveRandomBlocks(entry.plan->graph()));
    std::vector<compiler::SavedMemory> saved;
    absl::StatusOr<std::vector<Tensor>> ran = entry.plan->Run(
        inputs, {}, entry.backward != nullptr ? &saved : nullptr, &random);
    if (!ran.ok() && compiler::IsHostValueChanged(ran.status())) {
      compiler::ReturnRandomBlocks(entry.plan->graph(), random);
    }
    if (!ran.ok() || entry.backward == nullptr) return ran;
    std::vector<Tensor> results = *std::move(ran);
    auto node = std::make_shared<CompiledBackwardNode>(
        entry.backward, entry.training, std::move(saved), results,
        std::move(pins), random);
    for (const compiler::GradientSink& sink : entry.training.sinks) {
      node->next_edges().push_back(
          sink.input >= 0 ? GradientEdge(inputs[sink.input]) : sink.edge);
    }
    node->set_num_outputs(static_cast<int>(entry.training.grad_outputs.size()));
    for (size_t j = 0; j < entry.training.grad_outputs.size(); ++j) {
      SetHistory(results[entry.training.grad_outputs[j]], node,
                 static_cast<int>(j));
    }
    return results;
  }

  // The recompile limit reached: eager from now on, said once on stderr
  // with the guard that kept failing.
  void StopRecompiling(const std::string& stale,
                       const std::vector<Guard>& guards) {
    over_limit = true;
    const std::string why =
        !stale.empty() ? stale : FirstGuardDifference(LastGuards(), guards);
    std::fprintf(stderr,
                 "mixrt::compile: warning: recompile limit (%d) reached; "
                 "this function runs eagerly from now on. The guard that "
                 "kept failing: %s\n",
                 options.recompile_limit, why.c_str());
    Event(
        absl::StrCat("recompile limit reached (", why, "): eager from now on"));
  }

  void Event(std::string line) {
    if (EnvFlag(kLogEnv))
      std::fprintf(stderr, "mixrt::compile: %s\n", line.c_str());
    events.push_back(std::move(line));
  }

  absl::StatusOr<std::vector<Tensor>> Eager(const std::vector<Tensor>& inputs) {
    ++eager_calls;
    return fn(inputs);
  }

  // An entry running `forward` (and `training`'s backward) as plans.
  absl::StatusOr<std::shared_ptr<Entry>> MakeEntry(
      compiler::Graph forward,
      std::optional<compiler::TrainingGraphs> training) {
    auto e = std::make_shared<Entry>();
    MIXRT_ASSIGN_OR_RETURN(
        compiler::LoweredPlans plans,
        compiler::LowerToPlans(std::move(forward),
                               training ? &training->backward : nullptr,
                               options.mode));
    e->plan = std::move(plans.forward);
    if (training) {
      e->backward = std::move(plans.backward);
      training->backward = compiler::Graph{};
      e->training = *std::move(training);
    }
    e->FindConstants();
    return e;
  }

  // The entry another instance of this module traced for `key`, bound to
  // this instance's parameters; null when there is none.
  absl::StatusOr<std::shared_ptr<Entry>> FromSharedGraphs(
      const std::string& key, const std::vector<Tensor>& inputs) {
    if (shared == nullptr) return std::shared_ptr<Entry>();
    std::lock_guard<std::mutex> lock(shared->mutex);
    auto it = shared->by_signature.find(key);
    if (it == shared->by_signature.end()) return std::shared_ptr<Entry>();
    std::optional<compiler::Graph> forward =
        Rebind(it->second.forward, parameters);
    std::optional<compiler::TrainingGraphs> training;
    if (it->second.backward) {
      std::optional<compiler::Graph> backward =
          Rebind(*it->second.backward, parameters);
      if (!backward) return std::shared_ptr<Entry>();
      training = it->second.training;
      training->backward = *std::move(backward);
      for (compiler::GradientSink& sink : training->sinks) {
        if (sink.parameter >= 0)
          sink.edge = GradientEdge(parameters[sink.parameter]);
      }
    }
    if (!forward) return std::shared_ptr<Entry>();
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e,
                           MakeEntry(*std::move(forward), std::move(training)));
    e->SetSignature(GuardsFor(inputs), inputs);
    Event(
        "reused the graph another instance of this module traced "
        "(regional compilation)");
    return e;
  }

  // Offers a traced entry to the module type's other instances.
  void ShareGraphs(const std::string& key, const Entry& e) {
    if (shared == nullptr || e.plan == nullptr ||
        !ConstantsAreParameters(e.forward_graph(), parameters) ||
        (e.backward != nullptr &&
         !ConstantsAreParameters(e.backward_graph(), parameters))) {
      return;
    }
    for (const compiler::GradientSink& sink : e.training.sinks) {
      if (sink.input < 0 && sink.parameter < 0) return;
    }
    SharedGraphs::Template t;
    t.forward = e.forward_graph();
    if (e.backward != nullptr) t.backward = e.backward_graph();
    t.training = e.training;
    std::lock_guard<std::mutex> lock(shared->mutex);
    shared->by_signature.try_emplace(key, std::move(t));
  }

  // Traces a call (the caller holds the lock and counts the compile).
  absl::StatusOr<std::pair<std::shared_ptr<Entry>, std::vector<Tensor>>> Trace(
      const std::vector<Tensor>& inputs, std::vector<Guard> guards,
      const std::string& cause) {
    absl::StatusOr<compiler::CaptureOutcome> outcome = compiler::CaptureCall(
        fn, inputs, shared != nullptr ? &parameters : nullptr,
        options.fullgraph);
    if (!outcome.ok()) return outcome.status();
    std::shared_ptr<Entry> fresh;
    if (outcome->graph) {
      const compiler::PassCounts counts = compiler::RunPasses(&*outcome);
      const size_t nodes = outcome->graph->nodes.size();
      const std::string backward_note =
          outcome->training
              ? absl::StrCat(" + a backward of ",
                             outcome->training->backward.nodes.size(),
                             " launches")
              : "";
      MIXRT_ASSIGN_OR_RETURN(fresh, MakeEntry(*std::move(outcome->graph),
                                              std::move(outcome->training)));
      Event(absl::StrCat("compiled graph ", compiles, " (", cause, "): ", nodes,
                         " launches", backward_note, counts.Summary()));
    } else {
      if (options.fullgraph) {
        return absl::FailedPreconditionError(absl::StrCat(
            "compile(fullgraph=true): the function cannot be one graph: ",
            outcome->not_captured));
      }
      fresh = std::make_shared<Entry>();
      fresh->eager_reason = outcome->not_captured;
      Event(absl::StrCat("graph break in call ", compiles, " (", cause,
                         "): ", outcome->not_captured,
                         "; this signature runs eagerly"));
    }
    fresh->SetSignature(std::move(guards), inputs);
    fresh->host_guards = std::move(outcome->host_guards);
    return std::make_pair(fresh, std::move(outcome->outputs));
  }

  // A replay of `stale` stopped at a host read (fullgraph) that found
  // another value than its trace: the call is traced again (its eager
  // results returned) and the new trace takes the old one's place.
  // PyTorch makes the value a symbol of one graph; C++ host code that may
  // have used the double cannot be traced symbolically, so mixrt
  // specializes on it instead, without counting a recompile.
  absl::StatusOr<std::vector<Tensor>> Respecialize(
      const std::string& key, const std::shared_ptr<Entry>& stale,
      const std::vector<Tensor>& inputs) {
    std::lock_guard<std::mutex> lock(mutex);
    ++host_value_retraces;
    MIXRT_ASSIGN_OR_RETURN(
        auto traced,
        Trace(inputs, stale->guards,
              "a host read found another value: specialized on the new one"));
    std::vector<std::shared_ptr<Entry>>& traces = cache[key];
    auto it = std::find(traces.begin(), traces.end(), stale);
    if (it != traces.end()) {
      *it = traced.first;
    } else {
      if (traces.size() >= kEntriesPerSignature) traces.erase(traces.begin());
      traces.push_back(traced.first);
    }
    if (last_entry == stale) last_entry = traced.first;
    return std::move(traced.second);
  }

  // MIXRT_COMPILE_VERIFY: trace the call again (its eager results are
  // returned) and compare the graph with `entry`'s.
  absl::StatusOr<std::vector<Tensor>> Verify(
      const std::string& key, const std::shared_ptr<Entry>& entry,
      const std::vector<Tensor>& inputs) {
    std::lock_guard<std::mutex> lock(mutex);
    absl::StatusOr<compiler::CaptureOutcome> again = compiler::CaptureCall(
        fn, inputs, shared != nullptr ? &parameters : nullptr,
        options.fullgraph);
    if (!again.ok()) return again.status();
    std::string difference;
    if (!again->graph) {
      difference = absl::StrCat("the call cannot be captured now: ",
                                again->not_captured);
    } else {
      compiler::RunPasses(&*again);
      difference =
          compiler::FirstDifference(entry->forward_graph(), *again->graph);
      if (difference.empty() &&
          (entry->backward != nullptr) != again->training.has_value()) {
        difference = "whether its results need gradients changed";
      }
      if (difference.empty() && entry->backward != nullptr) {
        difference = compiler::FirstDifference(entry->backward_graph(),
                                               again->training->backward);
        if (!difference.empty()) difference = "in the backward, " + difference;
      }
    }
    ++verified_calls;
    if (!difference.empty()) {
      const std::string line = absl::StrCat(
          "verify: a replay would have differed from this call: ", difference,
          "; this signature traces again");
      if (warned_signatures.insert(key).second) {
        std::fprintf(stderr, "mixrt::compile: warning: %s\n", line.c_str());
      }
      Event(line);
      if (auto it = cache.find(key); it != cache.end()) {
        std::vector<std::shared_ptr<Entry>>& traces = it->second;
        traces.erase(std::remove(traces.begin(), traces.end(), entry),
                     traces.end());
        if (traces.empty()) cache.erase(it);
      }
      if (last_entry == entry) last_entry = nullptr;
      retrace_cause = absl::StrCat("verify: ", difference);
    }
    return std::move(again->outputs);
  }
};

absl::StatusOr<CompiledFunction> compile(compiler::TracedFunction fn,
                                         CompileOptions options) {
  if (!fn) return absl::InvalidArgumentError("compile: no function given");
  const std::vector<std::string> modes = {"default", "reduce-overhead",
                                          "max-autotune",
                                          "max-autotune-no-cudagraphs"};
  if (std::find(modes.begin(), modes.end(), options.mode) == modes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile: unknown mode \"", options.mode,
                     "\"; expected one of ", absl::StrJoin(modes, ", ")));
  }
  if (options.backend != "mixrt" && options.backend != "eager") {
    return absl::InvalidArgumentError(
        absl::StrCat("compile: unknown backend \"", options.backend,
                     "\"; expected mixrt or eager"));
  }
  if (options.recompile_limit < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile: recompile_limit must be at least 1, got ",
                     options.recompile_limit));
  }
  CompiledFunction f;
  f.state_ = std::make_shared<CompiledFunction::State>(std::move(fn),
                                                       std::move(options));
  return f;
}

absl::StatusOr<std::string> compile_explain(compiler::TracedFunction fn,
                                            const std::vector<Tensor>& inputs,
                                            CompileOptions options) {
  MIXRT_ASSIGN_OR_RETURN(CompiledFunction f,
                         compile(std::move(fn), std::move(options)));
  MIXRT_RETURN_IF_ERROR(f(inputs).status());
  return f.Explain();
}

absl::StatusOr<CompiledFunction> CompileModuleForward(
    compiler::TracedFunction fn, CompileOptions options,
    std::vector<Tensor> parameters, std::string module_key) {
  MIXRT_ASSIGN_OR_RETURN(CompiledFunction f, compile(std::move(fn), options));
  f.state_->parameters = std::move(parameters);
  if (!options.share_across_instances) return f;
  f.state_->shared = SharedGraphsFor(absl::StrCat(
      module_key, "|", options.mode, "|",
      options.dynamic ? (*options.dynamic ? "dyn" : "static") : "auto"));
  return f;
}

absl::StatusOr<std::vector<Tensor>> CompiledFunction::operator()(
    const std::vector<Tensor>& inputs) const {
  State& s = *state_;
  if (s.options.disable || s.options.backend == "eager" ||
      EnvFlag(kDisableEnv)) {
    return s.Eager(inputs);
  }
  const std::string key = SignatureKey(inputs, nullptr);
  std::shared_ptr<State::Entry> entry;
  // The replay's hold on the memory its graphs read.
  std::vector<std::shared_ptr<Storage>> pins;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    int64_t n = 0;
    State::Dynamic* dyn = nullptr;
    // Why the traces this call matched cannot serve it ("": none matched).
    std::string stale;
    if (auto it = s.cache.find(key); it != s.cache.end()) {
      entry = s.Serving(&it->second, &stale, &pins);
    } else {
      // A size the traces have not seen: when it is a dynamic size's, it
      // is traced (this call runs eagerly) and checked against the
      // formulas below, without counting as a recompile.
      dyn = s.dynamics.Match(inputs, &n);
    }
    // A verified size's new size is checked; a candidate's third size
    // verifies its formulas; with dynamic=true a call whose sizes alone
    // changed is learning them. None counts as a recompile (PyTorch's
    // automatic dynamic recompiles once; dynamic=true, never for sizes):
    // the traces are how mixrt proves the graphs, not new programs.
    const bool size_check = dyn != nullptr && dyn->verified;
    const bool verifying = dyn != nullptr && !dyn->verified && !dyn->failed;
    // Named guards (strings) only for a call that may trace: a replay's
    // key already matched.
    const std::vector<Guard> now_guards =
        entry == nullptr ? GuardsFor(inputs) : std::vector<Guard>();
    const bool learning = entry == nullptr && dyn == nullptr &&
                          s.options.dynamic.value_or(false) &&
                          s.last_entry != nullptr && stale.empty() &&
                          !s.dynamics.AnyFailed() &&
                          compiler::DynamicSizes::SizeOnlyChange(
                              inputs, now_guards, *s.last_entry);
    const bool counted = !size_check && !verifying && !learning;
    if (entry == nullptr && dyn == nullptr && stale.empty()) {
      MIXRT_ASSIGN_OR_RETURN(entry, s.FromSharedGraphs(key, inputs));
      if (entry != nullptr && s.Serves(*entry, &stale, &pins)) {
        s.cache[key].push_back(entry);
      } else {
        entry = nullptr;
      }
    }
    if (entry != nullptr) {
      // Replayed below, without the lock.
    } else if (s.over_limit) {
      lock.unlock();
      return s.Eager(inputs);
    } else if (std::vector<Guard> guards = now_guards;
               counted && s.compiles >= s.options.recompile_limit) {
      if (s.options.fullgraph) {
        // As PyTorch's FailOnRecompileLimitHit: fullgraph promises one
        // compiled graph per call, never a quiet eager run. Each such call
        // fails; the signatures compiled so far still replay.
        return absl::ResourceExhaustedError(absl::StrCat(
            "compile: recompile limit (", s.options.recompile_limit,
            ") reached with fullgraph=true; the guard that failed: ",
            !stale.empty() ? stale
                           : FirstGuardDifference(s.LastGuards(), guards),
            " (raise recompile_limit, or mark the changing size dynamic)"));
      }
      s.StopRecompiling(stale, guards);
      lock.unlock();
      return s.Eager(inputs);
    } else {
      // Trace under the lock: concurrent first calls of one signature
      // compile once.
      const std::string cause =
          s.compiles == 0 ? "first call"
          : verifying
              ? absl::StrCat("verifying ",
                             compiler::DynamicSizes::DimsName(dyn->dims),
                             " at ", n)
          : learning       ? "sizes changed under dynamic=true (learning them)"
          : !stale.empty() ? stale
          : !s.retrace_cause.empty()
              ? s.retrace_cause
              : FirstGuardDifference(s.LastGuards(), guards);
      s.retrace_cause.clear();
      if (counted) ++s.compiles;
      MIXRT_ASSIGN_OR_RETURN(
          auto traced,
          s.Trace(inputs, std::move(guards),
                  size_check ? absl::StrCat(
                                   "checking ",
                                   compiler::DynamicSizes::DimsName(dyn->dims),
                                   " at ", n)
                             : cause));
      // Not a structured binding: lambdas below use it (C++17 cannot
      // capture those; clang refuses).
      std::shared_ptr<State::Entry>& fresh = traced.first;
      std::vector<Tensor>& outputs = traced.second;
      if (size_check) {
        s.dynamics.CheckSize(dyn, n, *fresh);
      } else if (dyn != nullptr && !dyn->verified && !dyn->failed) {
        s.dynamics.VerifyFormulas(dyn, n, *fresh, inputs);
      } else {
        if (s.last_entry != nullptr)
          s.dynamics.Learn(inputs, *s.last_entry, *fresh);
        if (dyn == nullptr) s.dynamics.Load(inputs, *fresh);
      }
      std::vector<std::shared_ptr<State::Entry>>& traces = s.cache[key];
      if (traces.size() >= State::kEntriesPerSignature)
        traces.erase(traces.begin());
      traces.push_back(fresh);
      s.ShareGraphs(key, *fresh);
      s.last_entry = fresh;
      return std::move(outputs);
    }
  }
  if (entry->plan == nullptr) return s.Eager(inputs);
  if (s.options.verify || EnvFlag(kVerifyEnv))
    return s.Verify(key, entry, inputs);
  absl::StatusOr<std::vector<Tensor>> replayed =
      State::Replay(*entry, inputs, std::move(pins));
  if (replayed.ok() || !compiler::IsHostValueChanged(replayed.status())) {
    ++s.replays;
    return replayed;
  }
  return s.Respecialize(key, entry, inputs);
}

std::string CompiledFunction::Explain() const {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::string out =
      absl::StrCat("mode ", s.options.mode, ", backend ", s.options.backend,
                   "; ", s.compiles, " traces, ", s.replays.load(),
                   " replays, ", s.eager_calls.load(), " eager calls",
                   s.verified_calls > 0
                       ? absl::StrCat(", ", s.verified_calls, " verified calls")
                       : "",
                   s.host_value_retraces > 0
                       ? absl::StrCat(", ", s.host_value_retraces,
                                      " traces for new host read values")
                       : "",
                   "\n");
  for (const std::string& e : s.events) absl::StrAppend(&out, "  ", e, "\n");
  for (const compiler::DynamicSize& d : s.dynamics.sizes()) {
    absl::StrAppend(&out, "dynamic size (",
                    compiler::DynamicSizes::DimsName(d.dims), "): ",
                    d.verified ? "verified"
                    : d.failed ? "not generalizable"
                               : "candidate",
                    ", learned from sizes ", d.n1, " and ", d.n2, ", ",
                    d.checked, " more sizes checked against them\n");
  }
  int n = 0;
  for (const auto& [key, traces] : s.cache) {
    for (const std::shared_ptr<State::Entry>& entry : traces) {
      absl::StrAppend(&out, "signature ", ++n, ":\n  guards:\n");
      for (const Guard& g : entry->guards) {
        absl::StrAppend(&out, "    ", g.name, " = ", g.value, "\n");
      }
      for (const HostGuard& g : entry->host_guards) {
        absl::StrAppend(&out, "    ", g.what, "\n");
      }
      if (entry->plan != nullptr) {
        absl::StrAppend(&out, "  graph (", entry->plan->graph().nodes.size(),
                        " launches, ", entry->plan->held_bytes(),
                        " bytes held between calls", KeptText(*entry->plan),
                        "; ", entry->plan->execution(),
                        "; fusion: ", entry->plan->fusion(), "):\n",
                        entry->plan->executed_graph().ToString());
        if (entry->backward != nullptr) {
          absl::StrAppend(&out, "  backward (",
                          entry->backward->graph().nodes.size(), " launches; ",
                          entry->backward->execution(),
                          "; fusion: ", entry->backward->fusion(), "):\n",
                          entry->backward->executed_graph().ToString());
        }
      } else {
        absl::StrAppend(&out, "  eager: ", entry->eager_reason, "\n");
      }
    }
  }
  return out;
}

int CompiledFunction::compiles() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->compiles;
}
int64_t CompiledFunction::replays() const { return state_->replays.load(); }
int64_t CompiledFunction::eager_calls() const {
  return state_->eager_calls.load();
}

}  // namespace mixrt
