// Training that survives its backend (TrainerOptions::snapshot_every): a
// plugin out of process that crashes or hangs mid-run makes the Trainer
// restore its last snapshot onto another backend and replay the steps since,
// so the run ends where an uninterrupted one does, bit for bit. The faulty
// fixture (tests/fixtures/hostile/faulty_plugin.cc) runs the reference
// plugin's kernels, so an uninterrupted run on the reference plugin is the
// answer whatever step the failure hits.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/functional/ops.h"
#include "core/nn/module.h"
#include "core/optim/optimizer.h"
#include "core/plugin/isolated_plugin.h"
#include "core/plugin/registry.h"
#include "core/tensor/factories.h"
#include "core/tensor/generator.h"
#include "core/train/trainer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

struct RunResult {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
  std::vector<std::string> failovers;
  std::string final_device;
  absl::Status status;
};

constexpr int kSteps = 7;

// An MLP trained by SGD with momentum (optimizer state to restore), the
// learning rate changed by the loop at step 3 (to replay as it ran), each
// batch made on the trainer's device. With `dropout`, a Dropout(0.3) layer
// draws from the default generator (its position is part of the snapshot).
RunResult Train(const Device& device, TrainerOptions options,
                bool dropout = false) {
  RunResult r;
  Generator init(0);
  manual_seed(7);
  auto model = std::make_shared<nn::Sequential>();
  model->append(*nn::Linear::Create(6, 16, device, &init));
  model->append(std::make_shared<nn::ReLU>());
  if (dropout) model->append(std::make_shared<nn::Dropout>(0.3));
  model->append(*nn::Linear::Create(16, 4, device, &init));
  Trainer trainer(
      model,
      std::make_unique<SGD>(model->parameters(),
                            SgdOptions{.lr = 0.05, .momentum = 0.9}),
      [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); },
      device, options);
  for (int step = 0; step < kSteps; ++step) {
    if (step == 3) {
      r.status = trainer.optimizer().set_group_lr(0, 0.02);
      if (!r.status.ok()) return r;
    }
    absl::StatusOr<Tensor> x =
        from_floats(testing::RandomValues(8 * 6, 100 + step), {8, 6},
                    DType::kF32, trainer.device());
    absl::StatusOr<Tensor> y =
        from_floats(testing::RandomValues(8 * 4, 200 + step), {8, 4},
                    DType::kF32, trainer.device());
    if (!x.ok() || !y.ok()) {
      r.status = x.ok() ? y.status() : x.status();
      return r;
    }
    absl::StatusOr<Tensor> loss = trainer.train_step(*x, *y);
    if (!loss.ok()) {
      r.status = loss.status();
      return r;
    }
    r.losses.push_back(*loss->item());
  }
  for (const Tensor& p : model->parameters()) {
    r.params.push_back(*p.to_double_vector());
  }
  r.failovers = trainer.failovers();
  r.final_device = trainer.device().ToString();
  return r;
}

class TrainerFailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv(kPluginHostEnv,
           testing::RunfilePath("tools/plugin_host/mixrt-plugin-host").c_str(),
           1);
    reference_ = testing::ReferenceDevice();  // In Registry::Global().
  }
  void TearDown() override {
    unsetenv("MIXRT_FAULTY_MODE");
    unsetenv("MIXRT_FAULTY_OP");
    unsetenv("MIXRT_FAULTY_AT");
  }
  // The faulty plugin out of process, failing as told, in `registry`.
  Device Faulty(Registry& registry, const std::string& mode, int matmul_at,
                absl::Duration timeout = absl::Seconds(60)) {
    setenv("MIXRT_FAULTY_MODE", mode.c_str(), 1);
    setenv("MIXRT_FAULTY_OP", "matmul", 1);
    setenv("MIXRT_FAULTY_AT", std::to_string(matmul_at).c_str(), 1);
    LoadOptions options;
    options.isolation = "faulty";
    options.call_timeout = timeout;
    absl::StatusOr<const Backend*> backend = registry.Load(
        testing::RunfilePath("tests/fixtures/hostile/libmixrt_faulty.so"),
        options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    return backend.ok() ? Device(*backend, 0) : Device();
  }
  static TrainerOptions Options(int snapshot_every) {
    TrainerOptions o;
    o.use_amp = false;
    o.snapshot_every = snapshot_every;
    o.failover_backend = "reference";
    return o;
  }
  Device reference_;
};

void ExpectSameRun(const RunResult& got, const RunResult& want) {
  ASSERT_TRUE(got.status.ok()) << got.status;
  ASSERT_TRUE(want.status.ok()) << want.status;
  EXPECT_EQ(got.losses, want.losses);
  ASSERT_EQ(got.params.size(), want.params.size());
  for (size_t i = 0; i < want.params.size(); ++i) {
    EXPECT_EQ(got.params[i], want.params[i]) << "parameter " << i;
  }
}

