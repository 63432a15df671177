// A real data set: scikit-learn's handwritten digits, an MLP trained three
// ways from the same seed — f32, bf16 autocast, f16 autocast + GradScaler —
// reporting test accuracy and time for each. AMP should match f32 accuracy
// within one percentage point (the AMP guides' "no loss in model quality",
// measured); --check makes the program fail when it does not.
//
//   bazel run //examples:digits
//   mpirun -np 2 bazel-bin/examples/digits --distributed
//
// With --distributed every rank trains a DistributedDataParallel replica on
// its DistributedSampler shard of each global batch (--batch is the global
// batch, reshuffled per epoch) and evaluates its share of the test batches;
// rank 0 prints.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "common/out_of_memory.h"
#include "examples/digits_data.h"
#include "examples/flag_checks.h"
#include "examples/load_plugins.h"
#include "mixrt/mixrt.h"
#include "plugins/sdk/philox.h"

ABSL_FLAG(std::string, backend, "", "Backend (default: best available).");
ABSL_FLAG(std::string, data, "",
          "Path of digits.csv.gz (default: scikit-learn's).");
ABSL_FLAG(int, epochs, 40, "Training epochs.");
ABSL_FLAG(int64_t, batch, 64, "Batch size.");
ABSL_FLAG(uint64_t, seed, 0,
          "Seed for the split, the initialization and shuffling.");
ABSL_FLAG(int, seeds, 1,
          "Runs with seeds seed, seed + 1, ...: --check compares the "
          "precisions' mean accuracies over them (one split of 360 test "
          "images moves by several points from seed to seed).");
ABSL_FLAG(bool, distributed, false,
          "Data-parallel over the ranks of the mpirun job this process is "
          "in (a single process is a job of one).");
ABSL_FLAG(std::string, compile, "",
          "Also train each configuration compiled in this mode (default, "
          "reduce-overhead, max-autotune) and print its accuracy against "
          "eager's; with --check, within half a point.");
ABSL_FLAG(bool, check, false,
          "Exit 1 unless both AMP runs reach the f32 "
          "accuracy within one percentage point.");

namespace {

using mixrt::Tensor;

struct Batch {
  Tensor x, y;  // Pixels [n, 64] and labels [n].
};

// The data set's images `rows` as one batch.
absl::StatusOr<Batch> Gather(const mixrt::examples::Digits& d,
                             absl::Span<const int64_t> rows,
                             const mixrt::Device& device) {
  std::vector<float> px;
  std::vector<int64_t> lab;
  for (int64_t r : rows) {
    px.insert(px.end(), d.pixels.begin() + r * 64,
              d.pixels.begin() + r * 64 + 64);
    lab.push_back(d.labels[r]);
  }
  const auto n = static_cast<int64_t>(rows.size());
  Batch b;
  MIXRT_ASSIGN_OR_RETURN(
      b.x, mixrt::from_floats(px, {n, 64}, mixrt::DType::kF32, device));
  MIXRT_ASSIGN_OR_RETURN(
      b.y, mixrt::from_ints(lab, {n}, mixrt::DType::kI64, device));
  return b;
}

struct Split {
  std::vector<Tensor> train_x, train_y, test_x, test_y;
  // The data set's rows that form the training set, for per-epoch
  // distributed batches.
  std::vector<int64_t> train_rows;
  // Seeds the split, the initialization and the shuffling.
  uint64_t seed = 0;
};

// 80/20 split and batches, from a seeded permutation.
absl::StatusOr<Split> MakeSplit(const mixrt::examples::Digits& d,
                                const mixrt::Device& device, uint64_t seed) {
  std::vector<int64_t> order(d.count());
  std::iota(order.begin(), order.end(), 0);
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
    MIXRT_ASSIGN_OR_RETURN(
        Batch b,
        Gather(d, absl::MakeConstSpan(order).subspan(start, end - start),
               device));
    (train ? s.train_x : s.test_x).push_back(b.x);
    (train ? s.train_y : s.test_y).push_back(b.y);
    if (train && end == n_train) start = n_train - batch;  // Test starts here.
  }
  s.train_rows.assign(order.begin(), order.begin() + n_train);
  s.seed = seed;
  return s;
}

struct Outcome {
  double accuracy = 0;
  double seconds = 0;
  std::string amp;
};

absl::StatusOr<Outcome> TrainOnce(const mixrt::Device& device,
                                  const mixrt::examples::Digits& digits,
                                  const Split& s,
                                  mixrt::TrainerOptions options) {
  mixrt::Generator init(s.seed + 1);
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
  const std::shared_ptr<mixrt::distributed::ProcessGroup>& group =
      options.process_group;
  std::optional<mixrt::distributed::DistributedSampler> sampler;
  if (group != nullptr) {
    MIXRT_ASSIGN_OR_RETURN(
        sampler, mixrt::distributed::DistributedSampler::Create(
                     static_cast<int64_t>(s.train_rows.size()),
                     group->world_size(), group->rank(), {.seed = s.seed}));
  }
  for (int epoch = 0; epoch < absl::GetFlag(FLAGS_epochs); ++epoch) {
    if (!sampler.has_value()) {
      for (size_t i = 0; i < s.train_x.size(); ++i) {
        MIXRT_RETURN_IF_ERROR(
            trainer.train_step(s.train_x[i], s.train_y[i]).status());
      }
      continue;
    }
    // This rank's share of each global batch, from this epoch's shuffle.
    sampler->set_epoch(epoch);
    const std::vector<int64_t> mine = sampler->indices();
    const int64_t per_rank =
        std::max<int64_t>(1, absl::GetFlag(FLAGS_batch) / group->world_size());
    for (size_t at = 0; at < mine.size(); at += per_rank) {
      const size_t end = std::min(mine.size(), at + per_rank);
      std::vector<int64_t> rows;
      for (size_t k = at; k < end; ++k) rows.push_back(s.train_rows[mine[k]]);
      MIXRT_ASSIGN_OR_RETURN(Batch b, Gather(digits, rows, device));
      MIXRT_RETURN_IF_ERROR(trainer.train_step(b.x, b.y).status());
    }
  }
  Outcome o;
  o.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::vector<Tensor> test_x, test_y;  // This rank's share.
  for (size_t i = 0; i < s.test_x.size(); ++i) {
    if (group == nullptr ||
        static_cast<int>(i % group->world_size()) == group->rank()) {
      test_x.push_back(s.test_x[i]);
      test_y.push_back(s.test_y[i]);
    }
  }
  MIXRT_ASSIGN_OR_RETURN(mixrt::EvalResult eval,
                         trainer.evaluate(test_x, test_y));
  o.accuracy = 100 * eval.accuracy;
  o.amp = trainer.amp_reason();
  return o;
}

