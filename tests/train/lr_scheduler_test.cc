// The learning-rate schedules against PyTorch 2.15's, bit for bit
// (tests/train/golden/lr_schedules.tsv, written by
// tools/golden/lr_schedules.py): the lr after creation and after every
// step, for each schedule alone, a LinearLR warm-up composed with a StepLR
// on one optimizer, and ReduceLROnPlateau on a scripted metric sequence.
#include "core/optim/lr_scheduler.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

// Case name -> the lr at epochs 0, 1, ...
std::map<std::string, std::vector<double>> ReadGolden() {
  std::ifstream in(testing::RunfilePath("tests/train/golden/lr_schedules.tsv"));
  std::map<std::string, std::vector<double>> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, epoch, lr;
    std::getline(fields, name, '\t');
    std::getline(fields, epoch, '\t');
    std::getline(fields, lr, '\t');
    std::vector<double>& lrs = cases[name];
    EXPECT_EQ(static_cast<size_t>(std::stoi(epoch)), lrs.size()) << line;
    lrs.push_back(std::strtod(lr.c_str(), nullptr));  // Reads float.hex.
  }
  return cases;
}

class LrSchedules : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = ReadGolden();
    ASSERT_EQ(golden_.size(), 17u) << "golden cases";
  }
  std::unique_ptr<SGD> Optimizer(double lr, double momentum = 0) {
    Tensor p = *zeros({1}, DType::kF32, testing::ReferenceDevice());
    return std::make_unique<SGD>(std::vector<Tensor>{p},
                                 SgdOptions{.lr = lr, .momentum = momentum});
  }
  // OneCycleLR from creation through its last step: the lr and the
  // momentum it cycles (case "<name>/momentum") against PyTorch's.
  void ReplayOneCycle(const std::string& name, mixrt::Optimizer& opt,
                      const OneCycleLROptions& options,
                      bool check_past_end = false) {
    auto s = OneCycleLR::Create(&opt, options);
    ASSERT_TRUE(s.ok()) << s.status();
    const std::vector<double>& lr = golden_.at(name);
    const std::vector<double>& momentum = golden_.at(name + "/momentum");
    ASSERT_EQ(lr.size(), momentum.size());
    for (size_t epoch = 0; epoch < lr.size(); ++epoch) {
      if (epoch > 0) {
        ASSERT_TRUE(s->step().ok()) << name << " " << epoch;
      }
      EXPECT_EQ(opt.lr(), lr[epoch]) << name << " epoch " << epoch;
      EXPECT_EQ(*opt.momentum(), momentum[epoch])
          << name << " momentum, epoch " << epoch;
    }
    if (!check_past_end) return;
    // Step total_steps extrapolates the last phase (as PyTorch does; here
    // refused where that makes the lr negative); one more is an error, and
    // nothing changes.
    ASSERT_TRUE(s->step().ok());
    const double lr_after = opt.lr();
    const absl::Status past = s->step();
    EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
    EXPECT_THAT(past.message(), HasSubstr("total steps"));
    EXPECT_EQ(opt.lr(), lr_after);
  }
  // Steps every schedule once per epoch, as the golden script does, and
  // compares the optimizer's lr with PyTorch's bit for bit.
  void Replay(const std::string& name, SGD& opt,
              const std::vector<LRScheduler*>& schedules) {
    const std::vector<double>& want = golden_.at(name);
    EXPECT_EQ(opt.lr(), want[0]) << name << " at creation";
    for (size_t epoch = 1; epoch < want.size(); ++epoch) {
      for (LRScheduler* s : schedules) ASSERT_TRUE(s->step().ok());
      EXPECT_EQ(opt.lr(), want[epoch]) << name << " epoch " << epoch;
    }
    EXPECT_EQ(schedules.back()->get_last_lr(), opt.lr()) << name;
  }

  std::map<std::string, std::vector<double>> golden_;
};

