// A character-level GPT trained on real text (the fortunes corpus), in
// f32, under bf16 autocast, and under f16 autocast with a GradScaler, each
// with or without gradient checkpointing. Prints tokens/s, peak tensor
// memory and train/validation loss per mode, writes the loss curves as a
// PNG (matplotlib), and prints a generated sample.
//
//   bazel run //examples:gpt                       # ~1 s per step on 2 cores
//   bazel run //examples:gpt -- --checkpointing=both --steps=50
//   bazel run //examples:gpt -- --check --steps=150 --width=64 ...  # CI
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_write.h"
#include "common/out_of_memory.h"
#include "common/run_program.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "examples/text_data.h"
#include "mixrt/mixrt.h"
#include "tools/cpp/runfiles/runfiles.h"

ABSL_FLAG(std::string, backend, "", "Backend (default: best available).");
ABSL_FLAG(std::string, data, "/usr/share/games/fortunes",
          "Directory of text files.");
ABSL_FLAG(
    std::string, modes, "f32,bf16,f16",
    "Comma-separated: f32, bf16 (autocast), f16 (autocast + GradScaler).");
ABSL_FLAG(std::string, checkpointing, "off",
          "Gradient checkpointing per block: off, on or both.");
ABSL_FLAG(int, steps, 200, "Training steps per mode.");
ABSL_FLAG(int, batch, 16, "Sequences per step.");
ABSL_FLAG(int, context, 256, "Characters per sequence.");
ABSL_FLAG(int, width, 384, "Model width.");
ABSL_FLAG(int, heads, 6, "Attention heads.");
ABSL_FLAG(int, layers, 6, "Transformer blocks.");
ABSL_FLAG(double, dropout, 0.1, "Dropout.");
ABSL_FLAG(double, lr, 1e-3, "AdamW learning rate.");
ABSL_FLAG(int, eval_every, 25, "Steps between validation losses.");
ABSL_FLAG(int, sample_chars, 300, "Characters to generate at the end.");
ABSL_FLAG(std::string, plot, "gpt_losses.png",
          "Loss-curve PNG (its data go beside it as .csv); empty: none.");
ABSL_FLAG(bool, check, false,
          "Fail unless bf16 and f16 validation losses end within 2% of f32.");

namespace {

// AdamW's weight decay on the matrices of the matmuls only (attention and
// MLP weights); biases, LayerNorm and the embeddings are not decayed, as
// in GPT-2's and nanoGPT's training (parameter groups).
std::vector<mixrt::ParamGroup> WeightDecayGroups(const mixrt::nn::Module& m) {
  mixrt::ParamGroup decay, no_decay;
  no_decay.weight_decay = 0.0;
  for (const auto& [name, p] : m.named_parameters()) {
    const bool embedding =
        absl::StartsWith(name, "wte.") || absl::StartsWith(name, "wpe.");
    (p.ndim() >= 2 && !embedding ? decay : no_decay).params.push_back(p);
  }
  static bool said = false;
  if (!said) {
    said = true;
    std::printf(
        "AdamW weight decay on %zu matmul weights; none on %zu biases, "
        "LayerNorm and embedding tensors\n",
        decay.params.size(), no_decay.params.size());
  }
  return {decay, no_decay};
}

using mixrt::Tensor;

struct Mode {
  std::string name;  // "f32", "bf16 + ckpt", ...
  std::string dtype;
  bool checkpointing = false;
};

struct Curve {
  std::vector<int> steps;
  std::vector<double> train, val;
};

struct Outcome {
  Mode mode;
  Curve curve;
  double tokens_per_s = 0;
  double ms_per_step = 0;
  double peak_mib = 0;        // This mode's tensors at their peak.
  double activation_mib = 0;  // Peak minus what lives between steps.
  std::shared_ptr<mixrt::nn::GPT> model;
};

// Fixed batches of windows: the same data, in the same order, for every
// mode, so their losses compare.
struct Batches {
  std::vector<Tensor> x, y;
};

absl::StatusOr<Batches> MakeBatches(const std::vector<uint8_t>& tokens,
                                    int count, int batch, int context,
                                    uint32_t seed,
                                    const mixrt::Device& device) {
  // A window needs context + 1 characters: a split shorter than that
  // would make the bound below wrap around (an unsigned underflow: reads
  // far past the text).
  if (tokens.size() < static_cast<size_t>(context) + 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a split of ", tokens.size(), " characters is too short for --context=",
        context, " (it needs at least ", context + 2,
        "); use a longer text or a shorter --context"));
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> start(0, tokens.size() - context - 2);
  Batches b;
  for (int i = 0; i < count; ++i) {
    std::vector<int64_t> x, y;
    for (int s = 0; s < batch; ++s) {
      const size_t at = start(rng);
      x.insert(x.end(), tokens.begin() + at, tokens.begin() + at + context);
      y.insert(y.end(), tokens.begin() + at + 1,
               tokens.begin() + at + context + 1);
    }
    MIXRT_ASSIGN_OR_RETURN(
        Tensor xt,
        mixrt::from_ints(x, {batch, context}, mixrt::DType::kI64, device));
    MIXRT_ASSIGN_OR_RETURN(
        Tensor yt,
        mixrt::from_ints(y, {batch * context}, mixrt::DType::kI64, device));
    b.x.push_back(xt);
    b.y.push_back(yt);
  }
  return b;
}

