// A real data set: scikit-learn's handwritten digits, an MLP trained three
// ways from the same seed — f32, bf16 autocast, f16 autocast + GradScaler —
// reporting test accuracy and time for each. AMP should match f32 accuracy
// within one percentage point (the AMP guides' "no loss in model quality",
// measured); --check makes the program fail when it does not.
//
//   bazel run //examples:digits
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "core/bundled/bundled_plugins.h"
#include "examples/flag_checks.h"
#include "examples/digits_data.h"
#include "mixrt/mixrt.h"
#include "plugins/sdk/philox.h"

ABSL_FLAG(std::string, backend, "", "Backend (default: best available).");
ABSL_FLAG(std::string, data, "",
          "Path of digits.csv.gz (default: scikit-learn's).");
ABSL_FLAG(int, epochs, 40, "Training epochs.");
ABSL_FLAG(int64_t, batch, 64, "Batch size.");
ABSL_FLAG(uint64_t, seed, 0,
          "Seed for the split, the initialization and shuffling.");
ABSL_FLAG(bool, check, false,
          "Exit 1 unless both AMP runs reach the f32 "
          "accuracy within one percentage point.");

namespace {

using mixrt::Tensor;

struct Split {
  std::vector<Tensor> train_x, train_y, test_x, test_y;
};

// 80/20 split and batches, from a seeded permutation.
absl::StatusOr<Split> MakeSplit(const mixrt::examples::Digits& d,
                                const mixrt::Device& device) {
  std::vector<int64_t> order(d.count());
  std::iota(order.begin(), order.end(), 0);
  const uint64_t seed = absl::GetFlag(FLAGS_seed);
  for (int64_t i = d.count() - 1; i > 0; --i) {  // Fisher-Yates on Philox.
    const auto j = static_cast<int64_t>(
        mixrt::sdk::PhiloxUniform(seed, 0, i, 0, 1) * (i + 1));
    std::swap(order[i], order[std::min(j, i)]);
  }
  const int64_t n_train = d.count() * 4 / 5;
  const int64_t batch = absl::GetFlag(FLAGS_batch);
  Split s;
  for (int64_t start = 0; start < d.count(); start += batch) {
    const bool train = start < n_train;
    const int64_t end = std::min(train ? n_train : d.count(), start + batch);
    if (train && end <= start) continue;
    std::vector<float> px;
    std::vector<int64_t> lab;
    for (int64_t k = start; k < end; ++k) {
      px.insert(px.end(), d.pixels.begin() + order[k] * 64,
                d.pixels.begin() + order[k] * 64 + 64);
      lab.push_back(d.labels[order[k]]);
    }
    const int64_t n = end - start;
    MIXRT_ASSIGN_OR_RETURN(
        Tensor x, mixrt::from_floats(px, {n, 64}, mixrt::DType::kF32, device));
    MIXRT_ASSIGN_OR_RETURN(
        Tensor y, mixrt::from_ints(lab, {n}, mixrt::DType::kI64, device));
    (train ? s.train_x : s.test_x).push_back(x);
    (train ? s.train_y : s.test_y).push_back(y);
    if (train && end == n_train) start = n_train - batch;  // Test starts here.
  }
  return s;
}

struct Outcome {
  double accuracy = 0;
  double seconds = 0;
  std::string amp;
};

absl::StatusOr<Outcome> TrainOnce(const mixrt::Device& device, const Split& s,
                                  mixrt::TrainerOptions options) {
  mixrt::Generator init(absl::GetFlag(FLAGS_seed) + 1);
  MIXRT_ASSIGN_OR_RETURN(auto model,
                         mixrt::nn::MLP({64, 128, 64, 10}, device, &init));
  auto opt = std::make_unique<mixrt::AdamW>(
      model->parameters(),
      mixrt::AdamWOptions{.lr = 3e-3, .weight_decay = 1e-4});
  mixrt::Trainer trainer(
      model, std::move(opt),
      [](const Tensor& out, const Tensor& y) {
        return mixrt::cross_entropy(out, y);
      },
      device, options);
  const auto start = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < absl::GetFlag(FLAGS_epochs); ++epoch) {
    for (size_t i = 0; i < s.train_x.size(); ++i) {
      MIXRT_RETURN_IF_ERROR(
          trainer.train_step(s.train_x[i], s.train_y[i]).status());
    }
  }
  Outcome o;
  o.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  MIXRT_ASSIGN_OR_RETURN(mixrt::EvalResult eval,
                         trainer.evaluate(s.test_x, s.test_y));
  o.accuracy = 100 * eval.accuracy;
  o.amp = trainer.amp_reason();
  return o;
}

absl::Status Run(const char* argv0) {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(CheckFlag("epochs", absl::GetFlag(FLAGS_epochs), 1, 1000000));
  mixrt::Registry& registry = mixrt::Registry::Global();
  registry.LoadAll(mixrt::BundledPluginPaths(argv0));
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         registry.SelectDevice(absl::GetFlag(FLAGS_backend)));
  MIXRT_ASSIGN_OR_RETURN(
      mixrt::examples::Digits digits,
      mixrt::examples::LoadDigits(absl::GetFlag(FLAGS_data)));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("batch", absl::GetFlag(FLAGS_batch), 1, digits.count() * 4 / 5));
  MIXRT_ASSIGN_OR_RETURN(Split split, MakeSplit(digits, device));
  std::printf("digits: %lld images on %s, MLP 64-128-64-10, AdamW, %d epochs\n",
              static_cast<long long>(digits.count()), device.ToString().c_str(),
              absl::GetFlag(FLAGS_epochs));
  struct Config {
    const char* name;
    mixrt::TrainerOptions options;
  };
  const Config configs[] = {
      {"f32", {.use_amp = false}},
      {"bf16 autocast", {.amp_dtype = mixrt::DType::kBF16, .force_amp = true}},
      {"f16 autocast + GradScaler",
       {.amp_dtype = mixrt::DType::kF16,
        .force_amp = true,
        .use_scaler = true}},
  };
  double f32_accuracy = 0;
  bool within = true;
  for (const Config& c : configs) {
    MIXRT_ASSIGN_OR_RETURN(Outcome o, TrainOnce(device, split, c.options));
    if (&c == &configs[0]) f32_accuracy = o.accuracy;
    const double gap = f32_accuracy - o.accuracy;
    within &= gap <= 1.0;
    std::printf(
        "%-26s test accuracy %6.2f%% (%+.2f vs f32)  %6.2f s   AMP %s\n",
        c.name, o.accuracy, -gap, o.seconds, o.amp.c_str());
  }
  if (absl::GetFlag(FLAGS_check) && !within) {
    return absl::FailedPreconditionError(
        "an AMP run fell more than one point below f32 accuracy");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status s = Run(argv[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "digits: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