TEST_F(LrSchedules, EachScheduleMatchesPyTorchBitForBit) {
  {
    auto opt = Optimizer(0.1);
    auto s = StepLR::Create(opt.get(), 3, 0.5);
    ASSERT_TRUE(s.ok()) << s.status();
    Replay("step", *opt, {&*s});
  }
  {
    auto opt = Optimizer(0.1);
    auto s = CosineAnnealingLR::Create(opt.get(), 5, 1e-3);
    ASSERT_TRUE(s.ok()) << s.status();
    Replay("cosine", *opt, {&*s});
  }
  {
    auto opt = Optimizer(0.1);
    auto s = LinearLR::Create(opt.get(), 0.25, 1.0, 4);
    ASSERT_TRUE(s.ok()) << s.status();
    Replay("linear", *opt, {&*s});
  }
  {
    auto opt = Optimizer(0.1);
    auto s = LambdaLR::Create(opt.get(),
                              [](int epoch) { return std::pow(0.95, epoch); });
    ASSERT_TRUE(s.ok()) << s.status();
    Replay("lambda", *opt, {&*s});
  }
}

// Two schedules on one optimizer compose: each steps from the lr the other
// left (a warm-up under a decay), not from its own base.
TEST_F(LrSchedules, SchedulesOnOneOptimizerCompose) {
  auto opt = Optimizer(0.1);
  auto warmup = LinearLR::Create(opt.get(), 0.5, 1.0, 3);
  ASSERT_TRUE(warmup.ok());
  auto decay = StepLR::Create(opt.get(), 2, 0.5);
  ASSERT_TRUE(decay.ok());
  Replay("warmup_then_step", *opt, {&*warmup, &*decay});
}

// A schedule created after another keeps the optimizer's initial lr as its
// base (PyTorch's initial_lr), which CosineAnnealingLR reads every T_max.
TEST_F(LrSchedules, ALaterScheduleKeepsTheInitialLrAsItsBase) {
  auto opt = Optimizer(0.1);
  auto warmup = LinearLR::Create(opt.get(), 0.5, 1.0, 2);
  ASSERT_TRUE(warmup.ok());
  auto cosine = CosineAnnealingLR::Create(opt.get(), 3);
  ASSERT_TRUE(cosine.ok());
  Replay("warmup_then_cosine", *opt, {&*warmup, &*cosine});
}

// Param groups of lr 0.1 and 0.01: each moves from its own base.
TEST_F(LrSchedules, EveryParamGroupFollowsItsOwnBase) {
  const Device d = testing::ReferenceDevice();
  Tensor a = *zeros({1}, DType::kF32, d), b = *zeros({1}, DType::kF32, d);
  SGD opt({{{a}, {}, {}}, {{b}, 0.01, {}}}, {.lr = 0.1});
  auto warmup = LinearLR::Create(&opt, 0.5, 1.0, 2);
  auto cosine = CosineAnnealingLR::Create(&opt, 3, 0.001);
  ASSERT_TRUE(warmup.ok() && cosine.ok());
  const std::vector<double>& want0 = golden_.at("two_groups_warmup_cosine/0");
  const std::vector<double>& want1 = golden_.at("two_groups_warmup_cosine/1");
  for (size_t epoch = 0; epoch < want0.size(); ++epoch) {
    if (epoch > 0) {
      ASSERT_TRUE(warmup->step().ok());
      ASSERT_TRUE(cosine->step().ok());
    }
    EXPECT_EQ(opt.group_lr(0), want0[epoch]) << "group 0, epoch " << epoch;
    EXPECT_EQ(opt.group_lr(1), want1[epoch]) << "group 1, epoch " << epoch;
  }
  EXPECT_EQ(cosine->get_last_lrs(),
            (std::vector<double>{opt.group_lr(0), opt.group_lr(1)}));
  // The state of both groups resumes; a one-group state does not fit.
  const auto state = cosine->state_dict();
  EXPECT_EQ(state.at("base_lr.1"), 0.01);
  ASSERT_TRUE(cosine->load_state_dict(state).ok());
  EXPECT_THAT(cosine
                  ->load_state_dict(
                      {{"last_epoch", 1}, {"base_lr", 0.1}, {"last_lr", 0.1}})
                  .message(),
              HasSubstr("no 'base_lr.1'"));
}