mixrt::Criterion NextCharacterLoss() {
  return
      [](const Tensor& logits, const Tensor& target) -> absl::StatusOr<Tensor> {
        MIXRT_ASSIGN_OR_RETURN(
            Tensor flat,
            mixrt::reshape(logits, {target.shape()[0], logits.shape()[2]}));
        return mixrt::cross_entropy(flat, target);
      };
}

absl::StatusOr<Outcome> Train(const Mode& mode, int64_t vocab,
                              const Batches& train, const Batches& val,
                              const mixrt::Device& device) {
  mixrt::CachingAllocator& allocator =
      device.backend()->allocator(device.index());
  // Earlier modes' models stay alive (for the sample): measured from here.
  const uint64_t before_mode = allocator.stats().bytes_in_use;
  mixrt::Generator gen(1234);  // Same weights and dropout in every mode.
  mixrt::nn::GPTOptions options{.vocab_size = vocab,
                                .context = absl::GetFlag(FLAGS_context),
                                .width = absl::GetFlag(FLAGS_width),
                                .heads = absl::GetFlag(FLAGS_heads),
                                .layers = absl::GetFlag(FLAGS_layers),
                                .dropout = absl::GetFlag(FLAGS_dropout),
                                .checkpoint = mode.checkpointing};
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         mixrt::nn::GPT::Create(options, device, &gen));
  MIXRT_ASSIGN_OR_RETURN(auto optimizer,
                         mixrt::AdamW::Create(WeightDecayGroups(*model),
                                              {.lr = absl::GetFlag(FLAGS_lr),
                                               .weight_decay = 0.01}));
  mixrt::TrainerOptions trainer_options;
  trainer_options.use_amp = mode.dtype != "f32";
  trainer_options.force_amp = true;  // Compare numerics even where slower.
  if (mode.dtype != "f32") {
    MIXRT_ASSIGN_OR_RETURN(trainer_options.amp_dtype,
                           mixrt::ParseDType(mode.dtype));
  }
  trainer_options.use_scaler = mode.dtype == "f16";
  trainer_options.clip_grad_norm = 1.0;
  mixrt::Trainer trainer(model, std::move(optimizer), NextCharacterLoss(),
                         device, trainer_options);
  uint64_t peak = 0, activations = 0;
  Outcome out;
  out.mode = mode;
  const int steps = absl::GetFlag(FLAGS_steps);
  const int eval_every = absl::GetFlag(FLAGS_eval_every);
  std::vector<double> step_seconds;
  Tensor running;
  int in_running = 0;
  for (int step = 1; step <= steps; ++step) {
    const size_t i = (step - 1) % train.x.size();
    // Parameters, gradients and optimizer state live between steps; the
    // rest of a step's peak is activations (and their gradients).
    const uint64_t between_steps = allocator.stats().bytes_in_use;
    allocator.ResetPeak();
    const auto start = std::chrono::steady_clock::now();
    MIXRT_ASSIGN_OR_RETURN(Tensor loss,
                           trainer.train_step(train.x[i], train.y[i]));
    if (running.defined()) {
      MIXRT_ASSIGN_OR_RETURN(running, mixrt::add(running, loss));
    } else {
      running = loss;
    }
    ++in_running;
    const bool report = step % eval_every == 0 || step == steps;
    double total = 0;
    if (report) {
      MIXRT_ASSIGN_OR_RETURN(total, running.item());  // Waits.
    }
    step_seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
    const uint64_t step_peak = allocator.stats().peak_bytes_in_use;
    peak = std::max(peak, step_peak);
    activations = std::max(activations, step_peak - between_steps);
    if (report) {
      MIXRT_ASSIGN_OR_RETURN(mixrt::EvalResult eval,
                             trainer.evaluate(val.x, val.y));
      out.curve.steps.push_back(step);
      out.curve.train.push_back(total / in_running);
      out.curve.val.push_back(eval.loss);
      std::printf("  %-12s step %4d  train %.4f  val %.4f\n", mode.name.c_str(),
                  step, total / in_running, eval.loss);
      std::fflush(stdout);
      running = Tensor();
      in_running = 0;
    }
  }
  // The median step after the first (which creates every kernel and fills
  // the allocator's cache), as benchmarks/gpt_vs_pytorch.sh compares it.
  std::vector<double> timed(step_seconds.begin() + (steps > 1 ? 1 : 0),
                            step_seconds.end());
  std::sort(timed.begin(), timed.end());
  const double median = timed[timed.size() / 2];
  out.tokens_per_s = static_cast<double>(train.x[0].numel()) / median;
  out.ms_per_step = 1000 * median;
  out.peak_mib = (peak - before_mode) / 1048576.0;
  out.activation_mib = activations / 1048576.0;
  out.model = model;
  return out;
}

