#include "tools/bench/bench_cases.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "mixrt/mixrt.h"

namespace mixrt::bench {
namespace {

using Fn = std::function<absl::StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>&)>;

std::optional<DType> OperandDtype(const std::string& precision) {
  absl::StatusOr<DType> d = ParseDType(precision);
  if (!d.ok()) return std::nullopt;
  return *d;
}

// Autocast as `precision` asks, for model kinds (f32: none).
std::unique_ptr<AutocastGuard> Autocast(const Device& device,
                                        const std::string& precision) {
  if (precision == "f32") return nullptr;
  AutocastOptions options;
  if (precision == "auto") {
    options.auto_precision = true;
  } else {
    options.dtype = OperandDtype(precision);
  }
  return std::make_unique<AutocastGuard>(device.type(), options);
}

absl::StatusOr<Fn> MaybeCompiled(Fn fn, const std::string& mode) {
  if (mode == "eager") return fn;
  CompileOptions options;
  options.mode = mode;
  MIXRT_ASSIGN_OR_RETURN(CompiledFunction compiled, compile(fn, options));
  return Fn([compiled](const std::vector<Tensor>& in) { return compiled(in); });
}

// Model cases: the network, its input and the loss target.
struct Model {
  std::shared_ptr<nn::Module> net;
  Tensor x, target;
  double flops_forward = 0;
};

absl::StatusOr<Model> MakeModel(const SuiteCase& c, const Device& device) {
  Generator init(7);
  Model m;
  const int64_t batch = c.param("batch"), width = c.param("width");
  if (absl::StartsWith(c.kind, "mlp")) {
    const int64_t layers = c.param("layers");
    std::vector<int64_t> sizes(layers + 1, width);
    MIXRT_ASSIGN_OR_RETURN(m.net, nn::MLP(sizes, device, &init));
    MIXRT_ASSIGN_OR_RETURN(
        m.x, randn({batch, width}, DType::kF32, device, 0, 1, &init));
    MIXRT_ASSIGN_OR_RETURN(
        m.target, randn({batch, width}, DType::kF32, device, 0, 1, &init));
    m.flops_forward = 2.0 * batch * width * width * layers;
    return m;
  }
  const int64_t seq = c.param("seq"), heads = c.param("heads");
  if (heads == 0 || width % heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        c.where, ": width ", width, " is not a multiple of heads ", heads));
  }
  nn::TransformerBlockOptions options;
  options.width = width;
  options.heads = heads;
  options.causal = true;
  MIXRT_ASSIGN_OR_RETURN(m.net,
                         nn::TransformerBlock::Create(options, device, &init));
  MIXRT_ASSIGN_OR_RETURN(
      m.x, randn({batch, seq, width}, DType::kF32, device, 0, 1, &init));
  MIXRT_ASSIGN_OR_RETURN(
      m.target, randn({batch, seq, width}, DType::kF32, device, 0, 1, &init));
  // Projections (4 w^2) and the MLP (2 * 4 w^2) per token, and the causal
  // attention's two products (half of 2 * 2 * seq * w per token).
  const double tokens = static_cast<double>(batch) * seq;
  m.flops_forward = tokens * (2.0 * 12 * width * width + 2.0 * seq * width);
  return m;
}

// A training step: forward (compiled or not) under autocast, scaled
// backward, SGD step. The scaler runs for lower precisions, as the recipe.
struct Trainer {
  Model model;
  Fn loss;
  std::shared_ptr<SGD> opt;
  std::shared_ptr<GradScaler> scaler;
  std::string precision;
  Device device;

  absl::StatusOr<double> Step() {
    Tensor loss_value;
    {
      std::unique_ptr<AutocastGuard> autocast = Autocast(device, precision);
      MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> out,
                             loss({model.x, model.target}));
      loss_value = out[0];
    }
    MIXRT_ASSIGN_OR_RETURN(Tensor scaled, scaler->scale(loss_value));
    MIXRT_RETURN_IF_ERROR(scaled.backward());
    MIXRT_RETURN_IF_ERROR(scaler->step(*opt));
    MIXRT_RETURN_IF_ERROR(scaler->update());
    opt->zero_grad();
    return loss_value.item();
  }
};

absl::StatusOr<std::shared_ptr<Trainer>> MakeTrainer(
    const SuiteCase& c, const Device& device, const std::string& precision,
    const std::string& mode) {
  auto t = std::make_shared<Trainer>();
  MIXRT_ASSIGN_OR_RETURN(t->model, MakeModel(c, device));
  std::shared_ptr<nn::Module> net = t->model.net;
  Fn loss = [net](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor out, net->forward(in[0]));
    MIXRT_ASSIGN_OR_RETURN(Tensor l, mse_loss(out, in[1]));
    return std::vector<Tensor>{l};
  };
  MIXRT_ASSIGN_OR_RETURN(t->loss, MaybeCompiled(loss, mode));
  t->opt = std::make_shared<SGD>(net->parameters(), SgdOptions{.lr = 1e-3});
  GradScalerOptions scaling;
  scaling.enabled = precision != "f32";
  t->scaler = std::make_shared<GradScaler>(device, scaling);
  t->precision = precision;
  t->device = device;
  return t;
}

