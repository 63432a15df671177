#include "core/compiler/dynamic_sizes.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/dynamic_artifact.h"
#include "core/plugin/backend.h"

namespace mixrt::compiler {
namespace {

bool SameTraining(const TrainingGraphs& a, const TrainingGraphs& b) {
  if (a.grad_outputs != b.grad_outputs || a.sink_result != b.sink_result ||
      a.sinks.size() != b.sinks.size()) {
    return false;
  }
  for (size_t i = 0; i < a.sinks.size(); ++i) {
    if (a.sinks[i].input != b.sinks[i].input ||
        a.sinks[i].edge.node != b.sinks[i].edge.node ||
        a.sinks[i].edge.input_nr != b.sinks[i].edge.input_nr) {
      return false;
    }
  }
  return true;
}

}  // namespace

DynamicSizes::DynamicSizes(std::optional<bool> enabled, std::string mode,
                           std::function<void(std::string)> event)
    : enabled_(enabled), mode_(std::move(mode)), event_(std::move(event)) {}

// The third size of a dynamic candidate checks the formulas learned
// from the first two: the graphs instantiated at n must be the fresh
// trace's.
void DynamicSizes::VerifyFormulas(DynamicSize* dyn, int64_t n,
                                  const TraceEntry& fresh,
                                  const std::vector<Tensor>& inputs) {
  const bool forward_ok = fresh.plan != nullptr && [&] {
    auto g = Instantiate(*dyn->forward, n);
    return g && SameGraph(*g, fresh.forward_graph());
  }();
  const bool backward_ok = !dyn->backward || (fresh.backward != nullptr && [&] {
    auto g = Instantiate(*dyn->backward, n);
    return g && SameGraph(*g, fresh.backward_graph());
  }());
  dyn->verified = forward_ok && backward_ok;
  dyn->failed = !dyn->verified;
  if (dyn->verified) Store(*dyn, fresh, inputs);
  event_(absl::StrCat(
      DimsName(dyn->dims), " at ", n,
      dyn->verified ? ": matches the formulas from sizes "
                    : ": does not match the formulas from sizes ",
      dyn->n1, " and ", dyn->n2,
      dyn->verified
          ? "; dynamic from now on (a new size is traced once and "
            "checked against the formulas, not counted as a recompile)"
          : "; sizes stay static"));
}

// After a recompile: when `now` differs from `before` only in sizes that
// all changed from one value to another, those dims may be one dynamic
// size; their two graphs are generalized (verified on a third size).
void DynamicSizes::Learn(const std::vector<Tensor>& inputs,
                         const TraceEntry& before, const TraceEntry& now) {
  if (enabled_.has_value() && !*enabled_) return;
  if (before.plan == nullptr || now.plan == nullptr ||
      before.input_shapes.size() != now.input_shapes.size() ||
      (before.backward == nullptr) != (now.backward == nullptr)) {
    return;
  }
  std::vector<std::pair<int, int>> dims;
  int64_t n1 = -1, n2 = -1;
  for (size_t i = 0; i < now.input_shapes.size(); ++i) {
    const Shape& a = before.input_shapes[i];
    const Shape& b = now.input_shapes[i];
    if (a.size() != b.size()) return;
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d] == b[d]) continue;
      if ((n1 >= 0 && (a[d] != n1 || b[d] != n2))) return;
      n1 = a[d];
      n2 = b[d];
      dims.emplace_back(static_cast<int>(i), static_cast<int>(d));
    }
  }
  if (dims.empty()) return;
  // Two traces under other module modes or GuardedValues are two
  // programs, not one program at two sizes.
  if (!HostGuardsHold(before.host_guards)) return;
  const std::string masked = SignatureKey(inputs, &dims);
  for (const DynamicSize& d : sizes_) {
    // Already learning or learned (under the host values of now).
    if (d.masked_key == masked && HostGuardsHold(d.host_guards)) return;
  }
  DynamicSize dyn;
  dyn.dims = dims;
  dyn.masked_key = masked;
  dyn.n1 = n1;
  dyn.n2 = n2;
  dyn.forward = Generalize(before.forward_graph(), n1, now.forward_graph(), n2);
  if (now.backward != nullptr) {
    dyn.backward =
        Generalize(before.backward_graph(), n1, now.backward_graph(), n2);
  }
  dyn.failed = !dyn.forward || (now.backward != nullptr && !dyn.backward) ||
               !SameTraining(before.training, now.training);
  dyn.guards = now.guards;
  dyn.host_guards = now.host_guards;
  dyn.training = now.training;
  event_(absl::StrCat(
      "size ", n1, " -> ", n2, " of ", DimsName(dims),
      dyn.failed ? ": the graphs do not generalize; sizes stay static"
                 : ": a dynamic size candidate (checked on the next size)"));
  sizes_.push_back(std::move(dyn));
}