TEST_F(TrainerFailoverTest, ACrashMidRunContinuesOnAnotherBackendBitForBit) {
  const RunResult want = Train(reference_, Options(0));
  Registry registry;
  // Five matmuls a step (two forward, three backward: the first Linear's
  // input needs no gradient): the 19th is in step 3's backward, after the
  // snapshot of step 2.
  const RunResult got = Train(Faulty(registry, "crash", 19), Options(2));
  ExpectSameRun(got, want);
  ASSERT_EQ(got.failovers.size(), 1u);
  EXPECT_THAT(got.failovers[0], HasSubstr("crashed: SIGSEGV in matmul"));
  EXPECT_THAT(got.failovers[0],
              HasSubstr("restored step 2 onto reference:0, replayed 2 "
                        "micro-batches"));
  EXPECT_EQ(got.final_device, "reference:0");
}

TEST_F(TrainerFailoverTest, AFailureBeforeTheSecondSnapshotReplaysFromStart) {
  const RunResult want = Train(reference_, Options(0));
  Registry registry;
  // In step 1, with only the first snapshot (step 0) taken: two batches to
  // replay, the learning rate change still ahead.
  const RunResult got = Train(Faulty(registry, "crash", 8), Options(4));
  ExpectSameRun(got, want);
  ASSERT_EQ(got.failovers.size(), 1u);
  EXPECT_THAT(got.failovers[0], HasSubstr("restored step 0"));
  EXPECT_THAT(got.failovers[0], HasSubstr("replayed 2 micro-batches"));
}

TEST_F(TrainerFailoverTest, AHangIsKilledAndTrainingContinues) {
  const RunResult want = Train(reference_, Options(0));
  Registry registry;
  // The 25th matmul is step 4's last (backward), after the snapshot of
  // step 3.
  const RunResult got =
      Train(Faulty(registry, "hang", 25, absl::Milliseconds(300)), Options(3));
  ExpectSameRun(got, want);
  ASSERT_EQ(got.failovers.size(), 1u);
  EXPECT_THAT(got.failovers[0], HasSubstr("hung: matmul"));
  EXPECT_THAT(got.failovers[0],
              HasSubstr("restored step 3 onto reference:0, replayed 2"));
}

TEST_F(TrainerFailoverTest, DropoutAndACompiledForwardReplayTheSame) {
  TrainerOptions options = Options(0);
  options.compile = CompileOptions{};
  const RunResult want = Train(reference_, options, /*dropout=*/true);
  Registry registry;
  options.snapshot_every = 2;
  const RunResult got =
      Train(Faulty(registry, "crash", 23), options, /*dropout=*/true);
  ExpectSameRun(got, want);
  ASSERT_EQ(got.failovers.size(), 1u);
  EXPECT_THAT(got.failovers[0], HasSubstr("restored step 2"));
}

// Every fatal fixture, eager and compiled: the run survives, the log says
// why, and it ends as the reference run does.
struct FixtureCase {
  const char* mode;
  const char* reason;
  bool compiled;
};

class FixtureFailoverTest : public TrainerFailoverTest,
                            public ::testing::WithParamInterface<FixtureCase> {
};

TEST_P(FixtureFailoverTest, TheRunSurvivesAndEndsAsTheReferenceRun) {
  TrainerOptions options = Options(0);
  if (GetParam().compiled) options.compile = CompileOptions{};
  const RunResult want = Train(reference_, options);
  Registry registry;
  options.snapshot_every = 2;
  // In step 3 (its backward eagerly; compiled, the forward of a graph
  // whose backward launches differ), after the snapshot of step 2.
  const RunResult got = Train(Faulty(registry, GetParam().mode, 19), options);
  ExpectSameRun(got, want);
  ASSERT_EQ(got.failovers.size(), 1u);
  EXPECT_THAT(got.failovers[0], HasSubstr(GetParam().reason));
  EXPECT_THAT(got.failovers[0], HasSubstr("restored step 2 onto reference:0"));
}

INSTANTIATE_TEST_SUITE_P(
    Fixtures, FixtureFailoverTest,
    ::testing::Values(
        FixtureCase{"crash", "crashed: SIGSEGV in matmul", false},
        FixtureCase{"crash", "crashed: SIGSEGV in matmul", true},
        FixtureCase{"abort", "crashed: SIGABRT in matmul", false},
        FixtureCase{"abort", "crashed: SIGABRT in matmul", true},
        FixtureCase{"exit0", "exited with status 0 in matmul", false},
        FixtureCase{"exit0", "exited with status 0 in matmul", true},
        FixtureCase{"heap", "crashed: SIGABRT in matmul", false},
        FixtureCase{"heap", "crashed: SIGABRT in matmul", true}),
    [](const ::testing::TestParamInfo<FixtureCase>& info) {
      return std::string(info.param.mode) +
             (info.param.compiled ? "_compiled" : "_eager");
    });

