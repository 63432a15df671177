// Differential fuzzer of the compiler: the bytes are a small program (a
// chain of layers over [N, F] activations) and a sequence of calls with
// what changes between them, and every call is run three ways on the same
// state:
//   - compiled (mixrt::compile, one mode per program) on the fuzzed device,
//   - eagerly on the same device: results and gradients must agree within
//     the autocast dtype's tolerance (the compiler's promise),
//   - eagerly on the reference plugin, the numerical oracle, with the same
//     parameters: the device's eager results must agree too.
// The fuzzed device is the CPU plugin or a partial plugin that leaves ops
// to a fallback backend (tests/fixtures/partial_*). Between calls the
// fuzzer changes the batch size (sizes that drive host logic: a narrow to
// min(N, k)), the autocast state, grad mode, modules' train/eval mode, a
// GuardedValue, a closure tensor (rebound, written in place, written
// through data_ptr()), a parameter's requires_grad; a checkpointed region
// and dropout come with some programs. Each program also mixes which
// tensors need gradients: the input (which a residual layer reads again,
// so its gradient arrives from two places), and each parameter of its
// linear layers and affine layer norms, one bit each (a frozen LayerNorm
// bias beside a residual once crashed the first replayed backward). A
// disagreement prints the program and the call and aborts: a silent wrong
// result found.
//
// Plugins: MIXRT_FUZZ_PLUGINS, colon-separated .so paths (the replay test's
// --plugins=; scripts/fuzz.sh sets it), which must include the reference
// plugin.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/compiler/compile.h"
#include "core/functional/checkpoint.h"
#include "core/functional/ops.h"
#include "core/kernels/fill_copy.h"
#include "core/nn/module.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/generator.h"
#include "core/tensor/guarded_value.h"
#include "fuzz/fuzz_input.h"
#include "mixrt/status_macros.h"