bool DynamicSizes::SizeOnlyChange(const std::vector<Tensor>& inputs,
                                  const std::vector<Guard>& now,
                                  const TraceEntry& last) {
  if (now.size() != last.guards.size() ||
      inputs.size() != last.input_shapes.size()) {
    return false;
  }
  // Row-major strides of `shape`, as the guards print them.
  auto dense = [](const Shape& shape) {
    Shape strides(shape.size());
    int64_t step = 1;
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = step;
      step *= shape[d];
    }
    return ShapeToString(strides);
  };
  for (size_t k = 0; k < now.size(); ++k) {
    if (now[k].name != last.guards[k].name) return false;
    if (now[k].value == last.guards[k].value) continue;
    if (absl::EndsWith(now[k].name, " shape")) continue;
    if (!absl::EndsWith(now[k].name, " strides")) return false;
    // Strides may differ only as sizes make them: both dense.
    int i = -1;
    if (!absl::SimpleAtoi(now[k].name.substr(6, now[k].name.find(' ', 6) - 6),
                          &i) ||
        i < 0 || static_cast<size_t>(i) >= inputs.size() ||
        !inputs[i].defined() || now[k].value != dense(inputs[i].shape()) ||
        last.guards[k].value != dense(last.input_shapes[i])) {
      return false;
    }
  }
  int64_t n1 = -1, n2 = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const Shape& a = last.input_shapes[i];
    const Shape& b = inputs[i].shape();
    if (a.size() != b.size()) return false;
    for (size_t d = 0; d < a.size(); ++d) {
      if (a[d] == b[d]) continue;
      if (n1 >= 0 && (a[d] != n1 || b[d] != n2)) return false;
      n1 = a[d];
      n2 = b[d];
    }
  }
  return n1 >= 0;
}

bool DynamicSizes::AnyFailed() const {
  for (const DynamicSize& d : sizes_) {
    if (d.failed) return true;
  }
  return false;
}

std::string DynamicSizes::DimsName(
    const std::vector<std::pair<int, int>>& dims) {
  std::vector<std::string> names;
  for (const auto& [i, d] : dims)
    names.push_back(absl::StrCat("input ", i, " dim ", d));
  return absl::StrJoin(names, ", ");
}

// The dynamic record matching `inputs`, and their N; null when none.
DynamicSize* DynamicSizes::Match(const std::vector<Tensor>& inputs,
                                 int64_t* n) {
  for (DynamicSize& d : sizes_) {
    if (d.failed) continue;
    int64_t value = -1;
    bool one = true;
    for (const auto& [i, dim] : d.dims) {
      if (i >= static_cast<int>(inputs.size()) || !inputs[i].defined() ||
          dim >= inputs[i].ndim()) {
        one = false;
        break;
      }
      const int64_t v = inputs[i].shape()[dim];
      if (value >= 0 && v != value) one = false;
      value = v;
    }
    if (!one || value < 1) continue;
    if (SignatureKey(inputs, &d.dims) != d.masked_key) continue;
    // Learned under other module modes or GuardedValues than now.
    if (!HostGuardsHold(d.host_guards)) continue;
    *n = value;
    return &d;
  }
  return nullptr;
}

// A verified dynamic size's formulas against the trace of a size they
// have not seen. Formulas fitted to traces are not a proof: host code
// may branch on a size (a min, a comparison) that the traces so far
// never crossed, so a new size is never extrapolated. When the trace
// matches, the size joins the checked ones; when not, the formulas are
// dropped and sizes are static from then on.
void DynamicSizes::CheckSize(DynamicSize* d, int64_t n,
                             const TraceEntry& traced) {
  auto matches = [n](const std::optional<SymbolicGraph>& sym, const Graph& g) {
    if (!sym) return false;
    std::optional<Graph> instance = Instantiate(*sym, n);
    return instance && SameGraph(*instance, g);
  };
  const bool same =
      traced.plan != nullptr && matches(d->forward, traced.forward_graph()) &&
      (!d->backward || (traced.backward != nullptr &&
                        matches(d->backward, traced.backward_graph())));
  if (same) {
    ++d->checked;
    return;
  }
  d->verified = false;
  d->failed = true;
  event_(absl::StrCat(
      DimsName(d->dims), " at ", n,
      ": the trace differs from the formulas learned from sizes ", d->n1,
      " and ", d->n2,
      " (the function's host code depends on the size beyond them); "
      "sizes stay static"));
}