struct Inference {
  Model model;
  Fn forward;
  std::string precision;
  Device device;

  absl::StatusOr<Tensor> Run() {
    InferenceModeGuard no_autograd;
    std::unique_ptr<AutocastGuard> autocast = Autocast(device, precision);
    MIXRT_ASSIGN_OR_RETURN(std::vector<Tensor> out, forward({model.x}));
    return out[0];
  }
};

absl::StatusOr<std::shared_ptr<Inference>> MakeInference(
    const SuiteCase& c, const Device& device, const std::string& precision,
    const std::string& mode) {
  auto inf = std::make_shared<Inference>();
  MIXRT_ASSIGN_OR_RETURN(inf->model, MakeModel(c, device));
  std::shared_ptr<nn::Module> net = inf->model.net;
  Fn forward = [net](const std::vector<Tensor>& in)
      -> absl::StatusOr<std::vector<Tensor>> {
    MIXRT_ASSIGN_OR_RETURN(Tensor out, net->forward(in[0]));
    return std::vector<Tensor>{out};
  };
  MIXRT_ASSIGN_OR_RETURN(inf->forward, MaybeCompiled(forward, mode));
  inf->precision = precision;
  inf->device = device;
  return inf;
}

// Op cases: the inputs (in the operand dtype) and the op.
struct OpCase {
  std::vector<Tensor> inputs;
  std::function<absl::StatusOr<Tensor>(const std::vector<Tensor>&)> op;
  double flops = 0;
};

absl::StatusOr<OpCase> MakeOpCase(const SuiteCase& c, const Device& device,
                                  DType dtype) {
  Generator init(11);
  OpCase oc;
  auto input = [&](std::vector<int64_t> shape) -> absl::Status {
    MIXRT_ASSIGN_OR_RETURN(Tensor t,
                           randn(shape, DType::kF32, device, 0, 1, &init));
    MIXRT_ASSIGN_OR_RETURN(t, t.to(dtype));
    oc.inputs.push_back(t);
    return absl::OkStatus();
  };
  if (c.kind == "gemm") {
    const int64_t b = c.param("batch"), m = c.param("m"), n = c.param("n"),
                  k = c.param("k");
    MIXRT_RETURN_IF_ERROR(b > 1 ? input({b, m, k}) : input({m, k}));
    MIXRT_RETURN_IF_ERROR(b > 1 ? input({b, k, n}) : input({k, n}));
    oc.op = [](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); };
    oc.flops = 2.0 * b * m * n * k;
  } else if (c.kind == "conv") {
    const int64_t n = c.param("batch"), ch = c.param("c"), h = c.param("h"),
                  w = c.param("w"), o = c.param("o"), kk = c.param("kernel"),
                  stride = c.param("stride"), pad = c.param("padding");
    if (stride == 0 || h + 2 * pad < kk || w + 2 * pad < kk) {
      return absl::InvalidArgumentError(
          absl::StrCat(c.where, ": the kernel does not fit the padded image"));
    }
    MIXRT_RETURN_IF_ERROR(input({n, ch, h, w}));
    MIXRT_RETURN_IF_ERROR(input({o, ch, kk, kk}));
    Conv2dOptions options;
    options.stride = {static_cast<int32_t>(stride),
                      static_cast<int32_t>(stride)};
    options.padding = {static_cast<int32_t>(pad), static_cast<int32_t>(pad)};
    oc.op = [options](const std::vector<Tensor>& in) {
      return conv2d(in[0], in[1], Tensor(), options);
    };
    const int64_t ho = (h + 2 * pad - kk) / stride + 1;
    const int64_t wo = (w + 2 * pad - kk) / stride + 1;
    oc.flops = 2.0 * n * o * ho * wo * ch * kk * kk;
  } else if (c.kind == "sdpa") {
    const int64_t b = c.param("batch"), heads = c.param("heads"),
                  seq = c.param("seq"), e = c.param("head_dim");
    for (int i = 0; i < 3; ++i)
      MIXRT_RETURN_IF_ERROR(input({b, heads, seq, e}));
    const bool causal = c.param("causal") != 0;
    oc.op = [causal](const std::vector<Tensor>& in) {
      AttentionOptions options;
      options.is_causal = causal;
      return scaled_dot_product_attention(in[0], in[1], in[2], options);
    };
    oc.flops = 4.0 * b * heads * seq * seq * e * (causal ? 0.5 : 1.0);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(c.where, ": not an op case: ", c.kind));
  }
  return oc;
}

