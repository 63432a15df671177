#include "core/compiler/compile.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/amp/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/autograd/node.h"
#include "core/compiler/passes.h"
#include "core/compiler/plan.h"
#include "core/tensor/factories.h"
#include "mixrt/status_macros.h"
#include "core/tensor/shape.h"

namespace mixrt {
namespace {

constexpr char kDisableEnv[] = "MIXRT_COMPILE_DISABLE";
constexpr char kLogEnv[] = "MIXRT_COMPILE_LOG";

bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return false;
  const std::string s = absl::AsciiStrToLower(v);
  return s == "1" || s == "true" || s == "yes" || s == "on";
}

// One assumption of a trace, named for the explain log.
struct Guard {
  std::string name;
  std::string value;
};

std::vector<Guard> GuardsFor(const std::vector<Tensor>& inputs) {
  std::vector<Guard> g;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const std::string in = absl::StrCat("input ", i, " ");
    if (!t.defined()) {
      g.push_back({in + "defined", "no"});
      continue;
    }
    g.push_back({in + "dtype", std::string(DTypeName(t.dtype()))});
    g.push_back({in + "device", t.device().ToString()});
    g.push_back({in + "shape", ShapeToString(t.shape())});
    g.push_back({in + "strides", ShapeToString(t.strides())});
    g.push_back({in + "requires_grad", t.requires_grad() ? "yes" : "no"});
    // Inputs viewing one storage were one memory slot in the trace.
    int alias = -1;
    for (size_t j = 0; j < i; ++j) {
      if (inputs[j].defined() && inputs[j].shares_storage_with(t)) {
        alias = static_cast<int>(j);
        break;
      }
    }
    g.push_back({in + "shares memory with input", absl::StrCat(alias)});
  }
  g.push_back({"grad mode", GradModeEnabled() ? "on" : "off"});
  g.push_back({"inference mode", InferenceModeEnabled() ? "on" : "off"});
  g.push_back({"autocast state", AutocastStateKey()});
  g.push_back({"MIXRT_DISABLE_AMP", AmpGloballyDisabled() ? "on" : "off"});
  return g;
}

// The guards' values packed as bytes: what every call computes to find
// its signature (the named, formatted guards are built only on a trace).
void Append(std::string* key, int64_t v) {
  key->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

std::string KeyFor(const std::vector<Tensor>& inputs) {
  std::string key;
  key.reserve(64 + inputs.size() * 128);
  Append(&key, static_cast<int64_t>(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      Append(&key, -1);
      continue;
    }
    Append(&key, static_cast<int64_t>(t.dtype()));
    Append(&key, reinterpret_cast<intptr_t>(t.device().backend()));
    Append(&key, t.device().index());
    Append(&key, t.ndim());
    for (int64_t s : t.shape()) Append(&key, s);
    for (int64_t s : t.strides()) Append(&key, s);
    Append(&key, t.requires_grad());
    int64_t alias = -1;
    for (size_t j = 0; j < i; ++j) {
      if (inputs[j].defined() && inputs[j].shares_storage_with(t)) {
        alias = static_cast<int64_t>(j);
        break;
      }
    }
    Append(&key, alias);
  }
  Append(&key, GradModeEnabled() * 2 + InferenceModeEnabled());
  Append(&key, AmpGloballyDisabled());
  key += AutocastStateKey();
  return key;
}

// The first guard of `now` that differs from `before`, for the log.
std::string Difference(const std::vector<Guard>& before,
                       const std::vector<Guard>& now) {
  for (size_t i = 0; i < now.size(); ++i) {
    if (i >= before.size() || before[i].name != now[i].name) {
      return absl::StrCat(now[i].name, " (not in the previous signature)");
    }
    if (before[i].value != now[i].value) {
      return absl::StrCat(now[i].name, " changed from ", before[i].value,
                          " to ", now[i].value);
    }
  }
  return "the number of inputs changed";
}

// The autograd node of a replayed training call: runs the compiled
// backward on the gradients of the call's results and the activations its
// forward saved, and hands each gradient to its sink's edge.
class CompiledBackwardNode : public Node {
 public:
  CompiledBackwardNode(std::shared_ptr<compiler::Plan> plan,
                       const compiler::TrainingGraphs& training,
                       std::vector<compiler::SavedMemory> saved,
                       std::vector<Tensor> results)
      : Node("CompiledFunctionBackward"),
        plan_(std::move(plan)),
        sink_result_(training.sink_result),
        saved_(std::move(saved)) {
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
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> results,
                           plan_->Run(grads, saved_));
    std::vector<Tensor> out;
    for (int r : sink_result_) {
      out.push_back(r >= 0 ? results[r] : Tensor());
    }
    return out;
  }

  void ReleaseSaved() override { saved_.clear(); }

 private:
  std::shared_ptr<compiler::Plan> plan_;
  std::vector<int> sink_result_;
  std::vector<compiler::SavedMemory> saved_;
  std::vector<DType> result_dtypes_;
  std::vector<Shape> result_shapes_;
};

}  // namespace