// The compile cache's key for what a trace like `e` teaches: its graphs'
// structure and where they run (the cache adds its format and the ISA).
std::string DynamicSizes::ArtifactKey(const TraceEntry& e) const {
  std::string key = CacheKeyPrefix();
  absl::StrAppend(&key, "mode ", mode_, "\n");
  const Device& device = e.forward_graph().device;
  if (device.valid()) {
    key += BackendCacheKey(device.backend()->identity());
  }
  key += StructureKey(e.forward_graph());
  if (e.backward != nullptr) {
    absl::StrAppend(&key, "backward\n", StructureKey(e.backward_graph()),
                    "gradients ", absl::StrJoin(e.training.grad_outputs, ","),
                    " -> ", absl::StrJoin(e.training.sink_result, ","), "\n");
    for (const GradientSink& sink : e.training.sinks) {
      absl::StrAppend(&key, "sink ", sink.input, " ", sink.parameter, "\n");
    }
  }
  return key;
}

// A verified dynamic size goes to the compile cache, for other processes
// (`inputs`: a call of it).
void DynamicSizes::Store(const DynamicSize& d, const TraceEntry& e,
                         const std::vector<Tensor>& inputs) {
  DynamicArtifact a;
  a.dims = d.dims;
  a.n1 = d.n1;
  a.n2 = d.n2;
  a.masked_key = SignatureKey(inputs, &d.dims, /*stable=*/true);
  a.forward = d.forward->ints;
  if (d.backward) a.backward = d.backward->ints;
  ArtifactCache::Global().Store(ArtifactKey(e), EncodeDynamic(a));
}

// After a trace no dynamic size covered: a dynamic size another process
// learned for this graph, if the cache has one whose formulas reproduce
// this trace exactly. Then later sizes are checked by their traces
// without counting as recompiles.
void DynamicSizes::Load(const std::vector<Tensor>& inputs,
                        const TraceEntry& e) {
  if ((enabled_.has_value() && !*enabled_) || e.plan == nullptr) {
    return;
  }
  ArtifactCache& cache = ArtifactCache::Global();
  const std::string key = ArtifactKey(e);
  std::string why;
  const std::optional<std::string> payload = cache.Load(key, &why);
  if (!payload.has_value()) {
    if (!why.empty()) {
      event_(absl::StrCat("compile cache entry ignored (", why,
                          "); it is written again when learned"));
    }
    return;
  }
  std::optional<DynamicArtifact> a = DecodeDynamic(*payload);
  std::string mismatch;
  DynamicSize d;
  int64_t n = -1;
  if (!a.has_value()) {
    mismatch = "its payload is damaged";
  } else {
    d.dims = a->dims;
    for (const auto& [i, dim] : d.dims) {
      if (i >= static_cast<int>(inputs.size()) || !inputs[i].defined() ||
          dim >= inputs[i].ndim() || (n >= 0 && inputs[i].shape()[dim] != n)) {
        mismatch = "its dims do not fit these inputs";
        break;
      }
      n = inputs[i].shape()[dim];
    }
  }
  if (mismatch.empty() &&
      SignatureKey(inputs, &d.dims, true) != a->masked_key) {
    mismatch = "the input signature differs";
  }
  if (mismatch.empty()) {
    d.forward = SymbolicGraph{e.forward_graph(), a->forward};
    if (e.backward != nullptr && a->backward.has_value()) {
      d.backward = SymbolicGraph{e.backward_graph(), *a->backward};
    }
    auto reproduces = [n](const std::optional<SymbolicGraph>& sym,
                          const Graph& traced) {
      if (!sym) return false;
      std::optional<Graph> g = Instantiate(*sym, n);
      return g && SameGraph(*g, traced);
    };
    if (!reproduces(d.forward, e.forward_graph()) ||
        (e.backward != nullptr &&
         !reproduces(d.backward, e.backward_graph()))) {
      mismatch = "its formulas do not reproduce this trace";
    }
  }
  if (!mismatch.empty()) {
    event_(absl::StrCat("compile cache entry ignored (", mismatch, ")"));
    return;
  }
  d.masked_key = SignatureKey(inputs, &d.dims);
  for (const DynamicSize& known : sizes_) {
    if (known.masked_key == d.masked_key) return;
  }
  d.n1 = a->n1;
  d.n2 = a->n2;
  d.guards = e.guards;
  d.host_guards = e.host_guards;
  d.training = e.training;
  d.verified = true;
  event_(absl::StrCat(
      "dynamic size (", DimsName(d.dims), ") loaded from the compile cache",
      cache.directory().empty() ? ""
                                : absl::StrCat(" (", cache.PathFor(key), ")"),
      ": new sizes are traced once and checked against it"));
  sizes_.push_back(std::move(d));
}

}  // namespace mixrt::compiler