// Samples `count` characters after a newline, temperature 0.8.
absl::StatusOr<std::string> Sample(mixrt::nn::GPT& model,
                                   const mixrt::examples::TextCorpus& corpus,
                                   int count, const mixrt::Device& device) {
  mixrt::InferenceModeGuard inference;
  model.eval();
  std::mt19937_64 rng(7);
  std::vector<int64_t> tokens = {corpus.train[0]};
  for (size_t i = 0; i < corpus.alphabet.size(); ++i) {
    if (corpus.alphabet[i] == '\n') tokens[0] = static_cast<int64_t>(i);
  }
  const int64_t context = model.options().context;
  for (int i = 0; i < count; ++i) {
    const size_t from = tokens.size() > static_cast<size_t>(context)
                            ? tokens.size() - context
                            : 0;
    std::vector<int64_t> window(tokens.begin() + from, tokens.end());
    const int64_t t = static_cast<int64_t>(window.size());
    MIXRT_ASSIGN_OR_RETURN(
        Tensor x, mixrt::from_ints(window, {1, t}, mixrt::DType::kI64, device));
    MIXRT_ASSIGN_OR_RETURN(Tensor logits, model.forward(x));
    MIXRT_ASSIGN_OR_RETURN(Tensor last, mixrt::narrow(logits, 1, t - 1, 1));
    MIXRT_ASSIGN_OR_RETURN(std::vector<double> v, last.to_double_vector());
    double max = v[0];
    for (double z : v) max = std::max(max, z);
    std::vector<double> p(v.size());
    for (size_t k = 0; k < v.size(); ++k) p[k] = std::exp((v[k] - max) / 0.8);
    std::discrete_distribution<int64_t> pick(p.begin(), p.end());
    tokens.push_back(pick(rng));
  }
  model.train();
  return corpus.Decode(tokens);
}