TEST_F(LrSchedules, OneCycleMatchesPyTorchWithItsMomentum) {
  {
    auto opt = Optimizer(0.1, 0.9);
    ReplayOneCycle("onecycle_cos", *opt, {.max_lr = 1.0, .total_steps = 10},
                   /*check_past_end=*/true);
  }
  {
    auto opt = Optimizer(0.1, 0.9);
    ReplayOneCycle("onecycle_linear_three_phase", *opt,
                   {.max_lr = 0.5,
                    .total_steps = 12,
                    .pct_start = 0.25,
                    .anneal_strategy = "linear",
                    .div_factor = 10,
                    .final_div_factor = 100,
                    .three_phase = true});
  }
  {
    // AdamW: beta1 is what cycles.
    Tensor p = *zeros({1}, DType::kF32, testing::ReferenceDevice());
    AdamW opt({p}, {.lr = 1e-3});
    ReplayOneCycle("onecycle_adamw", opt,
                   {.max_lr = 0.01,
                    .epochs = 2,
                    .steps_per_epoch = 4,
                    .base_momentum = 0.8,
                    .max_momentum = 0.9});
  }
}

TEST_F(LrSchedules, OneCycleRefusesWhatPyTorchCannotRun) {
  auto opt = Optimizer(0.1);
  auto no_length = OneCycleLR::Create(opt.get(), {.max_lr = 1});
  EXPECT_THAT(no_length.status().message(), HasSubstr("total_steps"));
  auto strategy = OneCycleLR::Create(
      opt.get(), {.max_lr = 1, .total_steps = 10, .anneal_strategy = "exp"});
  EXPECT_THAT(strategy.status().message(), HasSubstr("'cos' or 'linear'"));
  // 0.1 of 10 steps rises over no step at all (PyTorch divides by zero).
  auto empty = OneCycleLR::Create(
      opt.get(), {.max_lr = 1, .total_steps = 10, .pct_start = 0.1});
  EXPECT_THAT(empty.status().message(), HasSubstr("phase without steps"));
  auto momentum = OneCycleLR::Create(opt.get(), {.max_lr = 1,
                                                 .total_steps = 10,
                                                 .base_momentum = 0.85,
                                                 .max_momentum = -0.5});
  EXPECT_THAT(momentum.status().message(), HasSubstr("momentum"));
  EXPECT_EQ(opt->lr(), 0.1) << "a refused schedule changes nothing";
  EXPECT_EQ(*opt->momentum(), 0.0) << "a refused schedule changes nothing";
}

TEST_F(LrSchedules, SequentialMatchesPyTorch) {
  {
    auto opt = Optimizer(0.1);
    auto warmup = LinearLR::Create(opt.get(), 0.1, 1.0, 3);
    auto cosine = CosineAnnealingLR::Create(opt.get(), 4, 0.001);
    ASSERT_TRUE(warmup.ok() && cosine.ok());
    auto seq = SequentialLR::Create(opt.get(), {&*warmup, &*cosine}, {3});
    ASSERT_TRUE(seq.ok()) << seq.status();
    const std::vector<double>& want = golden_.at("sequential_warmup_cosine");
    EXPECT_EQ(opt->lr(), want[0]);
    for (size_t epoch = 1; epoch < want.size(); ++epoch) {
      ASSERT_TRUE(seq->step().ok());
      EXPECT_EQ(opt->lr(), want[epoch]) << "epoch " << epoch;
      EXPECT_EQ(seq->get_last_lr(), opt->lr());
    }
  }
  {
    auto opt = Optimizer(0.1);
    auto step = StepLR::Create(opt.get(), 2, 0.5);
    auto lambda =
        LambdaLR::Create(opt.get(), [](int e) { return std::pow(0.9, e); });
    auto linear = LinearLR::Create(opt.get(), 0.5, 1.0, 2);
    ASSERT_TRUE(step.ok() && lambda.ok() && linear.ok());
    auto seq =
        SequentialLR::Create(opt.get(), {&*step, &*lambda, &*linear}, {4, 7});
    ASSERT_TRUE(seq.ok()) << seq.status();
    const std::vector<double>& want = golden_.at("sequential_three");
    EXPECT_EQ(opt->lr(), want[0]);
    for (size_t epoch = 1; epoch < want.size(); ++epoch) {
      ASSERT_TRUE(seq->step().ok());
      EXPECT_EQ(opt->lr(), want[epoch]) << "epoch " << epoch;
    }
  }
  auto opt = Optimizer(0.1);
  auto other = Optimizer(0.1);
  auto a = StepLR::Create(opt.get(), 2);
  auto b = StepLR::Create(other.get(), 2);
  EXPECT_THAT(
      SequentialLR::Create(opt.get(), {&*a, &*b}, {3}).status().message(),
      HasSubstr("not on the optimizer"));
  EXPECT_THAT(SequentialLR::Create(opt.get(), {&*a}, {3}).status().message(),
              HasSubstr("need 0 milestones"));
}