absl::Status Run(const char* argv0) {
  using mixrt::examples::CheckFlag;
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("epochs", absl::GetFlag(FLAGS_epochs), 1, 1000000));
  mixrt::Registry& registry = mixrt::Registry::Global();
  mixrt::examples::LoadPlugins(argv0);
  MIXRT_ASSIGN_OR_RETURN(mixrt::Device device,
                         registry.SelectDevice(absl::GetFlag(FLAGS_backend)));
  MIXRT_ASSIGN_OR_RETURN(
      mixrt::examples::Digits digits,
      mixrt::examples::LoadDigits(absl::GetFlag(FLAGS_data)));
  MIXRT_RETURN_IF_ERROR(CheckFlag("batch", absl::GetFlag(FLAGS_batch), 1,
                                  digits.count() * 4 / 5));
  MIXRT_RETURN_IF_ERROR(
      CheckFlag("seeds", absl::GetFlag(FLAGS_seeds), 1, 1000));
  std::shared_ptr<mixrt::distributed::ProcessGroup> group;
  if (absl::GetFlag(FLAGS_distributed)) {
    MIXRT_ASSIGN_OR_RETURN(group, mixrt::distributed::ProcessGroup::Create());
  }
  const bool prints = group == nullptr || group->rank() == 0;
  if (prints) {
    std::printf("%lld images on %s, MLP 64-128-64-10, AdamW, %d epochs%s\n",
                static_cast<long long>(digits.count()),
                device.ToString().c_str(), absl::GetFlag(FLAGS_epochs),
                group == nullptr
                    ? ""
                    : absl::StrCat(", data-parallel on ", group->world_size(),
                                   " ranks over ", group->description())
                          .c_str());
  }
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
  const int seeds = absl::GetFlag(FLAGS_seeds);
  std::vector<double> accuracy_sum(std::size(configs), 0.0);
  bool compiled_within = true;
  for (int k = 0; k < seeds; ++k) {
    const uint64_t seed = absl::GetFlag(FLAGS_seed) + k;
    MIXRT_ASSIGN_OR_RETURN(Split split, MakeSplit(digits, device, seed));
    if (prints && seeds > 1) {
      std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
    }
    double f32_accuracy = 0;
    for (size_t i = 0; i < std::size(configs); ++i) {
      Config c = configs[i];
      c.options.process_group = group;
      MIXRT_ASSIGN_OR_RETURN(Outcome o,
                             TrainOnce(device, digits, split, c.options));
      if (i == 0) f32_accuracy = o.accuracy;
      accuracy_sum[i] += o.accuracy;
      if (prints)
        std::printf(
            "%-26s test accuracy %6.2f%% (%+.2f vs f32)  %6.2f s   AMP %s\n",
            c.name, o.accuracy, o.accuracy - f32_accuracy, o.seconds,
            o.amp.c_str());
      if (const std::string mode = absl::GetFlag(FLAGS_compile);
          !mode.empty()) {
        c.options.compile = mixrt::CompileOptions{.mode = mode};
        MIXRT_ASSIGN_OR_RETURN(Outcome compiled,
                               TrainOnce(device, digits, split, c.options));
        const double compiled_gap = compiled.accuracy - o.accuracy;
        compiled_within &= std::fabs(compiled_gap) <= 0.5;
        if (prints)
          std::printf(
              "%-26s test accuracy %6.2f%% (%+.2f vs eager)  %6.2f s   "
              "compiled, %s\n",
              "", compiled.accuracy, compiled_gap, compiled.seconds,
              mode.c_str());
      }
    }
  }
  // AMP within a point of f32, on the mean over the seeds: one split's
  // 360 test images make a single run's gap a few images of noise.
  bool within = true;
  for (size_t i = 1; i < std::size(configs); ++i) {
    const double gap = (accuracy_sum[0] - accuracy_sum[i]) / seeds;
    within &= gap <= 1.0;
    if (prints && seeds > 1) {
      std::printf("%-26s mean test accuracy over %d seeds %+.2f vs f32\n",
                  configs[i].name, seeds, -gap);
    }
  }
  if (absl::GetFlag(FLAGS_check) && !within) {
    return absl::FailedPreconditionError(
        "an AMP run fell more than one point below f32 accuracy");
  }
  if (absl::GetFlag(FLAGS_check) && !compiled_within) {
    return absl::FailedPreconditionError(
        "a compiled run's accuracy is more than half a point from eager's");
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("digits");
  mixrt::examples::ParseFlags(
      argc, argv,
      "an MLP on scikit-learn's digits in f32, bf16 autocast and f16 "
      "autocast + GradScaler, with test accuracy");
  absl::Status s = Run(argv[0]);
  if (!s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