namespace mixrt::fuzz {
namespace {

// ---- The devices ----

struct Devices {
  Device reference;
  std::vector<Device> fuzzed;  // The CPU plugin and the partial plugins.
};

const Devices& LoadDevices() {
  static const Devices* devices = [] {
    // Fused loops compile in the background (the interpreter runs until
    // then): both are fuzzed, and no input waits on a compiler.
    setenv("MIXRT_CPU_CODEGEN", "async", 0);
    setenv("MIXRT_CPU_SKIP_PROBE", "1", 0);
    auto* d = new Devices();
    const char* list = std::getenv("MIXRT_FUZZ_PLUGINS");
    if (list == nullptr) {
      std::fprintf(stderr, "compile_diff_fuzz: set MIXRT_FUZZ_PLUGINS\n");
      std::abort();
    }
    for (absl::string_view path :
         absl::StrSplit(list, ':', absl::SkipEmpty())) {
      absl::StatusOr<const Backend*> b =
          Registry::Global().Load(std::string(path));
      if (!b.ok()) {
        std::fprintf(stderr, "compile_diff_fuzz: %s\n",
                     std::string(b.status().message()).c_str());
        std::abort();
      }
      const Device device(*b, 0);
      if ((*b)->name() == "reference") {
        d->reference = device;
      } else {
        d->fuzzed.push_back(device);
      }
    }
    if (!d->reference.valid() || d->fuzzed.empty()) {
      std::fprintf(
          stderr, "compile_diff_fuzz: need the reference plugin and another\n");
      std::abort();
    }
    return d;
  }();
  return *devices;
}

// ---- The program ----

enum class LayerKind : uint8_t {
  kLinear,
  kRelu,
  kGelu,
  kLayerNorm,
  kDropout,       // An nn::Dropout module: its mode is a guard.
  kScaleGuarded,  // Times a GuardedValue<double>.
  kScaleClosure,  // Times a closure tensor [1] (rebound between calls).
  kSoftmax,
  kResidual,  // Plus the program's input.
  kCount
};

const char* LayerName(LayerKind k) {
  static const char* names[] = {"linear",        "relu",    "gelu",
                                "layer_norm",    "dropout", "scale_guarded",
                                "scale_closure", "softmax", "residual"};
  return names[static_cast<int>(k)];
}

struct Program {
  int64_t features = 8;
  std::vector<LayerKind> layers;
  // Layers [checkpoint_from, checkpoint_to) run through mixrt::checkpoint.
  int checkpoint_from = 0, checkpoint_to = 0;
  int64_t narrow_cap = 0;  // > 0: the output narrowed to min(N, cap) rows.
  int loss = 0;            // 0: the output itself, 1: sum, 2: mean.
  std::string mode;
  int device = 0;
  // Which tensors need gradients, each bit flipping a default: bit 0 the
  // input (default: none), bit 1 layer norms with a weight and a bias
  // (default: without), bits 2.. the parameters in Params' order (default:
  // all need one; bit 2 + k % 30 for parameter k).
  uint32_t grad_mask = 0;
  bool input_needs_grad() const { return (grad_mask & 1) != 0; }
  bool affine_norms() const { return (grad_mask & 2) != 0; }
  bool parameter_needs_grad(size_t k) const {
    return (grad_mask >> (2 + k % 30) & 1) == 0;
  }
};

// What a program reads besides its input: the closure state the fuzzer
// changes between calls.
struct State {
  std::vector<Tensor> weights;  // Per linear: [F, F], and a bias [F].
  std::vector<Tensor> biases;
  // Per layer norm, with affine_norms: its weight and bias [F].
  std::vector<Tensor> norm_weights, norm_biases;
  Tensor closure;  // [1], for kScaleClosure.
  std::shared_ptr<nn::Dropout> dropout;
  Generator dropout_generator{1234};
  GuardedValue<double> factor{0.5, "factor"};
};

// `index`: the layer's number among the layers of its kind.
absl::StatusOr<Tensor> Layer(State& s, LayerKind k, size_t index,
                             const Tensor& h, const Tensor& x0) {
  switch (k) {
    case LayerKind::kLinear:
      return linear(h, s.weights[index], s.biases[index]);
    case LayerKind::kRelu:
      return relu(h);
    case LayerKind::kGelu:
      return gelu(h);
    case LayerKind::kLayerNorm:
      if (index < s.norm_weights.size()) {
        return layer_norm(h, 1, s.norm_weights[index], s.norm_biases[index]);
      }
      return layer_norm(h, 1, Tensor(), Tensor());
    case LayerKind::kDropout:
      return s.dropout->forward(h);
    case LayerKind::kScaleGuarded:
      return scale(h, s.factor.get());
    case LayerKind::kScaleClosure:
      return mul(h, s.closure);
    case LayerKind::kSoftmax:
      return softmax(h, -1);
    case LayerKind::kResidual:
      return add(h, x0);
    case LayerKind::kCount:
      break;
  }
  return absl::InternalError("no such layer");
}

// Layers [from, to) of p over t, the linear layers' parameters by index.
absl::StatusOr<Tensor> RunLayers(const Program& p, State& s, size_t from,
                                 size_t to, Tensor t, const Tensor& x0) {
  size_t linear = 0, norm = 0;
  for (size_t i = 0; i < to; ++i) {
    const LayerKind k = p.layers[i];
    if (i >= from) {
      MIXRT_ASSIGN_OR_RETURN(
          t, Layer(s, k, k == LayerKind::kLayerNorm ? norm : linear, t, x0));
    }
    if (k == LayerKind::kLinear) ++linear;
    if (k == LayerKind::kLayerNorm) ++norm;
  }
  return t;
}

// The program over `state`, as a function a compiler traces.
compiler::TracedFunction Function(const Program& p, State* s) {
  return [&p, s](const std::vector<Tensor>& in)
             -> absl::StatusOr<std::vector<Tensor>> {
    const Tensor x0 = in[0];
    const size_t from = p.checkpoint_from, to = p.checkpoint_to;
    MIXRT_ASSIGN_OR_RETURN(Tensor h, RunLayers(p, *s, 0, from, x0, x0));
    if (to > from) {
      // Everything the region reads by value: backward recomputes it after
      // this call has returned.
      const Program* program = &p;
      MIXRT_ASSIGN_OR_RETURN(
          std::vector<Tensor> out,
          checkpoint(
              [program, s, from, to, x0](const std::vector<Tensor>& r)
                  -> absl::StatusOr<std::vector<Tensor>> {
                MIXRT_ASSIGN_OR_RETURN(
                    Tensor y, RunLayers(*program, *s, from, to, r[0], x0));
                return std::vector<Tensor>{y};
              },
              {h}, {.generators = {&s->dropout_generator}}));
      h = out[0];
    }
    MIXRT_ASSIGN_OR_RETURN(
        h, RunLayers(p, *s, std::max(from, to), p.layers.size(), h, x0));
    if (p.narrow_cap > 0) {
      // Host logic on a size: what a trace at small N sees as N itself.
      MIXRT_ASSIGN_OR_RETURN(
          h, narrow(h, 0, 0, std::min<int64_t>(h.shape()[0], p.narrow_cap)));
    }
    if (p.loss == 1) return std::vector<Tensor>{*sum(h)};
    if (p.loss == 2) return std::vector<Tensor>{*mean(h)};
    return std::vector<Tensor>{h};
  };
}

// ---- One call ----

struct Call {
  int64_t rows = 4;
  int autocast = 0;  // 0 off, 1 bf16, 2 f16.
  bool backward = false;
  bool training = false;  // The dropout module's mode.
  int change = 0;         // What changes before the call (see Change).
  int target = 0;         // Which weight it changes.
  uint64_t seed = 0;
};

constexpr int kChanges = 7;

std::string Describe(const Program& p, const std::vector<Call>& calls,
                     size_t at) {
  std::vector<std::string> layers;
  for (LayerKind k : p.layers) layers.push_back(LayerName(k));
  std::string out = absl::StrCat(
      "program: F=", p.features, " layers [", absl::StrJoin(layers, ", "),
      "] checkpoint [", p.checkpoint_from, ", ", p.checkpoint_to, ") narrow ",
      p.narrow_cap, " loss ", p.loss, " mode ", p.mode, " grad mask ",
      p.grad_mask, "\n");
  for (size_t i = 0; i <= at && i < calls.size(); ++i) {
    const Call& c = calls[i];
    absl::StrAppend(&out, "  call ", i, ": N=", c.rows, " autocast ",
                    c.autocast, " backward ", c.backward, " training ",
                    c.training, " change ", c.change, " target ", c.target,
                    "\n");
  }
  return out;
}

// Applies call c's change to the shared state before it runs.
void Change(const Program& p, State& s, const Call& c, const Device& d) {
  if (s.weights.empty() && c.change <= 3) return;
  const size_t w = s.weights.empty() ? 0 : c.target % s.weights.size();
  Generator g(c.seed);
  switch (c.change) {
    case 1: {  // Rebound: the variable holds another tensor.
      const bool grad = s.weights[w].requires_grad();
      s.weights[w] =
          *randn({p.features, p.features}, DType::kF32, d, 0, 0.3, &g);
      (void)s.weights[w].set_requires_grad(grad);
      break;
    }
    case 2:  // Written in place through the runtime.
      (void)kernels::copy_(s.weights[w], *randn({p.features, p.features},
                                                DType::kF32, d, 0, 0.3, &g));
      break;
    case 3: {  // Written through its pointer.
      float* data = static_cast<float*>(s.weights[w].data_ptr());
      for (int64_t i = 0; i < p.features * p.features; ++i) data[i] *= -0.5f;
      break;
    }
    case 4:
      s.factor.set(s.factor.get_unguarded() * -1.5);
      break;
    case 5:
      s.closure = *full({1}, 0.25 + (c.seed % 7) * 0.25, DType::kF32, d);
      break;
    case 6:
      if (!s.weights.empty()) {
        (void)s.weights[w].set_requires_grad(!s.weights[w].requires_grad());
      }
      break;
    default:
      break;
  }
}

// ---- Comparing ----

struct Result {
  std::vector<Tensor> outputs;
  std::vector<Tensor> grads;  // Per watched tensor; undefined for none.
  std::string error;
};

// Runs `f` on x under the call's autocast and grad state, then backward
// when asked, collecting the gradients of `params` (cleared after).
Result Run(const compiler::TracedFunction& f, const Call& c, const Tensor& x,
           std::vector<Tensor> params, uint64_t dropout_offset,
           Generator& dropout_gen) {
  Result r;
  dropout_gen.set_state(dropout_gen.seed(), dropout_offset);
  std::optional<NoGradGuard> no_grad;
  if (!c.backward) no_grad.emplace();
  absl::StatusOr<std::vector<Tensor>> out;
  {
    std::optional<AutocastGuard> autocast;
    if (c.autocast > 0) {
      autocast.emplace(std::string(x.device().type()),
                       c.autocast == 1 ? DType::kBF16 : DType::kF16);
    }
    out = f({x});
  }
  if (!out.ok()) {
    r.error = std::string(out.status().message());
    return r;
  }
  r.outputs = *out;
  if (c.backward && r.outputs[0].requires_grad()) {
    Tensor root = r.outputs[0];
    if (root.numel() != 1) root = *sum(root);
    const absl::Status s = root.backward();
    if (!s.ok()) r.error = absl::StrCat("backward: ", s.message());
  }
  for (Tensor& t : params) {
    r.grads.push_back(t.grad());
    t.set_grad(Tensor());
  }
  return r;
}

// Whether a and b agree within `tolerance` of b's largest magnitude (at
// least 1), NaN where b is NaN; otherwise why not.
std::string Disagreement(const Tensor& a, const Tensor& b, double tolerance) {
  if (a.defined() != b.defined()) {
    return a.defined() ? "a result where the reference has none"
                       : "no result where the reference has one";
  }
  if (!a.defined()) return "";
  if (a.shape() != b.shape()) {
    return absl::StrCat("shape ", ShapeToString(a.shape()), " vs ",
                        ShapeToString(b.shape()));
  }
  const std::vector<double> x = *a.to_double_vector(),
                            y = *b.to_double_vector();
  double scale = 1;
  for (double v : y) {
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  }
  for (size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(y[i]) || std::isnan(x[i])) {
      if (std::isnan(y[i]) != std::isnan(x[i])) {
        return absl::StrCat("element ", i, ": ", x[i], " vs ", y[i]);
      }
      continue;
    }
    if (std::isinf(y[i]) || std::isinf(x[i])) {
      if (x[i] != y[i])
        return absl::StrCat("element ", i, ": ", x[i], " vs ", y[i]);
      continue;
    }
    if (std::fabs(x[i] - y[i]) > tolerance * scale) {
      return absl::StrCat("element ", i, ": ", x[i], " vs ", y[i], " (allowed ",
                          tolerance * scale, ")");
    }
  }
  return "";
}

std::string Compare(const Result& got, const Result& want, double tolerance) {
  if (got.error != want.error) {
    return absl::StrCat("errors differ: '", got.error, "' vs '", want.error,
                        "'");
  }
  if (!want.error.empty()) return "";
  for (size_t i = 0; i < want.outputs.size(); ++i) {
    if (std::string d =
            Disagreement(got.outputs[i], want.outputs[i], tolerance);
        !d.empty()) {
      return absl::StrCat("output ", i, ": ", d);
    }
  }
  for (size_t i = 0; i < want.grads.size(); ++i) {
    if (std::string d = Disagreement(got.grads[i], want.grads[i], tolerance);
        !d.empty()) {
      return absl::StrCat(i + 1 == want.grads.size()
                              ? "gradient of the input"
                              : absl::StrCat("gradient of parameter ", i),
                          ": ", d);
    }
  }
  return "";
}

// The tolerance of one computation against another: f32 rounding through
// a few layers (GEMMs summed in other orders, fused epilogues); a few
// low-precision roundings per layer under autocast.
double Tolerance(int autocast) {
  return autocast == 0 ? 1e-4 : autocast == 1 ? 0.1 : 0.02;
}

[[noreturn]] void Found(const std::string& what, const Program& p,
                        const std::vector<Call>& calls, size_t at) {
  std::fprintf(stderr, "compile_diff_fuzz: %s\n%s", what.c_str(),
               Describe(p, calls, at).c_str());
  std::abort();
}

// The state's tensors on another device, with their requires_grad.
std::unique_ptr<State> CopyTo(const State& s, const Device& d) {
  auto owned = std::make_unique<State>();
  State& c = *owned;
  auto move = [&d](const Tensor& t) {
    if (!t.defined()) return Tensor();
    Tensor m = *t.detach().to(d);
    if (m.shares_storage_with(t)) m = *m.clone();
    (void)m.set_requires_grad(t.requires_grad());
    return m;
  };
  for (const Tensor& w : s.weights) c.weights.push_back(move(w));
  for (const Tensor& b : s.biases) c.biases.push_back(move(b));
  for (const Tensor& w : s.norm_weights) c.norm_weights.push_back(move(w));
  for (const Tensor& b : s.norm_biases) c.norm_biases.push_back(move(b));
  c.closure = move(s.closure);
  c.dropout = std::make_shared<nn::Dropout>(0.25, &c.dropout_generator);
  c.dropout->train(s.dropout->is_training());
  c.factor.set(s.factor.get_unguarded());
  return owned;
}

std::vector<Tensor> Params(const State& s) {
  std::vector<Tensor> all = s.weights;
  all.insert(all.end(), s.biases.begin(), s.biases.end());
  all.insert(all.end(), s.norm_weights.begin(), s.norm_weights.end());
  all.insert(all.end(), s.norm_biases.begin(), s.norm_biases.end());
  return all;
}

// The tensors whose gradients are compared: the parameters, then the
// input.
std::vector<Tensor> Watched(const State& s, const Tensor& x) {
  std::vector<Tensor> all = Params(s);
  all.push_back(x);
  return all;
}

void RunProgram(const Program& p, const std::vector<Call>& calls) {
  const Devices& devices = LoadDevices();
  const Device d = devices.fuzzed[p.device % devices.fuzzed.size()];
  State state;
  Generator init(7);
  for (LayerKind k : p.layers) {
    if (k != LayerKind::kLinear) continue;
    state.weights.push_back(
        *randn({p.features, p.features}, DType::kF32, d, 0, 0.3, &init));
    state.biases.push_back(*randn({p.features}, DType::kF32, d, 0, 0.1, &init));
  }
  for (LayerKind k : p.layers) {
    if (k != LayerKind::kLayerNorm || !p.affine_norms()) continue;
    state.norm_weights.push_back(
        *randn({p.features}, DType::kF32, d, 1, 0.1, &init));
    state.norm_biases.push_back(
        *randn({p.features}, DType::kF32, d, 0, 0.1, &init));
  }
  {
    // Scoped: a handle kept here would keep a parameter alive after the
    // program rebinds it, which no compiled graph can tell from the
    // function still reading it (docs/compiler.md, "Guards").
    std::vector<Tensor> params = Params(state);
    for (size_t k = 0; k < params.size(); ++k) {
      (void)params[k].set_requires_grad(p.parameter_needs_grad(k));
    }
  }
  state.closure = *full({1}, 0.75, DType::kF32, d);
  state.dropout = std::make_shared<nn::Dropout>(0.25, &state.dropout_generator);
  const compiler::TracedFunction eager = Function(p, &state);
  absl::StatusOr<CompiledFunction> compiled = compile(eager, {.mode = p.mode});
  if (!compiled.ok())
    Found(std::string(compiled.status().message()), p, calls, 0);
  uint64_t dropout_offset = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    const Call& c = calls[i];
    Change(p, state, c, d);
    state.dropout->train(c.training);
    Generator data(c.seed + 99);
    Tensor x = *randn({c.rows, p.features}, DType::kF32, d, 0, 1, &data);
    if (p.input_needs_grad()) (void)x.set_requires_grad(true);
    const Result want = Run(eager, c, x, Watched(state, x), dropout_offset,
                            state.dropout_generator);
    const Result got = Run(*compiled, c, x, Watched(state, x), dropout_offset,
                           state.dropout_generator);
    if (std::string why = Compare(got, want, Tolerance(c.autocast));
        !why.empty()) {
      Found(absl::StrCat("compiled (", p.mode, ") and eager on ", d.ToString(),
                         " disagree: ", why, "\n", compiled->Explain()),
            p, calls, i);
    }
    // The oracle: the same state and input on the reference plugin.
    std::unique_ptr<State> twin = CopyTo(state, devices.reference);
    Tensor x_ref = *(*x.detach().to(devices.reference)).clone();
    if (p.input_needs_grad()) (void)x_ref.set_requires_grad(true);
    const Result oracle =
        Run(Function(p, twin.get()), c, x_ref, Watched(*twin, x_ref),
            dropout_offset, twin->dropout_generator);
    if (std::string why = Compare(want, oracle, 10 * Tolerance(c.autocast));
        !why.empty()) {
      Found(absl::StrCat("eager on ", d.ToString(),
                         " and the reference plugin disagree: ", why),
            p, calls, i);
    }
    dropout_offset = state.dropout_generator.offset() + 1000;
  }
}

}  // namespace
}  // namespace mixrt::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mixrt::fuzz;
  FuzzInput in(data, size);
  Program p;
  p.features = 4 + 4 * (in.Read<uint8_t>() % 3);
  const int layers = 1 + in.Read<uint8_t>() % 6;
  for (int i = 0; i < layers; ++i) {
    p.layers.push_back(static_cast<LayerKind>(
        in.Read<uint8_t>() % static_cast<int>(LayerKind::kCount)));
  }
  const uint8_t region = in.Read<uint8_t>();
  if (region & 1) {
    p.checkpoint_from = (region >> 1) % layers;
    p.checkpoint_to =
        p.checkpoint_from + 1 + (region >> 4) % (layers - p.checkpoint_from);
  }
  p.narrow_cap = in.Read<uint8_t>() % 5;  // 0: none.
  p.loss = in.Read<uint8_t>() % 3;
  static const char* modes[] = {"default", "reduce-overhead", "max-autotune",
                                "max-autotune-no-cudagraphs"};
  p.mode = modes[in.Read<uint8_t>() % 4];
  p.device = in.Read<uint8_t>();
  std::vector<Call> calls(2 + in.Read<uint8_t>() % 5);
  static const int64_t rows[] = {1, 2, 3, 4, 5, 8};
  for (Call& c : calls) {
    const uint8_t a = in.Read<uint8_t>(), b = in.Read<uint8_t>();
    c.rows = rows[a % 6];
    c.autocast = (a / 6) % 3;
    c.backward = (a / 18) % 2;
    c.training = (a / 36) % 2;
    c.change = b % kChanges;
    c.target = b / kChanges;
    c.seed = in.Read<uint8_t>();
  }
  // Last, so inputs written before it existed decode as they did (zero
  // past the end: the defaults).
  p.grad_mask = in.Read<uint32_t>();
  RunProgram(p, calls);
  return 0;
}