// A SequentialLR saved before its milestone and resumed elsewhere (its
// schedules' states and its own loaded, the optimizer's lr restored as
// PyTorch's optimizer state does) steps on to PyTorch's lrs across the
// milestone.
TEST_F(LrSchedules, SequentialResumesFromItsStateDicts) {
  const std::vector<double>& want = golden_.at("sequential_warmup_cosine");
  ASSERT_GE(want.size(), 6u);
  auto opt = Optimizer(0.1);
  auto warmup = LinearLR::Create(opt.get(), 0.1, 1.0, 3);
  auto cosine = CosineAnnealingLR::Create(opt.get(), 4, 0.001);
  ASSERT_TRUE(warmup.ok() && cosine.ok());
  auto seq = SequentialLR::Create(opt.get(), {&*warmup, &*cosine}, {3});
  ASSERT_TRUE(seq.ok()) << seq.status();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(seq->step().ok());
  const std::map<std::string, double> state = seq->state_dict();
  EXPECT_EQ(state.at("last_epoch"), 2);
  EXPECT_EQ(state.at("last_lr"), want[2]);
  EXPECT_EQ(cosine->state_dict().at("last_epoch"), -1)
      << "not started before its milestone, as PyTorch's";

  auto opt2 = Optimizer(0.1);
  auto warmup2 = LinearLR::Create(opt2.get(), 0.1, 1.0, 3);
  auto cosine2 = CosineAnnealingLR::Create(opt2.get(), 4, 0.001);
  ASSERT_TRUE(warmup2.ok() && cosine2.ok());
  auto seq2 = SequentialLR::Create(opt2.get(), {&*warmup2, &*cosine2}, {3});
  ASSERT_TRUE(seq2.ok()) << seq2.status();
  ASSERT_TRUE(warmup2->load_state_dict(warmup->state_dict()).ok());
  ASSERT_TRUE(cosine2->load_state_dict(cosine->state_dict()).ok());
  ASSERT_TRUE(seq2->load_state_dict(state).ok());
  ASSERT_TRUE(opt2->set_lr(opt->lr()).ok());
  EXPECT_EQ(seq2->last_epoch(), 2);
  EXPECT_EQ(seq2->get_last_lr(), want[2]);
  for (size_t epoch = 3; epoch < want.size(); ++epoch) {
    ASSERT_TRUE(seq2->step().ok());
    EXPECT_EQ(opt2->lr(), want[epoch]) << "epoch " << epoch;
  }

  std::map<std::string, double> bad = state;
  bad.erase("last_lr");
  EXPECT_THAT(seq2->load_state_dict(bad).message(), HasSubstr("no 'last_lr'"));
  bad = state;
  bad["last_epoch"] = -1;
  EXPECT_THAT(seq2->load_state_dict(bad).message(),
              HasSubstr("last_epoch is -1; expected an integer >= 0"));
  EXPECT_EQ(seq2->last_epoch(), static_cast<int>(want.size()) - 1)
      << "a refused state changes nothing";
}