// Writes the curves as CSV beside `png` (atomically: a planted link or a
// half-written file never results) and plots them with matplotlib, run
// with its arguments as they are (no shell: a quote in --plot is part of a
// file name) and killed if it takes over a minute.
void Plot(const std::vector<Outcome>& outcomes, const std::string& png,
          const char* argv0) {
  const std::string csv = png.substr(0, png.rfind('.')) + ".csv";
  std::ostringstream out;
  out << "mode,step,train_loss,val_loss\n";
  for (const Outcome& o : outcomes) {
    for (size_t i = 0; i < o.curve.steps.size(); ++i) {
      out << o.mode.name << "," << o.curve.steps[i] << "," << o.curve.train[i]
          << "," << o.curve.val[i] << "\n";
    }
  }
  if (const absl::Status s = mixrt::files::WriteFileAtomically(csv, out.str());
      !s.ok()) {
    std::printf("loss curves: not written: %s\n",
                std::string(s.message()).c_str());
    return;
  }
  std::string error;
  std::unique_ptr<bazel::tools::cpp::runfiles::Runfiles> runfiles(
      bazel::tools::cpp::runfiles::Runfiles::Create(argv0, &error));
  const std::string script =
      runfiles ? runfiles->Rlocation("mixrt/examples/plot_losses.py") : "";
  // Debian's interpreter has Debian's matplotlib (a pyenv one may not).
  const std::string python =
      std::ifstream("/usr/bin/python3").good() ? "/usr/bin/python3" : "python3";
  const mixrt::files::ProgramResult plotted =
      script.empty() ? mixrt::files::ProgramResult{}
                     : mixrt::files::RunProgram({python, script, csv, png}, 60);
  if (plotted.exit_code != 0) {
    std::printf(
        "loss curves: %s (plotting failed%s: run examples/plot_losses.py "
        "%s %s with matplotlib installed)\n",
        csv.c_str(), plotted.timed_out ? ", killed after 60 s" : "",
        csv.c_str(), png.c_str());
  } else {
    std::printf("loss curves: %s (data %s)\n", png.c_str(), csv.c_str());
  }
}