absl::StatusOr<std::vector<double>> Values(const Tensor& t) {
  MIXRT_ASSIGN_OR_RETURN(Tensor f, t.to(DType::kF32));
  return f.to_double_vector();
}

}  // namespace

MixrtOpClass CaseOpClass(const std::string& kind) {
  return kind == "conv" ? MIXRT_OP_CLASS_CONV : MIXRT_OP_CLASS_MATMUL;
}

bool IsModelKind(const std::string& kind) {
  return absl::StartsWith(kind, "mlp") || absl::StartsWith(kind, "transformer");
}

bool Applies(const std::string& kind, const std::string& precision,
             const std::string& mode) {
  if (IsModelKind(kind)) return true;
  return precision != "auto" && mode == "eager";
}

absl::StatusOr<Workload> MakeWorkload(const SuiteCase& c, const Device& device,
                                      const std::string& precision,
                                      const std::string& mode) {
  Workload w;
  auto sync = [device]() {
    return device.backend()->Synchronize(device.index());
  };
  if (absl::EndsWith(c.kind, "_train")) {
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Trainer> t,
                           MakeTrainer(c, device, precision, mode));
    w.flops = 3 * t->model.flops_forward;
    w.step = [t, sync]() -> absl::Status {
      MIXRT_RETURN_IF_ERROR(t->Step().status());
      return sync();
    };
    return w;
  }
  if (absl::EndsWith(c.kind, "_infer")) {
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Inference> inf,
                           MakeInference(c, device, precision, mode));
    w.flops = inf->model.flops_forward;
    w.step = [inf, sync]() -> absl::Status {
      MIXRT_RETURN_IF_ERROR(inf->Run().status());
      return sync();
    };
    return w;
  }
  const std::optional<DType> dtype = OperandDtype(precision);
  if (!dtype.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.kind, " runs in f32, bf16 or f16, not ", precision));
  }
  MIXRT_ASSIGN_OR_RETURN(OpCase oc, MakeOpCase(c, device, *dtype));
  auto shared = std::make_shared<OpCase>(std::move(oc));
  w.flops = shared->flops;
  w.step = [shared, sync]() -> absl::Status {
    InferenceModeGuard no_autograd;
    MIXRT_RETURN_IF_ERROR(shared->op(shared->inputs).status());
    return sync();
  };
  return w;
}

SuiteCase SmallShapes(const SuiteCase& c) {
  SuiteCase s = c;
  auto cap = [&](const char* key, int64_t limit) {
    auto it = s.params.find(key);
    if (it != s.params.end()) it->second = std::min(it->second, limit);
  };
  cap("m", 24);
  cap("n", 20);
  cap("k", 28);
  cap("batch", 2);
  cap("c", 6);
  cap("o", 5);
  cap("h", 11);
  cap("w", 11);
  cap("seq", 12);
  cap("head_dim", 16);
  cap("heads", 2);
  cap("layers", 2);
  if (IsModelKind(c.kind)) {
    const int64_t heads = s.params.count("heads") ? s.params["heads"] : 1;
    s.params["width"] = 16 * std::max<int64_t>(heads, 1);
  }
  return s;
}

absl::StatusOr<std::vector<double>> CheckValues(const SuiteCase& c,
                                                const Device& device,
                                                const std::string& precision,
                                                const std::string& mode) {
  if (absl::EndsWith(c.kind, "_train")) {
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Trainer> t,
                           MakeTrainer(c, device, precision, mode));
    std::vector<double> losses;
    for (int i = 0; i < 2; ++i) {
      MIXRT_ASSIGN_OR_RETURN(double loss, t->Step());
      losses.push_back(loss);
    }
    return losses;
  }
  if (absl::EndsWith(c.kind, "_infer")) {
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Inference> inf,
                           MakeInference(c, device, precision, mode));
    MIXRT_ASSIGN_OR_RETURN(Tensor out, inf->Run());
    return Values(out);
  }
  MIXRT_ASSIGN_OR_RETURN(OpCase oc,
                         MakeOpCase(c, device, *OperandDtype(precision)));
  InferenceModeGuard no_autograd;
  MIXRT_ASSIGN_OR_RETURN(Tensor out, oc.op(oc.inputs));
  return Values(out);
}

double CheckTolerance(const std::string& precision) {
  if (precision == "f32") return 1e-4;
  if (precision == "f16") return 16 * 0x1p-11;
  return 16 * 0x1p-8;  // bf16, auto.
}

}  // namespace mixrt::bench