struct CompiledFunction::State {
  compiler::TracedFunction fn;
  CompileOptions options;

  struct Entry {
    std::vector<Guard> guards;
    std::shared_ptr<compiler::Plan> plan;  // Null: runs eagerly.
    std::string eager_reason;
    // Training signatures: the compiled backward and where its gradients go.
    std::shared_ptr<compiler::Plan> backward;
    compiler::TrainingGraphs training;  // Its `backward` graph moved out.
  };

  std::mutex mutex;
  absl::flat_hash_map<std::string, std::shared_ptr<Entry>> cache;
  std::vector<Guard> last_guards;
  std::vector<std::string> events;
  int compiles = 0;
  bool over_limit = false;
  std::atomic<int64_t> replays{0};
  std::atomic<int64_t> eager_calls{0};

  void Event(std::string line) {
    if (EnvFlag(kLogEnv)) std::fprintf(stderr, "mixrt::compile: %s\n", line.c_str());
    events.push_back(std::move(line));
  }

  absl::StatusOr<std::vector<Tensor>> Eager(const std::vector<Tensor>& inputs) {
    ++eager_calls;
    return fn(inputs);
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
    return absl::InvalidArgumentError(absl::StrCat(
        "compile: recompile_limit must be at least 1, got ",
        options.recompile_limit));
  }
  CompiledFunction f;
  f.state_ = std::make_shared<CompiledFunction::State>();
  f.state_->fn = std::move(fn);
  f.state_->options = std::move(options);
  return f;
}