TEST_F(LrSchedules, ReduceLROnPlateauMatchesPyTorch) {
  auto opt = Optimizer(0.1);
  auto s = ReduceLROnPlateau::Create(opt.get(), {.factor = 0.5,
                                                 .patience = 2,
                                                 .threshold = 1e-4,
                                                 .cooldown = 1,
                                                 .min_lr = 0.01});
  ASSERT_TRUE(s.ok()) << s.status();
  const double metrics[] = {1.0,  0.9,  0.95, 0.96, 0.97, 0.85, 0.86,
                            0.87, 0.88, 0.89, 0.9,  0.91, 0.92, 0.5,
                            0.5,  0.5,  0.5,  0.5,  NAN,  0.5,  0.5};
  const std::vector<double>& want = golden_.at("plateau");
  ASSERT_EQ(want.size(), std::size(metrics) + 1);
  EXPECT_EQ(opt->lr(), want[0]);
  for (size_t epoch = 1; epoch < want.size(); ++epoch) {
    ASSERT_TRUE(s->step(metrics[epoch - 1]).ok());
    EXPECT_EQ(opt->lr(), want[epoch]) << "epoch " << epoch;
  }
  // Its state resumes elsewhere: the same decisions from there on.
  auto other_opt = Optimizer(opt->lr());
  auto resumed = ReduceLROnPlateau::Create(
      other_opt.get(), {.factor = 0.5, .patience = 2, .min_lr = 0.001});
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE(resumed->load_state_dict(s->state_dict()).ok());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(s->step(0.6).ok());
    ASSERT_TRUE(resumed->step(0.6).ok());
  }
  EXPECT_EQ(resumed->num_bad_epochs(), s->num_bad_epochs());
}

TEST_F(LrSchedules, StateDictsResumeAndRefuseBadInput) {
  auto opt = Optimizer(0.1);
  auto s = CosineAnnealingLR::Create(opt.get(), 5, 1e-3);
  ASSERT_TRUE(s.ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s->step().ok());
  const std::map<std::string, double> state = s->state_dict();
  EXPECT_EQ(state.at("last_epoch"), 3);
  EXPECT_EQ(state.at("base_lr"), 0.1);
  EXPECT_EQ(state.at("last_lr"), opt->lr());
  // A second run resumed from the state (its optimizer at the saved lr)
  // steps to the same lrs as the first.
  auto opt2 = Optimizer(s->get_last_lr());
  auto s2 = CosineAnnealingLR::Create(opt2.get(), 5, 1e-3);
  ASSERT_TRUE(s2.ok());
  ASSERT_TRUE(s2->load_state_dict(state).ok());
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(s->step().ok());
    ASSERT_TRUE(s2->step().ok());
    EXPECT_EQ(opt2->lr(), opt->lr()) << "step " << i;
  }
  std::map<std::string, double> bad = state;
  bad.erase("base_lr");
  EXPECT_THAT(s2->load_state_dict(bad).message(), HasSubstr("no 'base_lr'"));
  bad = state;
  bad["last_epoch"] = 2.5;
  EXPECT_THAT(s2->load_state_dict(bad).message(),
              HasSubstr("expected an integer >= -1"));
  bad["last_epoch"] = -2;
  EXPECT_THAT(s2->load_state_dict(bad).message(),
              HasSubstr("last_epoch is -2; expected an integer >= -1"));

  EXPECT_THAT(LinearLR::Create(opt.get(), 0.0).status().message(),
              HasSubstr("start_factor is 0"));
  EXPECT_THAT(LinearLR::Create(opt.get(), 0.5, 1.5).status().message(),
              HasSubstr("end_factor is 1.5"));
  EXPECT_THAT(
      ReduceLROnPlateau::Create(opt.get(), {.mode = "best"}).status().message(),
      HasSubstr("mode 'best'"));
  EXPECT_THAT(
      ReduceLROnPlateau::Create(opt.get(), {.factor = 1.0}).status().message(),
      HasSubstr("expected 0 <= factor < 1"));
  auto nan_lambda = LambdaLR::Create(opt.get(), [](int e) {
    return e == 0 ? 1.0 : std::numeric_limits<double>::quiet_NaN();
  });
  ASSERT_TRUE(nan_lambda.ok());
  EXPECT_THAT(nan_lambda->step().message(), HasSubstr("Invalid learning rate"));
  EXPECT_EQ(nan_lambda->last_epoch(), 0) << "a refused step advanced";
}

}  // namespace
}  // namespace mixrt