absl::Status CheckFlags() {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("steps", absl::GetFlag(FLAGS_steps), 1, 1000000));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("batch", absl::GetFlag(FLAGS_batch), 1, 4096));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("context", absl::GetFlag(FLAGS_context), 2, 8192));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("width", absl::GetFlag(FLAGS_width), 1, 16384));
  MIXRT_RETURN_IF_ERROR(CheckFlag("heads", absl::GetFlag(FLAGS_heads), 1, 256));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("layers", absl::GetFlag(FLAGS_layers), 0, 256));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("eval_every", absl::GetFlag(FLAGS_eval_every), 1, 1000000));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("sample_chars", absl::GetFlag(FLAGS_sample_chars), 0, 100000));
  MIXRT_RETURN_IF_ERROR(
      mixrt::examples::CheckFiniteFlag("lr", absl::GetFlag(FLAGS_lr), 0, 10));
  const double dropout = absl::GetFlag(FLAGS_dropout);
  if (!(dropout >= 0 && dropout < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dropout=", dropout, " is out of range; expected [0, 1)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Mode>> ParseModes() {
  const std::string ckpt = absl::GetFlag(FLAGS_checkpointing);
  if (ckpt != "off" && ckpt != "on" && ckpt != "both") {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpointing=", ckpt, "; expected off, on or both"));
  }
  std::vector<Mode> modes;
  for (absl::string_view m : absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
    if (m != "f32" && m != "bf16" && m != "f16") {
      return absl::InvalidArgumentError(
          absl::StrCat("--modes: '", m, "' is not f32, bf16 or f16"));
    }
    const std::string name = std::string(m) + (m == "f16" ? " + scaler" : "");
    if (ckpt != "on") modes.push_back({name, std::string(m), false});
    if (ckpt != "off")
      modes.push_back({name + " + ckpt", std::string(m), true});
  }
  return modes;
}

absl::Status Run(const char* argv0) {
  MIXRT_RETURN_IF_ERROR(CheckFlags());
  MIXRT_ASSIGN_OR_RETURN(std::vector<Mode> modes, ParseModes());
  mixrt::Registry& registry = mixrt::Registry::Global();
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         registry.SelectDevice(absl::GetFlag(FLAGS_backend)));
  MIXRT_ASSIGN_OR_RETURN(
      mixrt::examples::TextCorpus corpus,
      mixrt::examples::LoadFortunes(absl::GetFlag(FLAGS_data)));
  const int batch = absl::GetFlag(FLAGS_batch),
            context = absl::GetFlag(FLAGS_context);
  MIXRT_ASSIGN_OR_RETURN(
      Batches train,
      MakeBatches(corpus.train, std::min(absl::GetFlag(FLAGS_steps), 1000),
                  batch, context, 1, device));
  MIXRT_ASSIGN_OR_RETURN(Batches val, MakeBatches(corpus.validation, 4, batch,
                                                  context, 2, device));
  std::printf(
      "%zu training / %zu validation characters, vocabulary %lld, on %s\n"
      "     %d layers, width %d, %d heads, context %d, batch %d, %d steps\n",
      corpus.train.size(), corpus.validation.size(),
      static_cast<long long>(corpus.vocab_size()), device.ToString().c_str(),
      absl::GetFlag(FLAGS_layers), absl::GetFlag(FLAGS_width),
      absl::GetFlag(FLAGS_heads), context, batch, absl::GetFlag(FLAGS_steps));
  std::vector<Outcome> outcomes;
  for (const Mode& mode : modes) {
    MIXRT_ASSIGN_OR_RETURN(
        Outcome o, Train(mode, corpus.vocab_size(), train, val, device));
    outcomes.push_back(std::move(o));
  }
  std::printf(
      "\n(ms/step: median after the first step; peak: the mode's tensors; "
      "act: peak minus what lives between steps)\n"
      "%-20s %9s %9s %9s %9s %8s %8s\n",
      "mode", "tokens/s", "ms/step", "peak MiB", "act MiB", "train", "val");
  const Outcome& base = outcomes.front();
  for (const Outcome& o : outcomes) {
    std::printf(
        "%-20s %9.0f %9.1f %9.1f %9.1f %8.4f %8.4f   vs %s: %.2fx speed, "
        "%.2fx peak, %.2fx act\n",
        o.mode.name.c_str(), o.tokens_per_s, o.ms_per_step, o.peak_mib,
        o.activation_mib, o.curve.train.back(), o.curve.val.back(),
        base.mode.name.c_str(), o.tokens_per_s / base.tokens_per_s,
        o.peak_mib / base.peak_mib, o.activation_mib / base.activation_mib);
  }
  if (!absl::GetFlag(FLAGS_plot).empty()) {
    Plot(outcomes, absl::GetFlag(FLAGS_plot), argv0);
  }
  if (absl::GetFlag(FLAGS_sample_chars) > 0) {
    MIXRT_ASSIGN_OR_RETURN(std::string text,
                           Sample(*outcomes.back().model, corpus,
                                  absl::GetFlag(FLAGS_sample_chars), device));
    std::printf("\nsample (%s):\n%s\n", outcomes.back().mode.name.c_str(),
                text.c_str());
  }
  if (absl::GetFlag(FLAGS_check)) {
    double f32 = NAN;
    for (const Outcome& o : outcomes) {
      if (o.mode.dtype == "f32" && !o.mode.checkpointing)
        f32 = o.curve.val.back();
    }
    if (std::isnan(f32)) {
      return absl::InvalidArgumentError("--check needs the f32 mode");
    }
    for (const Outcome& o : outcomes) {
      const double gap = (o.curve.val.back() - f32) / f32;
      if (!std::isfinite(o.curve.val.back()) || std::abs(gap) > 0.02) {
        return absl::FailedPreconditionError(
            absl::StrCat(o.mode.name, " validation loss ", o.curve.val.back(),
                         " is not within 2% of f32's ", f32));
      }
    }
    std::printf(
        "check: every mode's validation loss is within 2%% of f32's %.4f\n",
        f32);
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("gpt");
  mixrt::examples::ParseFlags(
      argc, argv,
      "a character-level GPT on the fortunes corpus in f32, bf16 and f16 "
      "+ GradScaler, with or without checkpointing");
  absl::Status s = Run(argv[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