// The AMP recipe (Linear + ReLU layers, MSE, SGD; bf16 autocast with a
// GradScaler) on a plugin that segfaults in step 50 finishes on the CPU
// backend, as a run that moved to the CPU backend at step 50 on purpose.
struct RecipeResult {
  std::vector<double> losses;
  std::vector<std::vector<double>> params;
  std::vector<std::string> failovers;
  std::string final_device;
};

RecipeResult RecipeRun(const Device& start, int snapshot_every,
                       const Device* switch_to_at_50) {
  RecipeResult r;
  Generator init(0);
  auto model = *nn::MLP({64, 64, 64, 64}, start, &init);
  TrainerOptions options;
  options.amp_dtype = DType::kBF16;
  options.force_amp = true;  // bf16 is emulated on the faulty plugin.
  options.use_scaler = true;
  options.snapshot_every = snapshot_every;
  options.failover_backend = "cpu";
  Trainer trainer(
      model, std::make_unique<SGD>(model->parameters(), SgdOptions{.lr = 0.01}),
      [](const Tensor& out, const Tensor& y) { return mse_loss(out, y); },
      start, options);
  EXPECT_TRUE(trainer.amp_enabled()) << trainer.amp_reason();
  for (int step = 0; step < 60; ++step) {
    if (step == 50 && switch_to_at_50 != nullptr) {
      EXPECT_TRUE(trainer.switch_device(*switch_to_at_50).ok());
    }
    Tensor x = testing::MakeTensor(
        trainer.device(), testing::RandomValues(32 * 64, 300 + step), {32, 64});
    Tensor y = testing::MakeTensor(
        trainer.device(), testing::RandomValues(32 * 64, 400 + step), {32, 64});
    absl::StatusOr<Tensor> loss = trainer.train_step(x, y);
    EXPECT_TRUE(loss.ok()) << loss.status();
    if (!loss.ok()) return r;
    r.losses.push_back(*loss->item());
  }
  for (const Tensor& p : model->parameters()) {
    r.params.push_back(*p.to_double_vector());
  }
  r.failovers = trainer.failovers();
  r.final_device = trainer.device().ToString();
  return r;
}

TEST_F(TrainerFailoverTest, ASegfaultAtStep50FinishesOnTheCpuBackend) {
  const Device cpu = testing::CpuDevice();  // In Registry::Global().
  Registry planned_registry, crashing_registry;
  // Eight matmul launches a step here (three forward, five backward: no
  // gradient for the data): the 403rd is in step 50's forward.
  const Device planned_start = Faulty(planned_registry, "none", 1);
  const RecipeResult planned = RecipeRun(planned_start, 0, &cpu);
  const RecipeResult crashed =
      RecipeRun(Faulty(crashing_registry, "crash", 403), 10, nullptr);
  ASSERT_EQ(crashed.losses.size(), 60u);
  EXPECT_EQ(crashed.losses, planned.losses);
  EXPECT_EQ(crashed.params, planned.params);
  EXPECT_EQ(crashed.final_device, "cpu:0");
  ASSERT_EQ(crashed.failovers.size(), 1u);
  EXPECT_THAT(crashed.failovers[0],
              HasSubstr("crashed: SIGSEGV in matmul (launch"));
  EXPECT_THAT(crashed.failovers[0],
              HasSubstr("restored step 50 onto cpu:0, replayed 1 micro-batch"));
}

TEST_F(TrainerFailoverTest, WithoutSnapshotsTheFailureIsTheStepsError) {
  Registry registry;
  const RunResult got = Train(Faulty(registry, "crash", 8), Options(0));
  ASSERT_FALSE(got.status.ok());
  EXPECT_TRUE(absl::IsUnavailable(got.status)) << got.status;
  EXPECT_THAT(got.status.message(), HasSubstr("crashed: SIGSEGV in matmul"));
}

TEST(TensorSetData, ReplacesTheDataOfEveryHandleAndDropsTheGradient) {
  const Device d = testing::ReferenceDevice();
  Tensor p = testing::MakeTensor(d, {1, 2, 3}, {3});
  ASSERT_TRUE(p.set_requires_grad(true).ok());
  p.set_grad(testing::MakeTensor(d, {1, 1, 1}, {3}));
  Tensor handle = p;
  ASSERT_TRUE(p.set_data(testing::MakeTensor(d, {4, 5, 6}, {3})).ok());
  EXPECT_EQ(testing::Values(handle), (std::vector<double>{4, 5, 6}));
  EXPECT_TRUE(handle.requires_grad());
  EXPECT_FALSE(handle.grad().defined());
  absl::Status wrong = p.set_data(testing::MakeTensor(d, {1, 2}, {2}));
  EXPECT_TRUE(absl::IsInvalidArgument(wrong)) << wrong;
  EXPECT_THAT(wrong.message(), HasSubstr("expected f32 [3]"));
}

}  // namespace
}  // namespace mixrt