absl::StatusOr<std::vector<Tensor>> CompiledFunction::operator()(
    const std::vector<Tensor>& inputs) const {
  State& s = *state_;
  if (s.options.disable || s.options.backend == "eager" ||
      EnvFlag(kDisableEnv)) {
    return s.Eager(inputs);
  }
  const std::string key = KeyFor(inputs);
  std::shared_ptr<State::Entry> entry;
  {
    std::unique_lock<std::mutex> lock(s.mutex);
    if (auto it = s.cache.find(key); it != s.cache.end()) {
      entry = it->second;
    } else if (s.over_limit) {
      lock.unlock();
      return s.Eager(inputs);
    } else if (std::vector<Guard> guards = GuardsFor(inputs);
               s.compiles >= s.options.recompile_limit) {
      s.over_limit = true;
      const std::string why = Difference(s.last_guards, guards);
      std::fprintf(stderr,
                   "mixrt::compile: warning: recompile limit (%d) reached; "
                   "this function runs eagerly from now on. The guard that "
                   "kept failing: %s\n",
                   s.options.recompile_limit, why.c_str());
      s.Event(absl::StrCat("recompile limit reached (", why,
                           "): eager from now on"));
      lock.unlock();
      return s.Eager(inputs);
    } else {
      // Trace under the lock: concurrent first calls of one signature
      // compile once.
      const std::string cause =
          s.compiles == 0 ? "first call" : Difference(s.last_guards, guards);
      ++s.compiles;
      absl::StatusOr<compiler::CaptureOutcome> outcome =
          compiler::CaptureCall(s.fn, inputs);
      if (!outcome.ok()) return outcome.status();
      auto fresh = std::make_shared<State::Entry>();
      fresh->guards = guards;
      if (outcome->graph) {
        const int dead = compiler::EliminateDeadLaunches(&*outcome->graph);
        const size_t nodes = outcome->graph->nodes.size();
        const bool hold = s.options.mode == "reduce-overhead";
        absl::StatusOr<std::unique_ptr<compiler::Plan>> plan =
            compiler::Plan::Build(*std::move(outcome->graph), hold);
        if (!plan.ok()) return plan.status();
        fresh->plan = *std::move(plan);
        std::string backward_note;
        if (outcome->training) {
          compiler::TrainingGraphs& t = *outcome->training;
          compiler::EliminateDeadLaunches(&t.backward);
          backward_note = absl::StrCat(" + a backward of ",
                                       t.backward.nodes.size(), " launches");
          absl::StatusOr<std::unique_ptr<compiler::Plan>> backward =
              compiler::Plan::Build(std::move(t.backward), hold);
          if (!backward.ok()) return backward.status();
          fresh->backward = *std::move(backward);
          t.backward = compiler::Graph{};
          fresh->training = std::move(t);
        }
        s.Event(absl::StrCat("compiled graph ", s.compiles, " (", cause,
                             "): ", nodes, " launches", backward_note,
                             dead > 0 ? absl::StrCat(" (", dead,
                                                     " unused launches dropped)")
                                      : ""));
      } else {
        if (s.options.fullgraph) {
          return absl::FailedPreconditionError(absl::StrCat(
              "compile(fullgraph=true): the function cannot be one graph: ",
              outcome->not_captured));
        }
        fresh->eager_reason = outcome->not_captured;
        s.Event(absl::StrCat("graph break in call ", s.compiles, " (", cause,
                             "): ", outcome->not_captured,
                             "; this signature runs eagerly"));
      }
      s.cache[key] = fresh;
      s.last_guards = std::move(guards);
      return std::move(outcome->outputs);
    }
  }
  if (entry->plan == nullptr) return s.Eager(inputs);
  ++s.replays;
  if (entry->backward == nullptr) return entry->plan->Run(inputs);
  std::vector<compiler::SavedMemory> saved;
  MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> results,
                         entry->plan->Run(inputs, {}, &saved));
  auto node = std::make_shared<CompiledBackwardNode>(
      entry->backward, entry->training, std::move(saved), results);
  for (const compiler::GradientSink& sink : entry->training.sinks) {
    node->next_edges().push_back(
        sink.input >= 0 ? GradientEdge(inputs[sink.input]) : sink.edge);
  }
  node->set_num_outputs(static_cast<int>(entry->training.grad_outputs.size()));
  for (size_t j = 0; j < entry->training.grad_outputs.size(); ++j) {
    SetHistory(results[entry->training.grad_outputs[j]], node,
               static_cast<int>(j));
  }
  return results;
}

std::string CompiledFunction::Explain() const {
  State& s = *state_;
  std::lock_guard<std::mutex> lock(s.mutex);
  std::string out = absl::StrCat("mode ", s.options.mode, ", backend ",
                                 s.options.backend, "; ", s.compiles,
                                 " traces, ", s.replays.load(), " replays, ",
                                 s.eager_calls.load(), " eager calls\n");
  for (const std::string& e : s.events) absl::StrAppend(&out, "  ", e, "\n");
  int n = 0;
  for (const auto& [key, entry] : s.cache) {
    absl::StrAppend(&out, "signature ", ++n, ":\n  guards:\n");
    for (const Guard& g : entry->guards) {
      absl::StrAppend(&out, "    ", g.name, " = ", g.value, "\n");
    }
    if (entry->plan != nullptr) {
      absl::StrAppend(&out, "  graph (", entry->plan->graph().nodes.size(),
                      " launches, ", entry->plan->held_bytes(),
                      " bytes held between calls):\n",
                      entry->plan->graph().ToString());
    } else {
      absl::StrAppend(&out, "  eager: ", entry->eager_reason, "\n");
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
