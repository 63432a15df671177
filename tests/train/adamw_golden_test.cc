// AdamW against PyTorch 2.15's f32 AdamW (tests/train/golden/
// adamw_trajectories.tsv, written by tools/golden/adamw_trajectories.py):
// plain, amsgrad, and amsgrad with maximize, every parameter after every
// step, on the reference plugin and the CPU plugin; and AMSGrad's state in
// checkpoints.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;

struct Trajectory {
  std::vector<float> initial;
  std::vector<std::vector<float>> grads, params;  // Per step 1, 2, ...
};

std::map<std::string, Trajectory> ReadGolden() {
  std::ifstream in(
      testing::RunfilePath("tests/train/golden/adamw_trajectories.tsv"));
  std::map<std::string, Trajectory> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string name, step, index, grad, param;
    for (std::string* f : {&name, &step, &index, &grad, &param}) {
      std::getline(fields, *f, '\t');
    }
    Trajectory& t = cases[name];
    const size_t s = std::stoul(step);
    const float p = std::strtof(param.c_str(), nullptr);  // float.hex
    if (s == 0) {
      t.initial.push_back(p);
      continue;
    }
    if (t.grads.size() < s) {
      t.grads.resize(s);
      t.params.resize(s);
    }
    t.grads[s - 1].push_back(std::strtof(grad.c_str(), nullptr));
    t.params[s - 1].push_back(p);
  }
  return cases;
}

AdamWOptions OptionsOf(const std::string& name) {
  if (name == "adamw") {
    return {.lr = 0.1, .beta1 = 0.9, .beta2 = 0.999, .weight_decay = 0.01};
  }
  if (name == "adamw_amsgrad") {
    return {.lr = 0.1,
            .beta1 = 0.9,
            .beta2 = 0.99,
            .weight_decay = 0.01,
            .amsgrad = true};
  }
  return {.lr = 0.05,
          .beta1 = 0.8,
          .beta2 = 0.9,
          .weight_decay = 0.1,
          .maximize = true,
          .amsgrad = true};
}

// The largest distance from PyTorch over the trajectory, in units of
// 1e-6 * (|want| + lr): the two run the same f32 algorithm with a few
// roundings in another order (PyTorch's lerp and addcdiv against a
// multiply-add and a quotient), each step moving a parameter by about lr.
double WorstDistance(const Trajectory& t, const Device& device,
                     AdamWOptions options) {
  const int64_t n = static_cast<int64_t>(t.initial.size());
  Tensor p = testing::MakeTensor(device, t.initial, {n});
  auto opt = AdamW::Create({p}, options);
  EXPECT_TRUE(opt.ok()) << opt.status();
  double worst = 0;
  for (size_t s = 0; s < t.grads.size(); ++s) {
    p.set_grad(testing::MakeTensor(device, t.grads[s], {n}));
    const absl::Status stepped = (*opt)->step();
    EXPECT_TRUE(stepped.ok()) << stepped;
    const std::vector<double> got = testing::Values(p);
    for (int64_t i = 0; i < n; ++i) {
      const double want = t.params[s][i];
      worst = std::max(worst, std::fabs(got[i] - want) /
                                  (1e-6 * (std::fabs(want) + options.lr)));
    }
  }
  return worst;
}

class AdamWGolden : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    golden_ = ReadGolden();
    ASSERT_EQ(golden_.size(), 3u) << "golden cases";
  }
  Device device() const {
    return std::string(GetParam()) == "cpu" ? testing::CpuDevice()
                                            : testing::ReferenceDevice();
  }
  std::map<std::string, Trajectory> golden_;
};

TEST_P(AdamWGolden, FollowsPyTorchStepByStep) {
  for (const auto& [name, trajectory] : golden_) {
    ASSERT_EQ(trajectory.grads.size(), 6u) << name;
    EXPECT_LE(WorstDistance(trajectory, device(), OptionsOf(name)), 1.0)
        << name;
  }
}

// The AMSGrad cases are ones where the maximum decides: without it the
// same gradients end far from PyTorch's amsgrad trajectory.
TEST_P(AdamWGolden, AmsgradCasesDependOnTheMaximum) {
  for (const char* name : {"adamw_amsgrad", "adamw_amsgrad_maximize"}) {
    AdamWOptions plain = OptionsOf(name);
    plain.amsgrad = false;
    EXPECT_GT(WorstDistance(golden_.at(name), device(), plain), 100.0) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, AdamWGolden,
                         ::testing::Values("reference", "cpu"));

// One parameter with a gradient, stepped once by an AdamW with `amsgrad`.
std::unique_ptr<AdamW> SteppedOnce(Tensor& p, bool amsgrad) {
  const Device d = testing::ReferenceDevice();
  p = testing::MakeTensor(d, {1, -2, 3}, {3});
  p.set_grad(testing::MakeTensor(d, {0.5, 0.25, -1}, {3}));
  auto opt = AdamW::Create({p}, {.lr = 0.1, .amsgrad = amsgrad});
  EXPECT_TRUE(opt.ok()) << opt.status();
  EXPECT_TRUE((*opt)->step().ok());
  return std::move(*opt);
}

std::map<std::string, Tensor> StateOf(const Optimizer& opt) {
  std::map<std::string, Tensor> state;
  for (const auto& [k, v] : opt.state_dict()) state[k] = v;
  return state;
}

// max_exp_avg_sq travels in checkpoints, and a state saved with amsgrad
// does not load into a plain AdamW (it would drop the maximum) nor the
// other way (it would restart it from 0).
TEST(AdamWAmsgradState, IsSavedAndMustMatchTheOptimizer) {
  Tensor p;
  auto amsgrad = SteppedOnce(p, true);
  const std::map<std::string, Tensor> saved = StateOf(*amsgrad);
  ASSERT_EQ(saved.count("0.max_exp_avg_sq"), 1u);
  EXPECT_EQ(testing::Values(saved.at("0.max_exp_avg_sq")),
            testing::Values(saved.at("0.exp_avg_sq")));  // After one step.

  Tensor q;
  auto plain = SteppedOnce(q, false);
  EXPECT_EQ(StateOf(*plain).count("0.max_exp_avg_sq"), 0u);
  absl::Status s = plain->load_state_dict(saved);
  EXPECT_THAT(std::string(s.message()), HasSubstr("amsgrad=false"));
  s = amsgrad->load_state_dict(StateOf(*plain));
  EXPECT_THAT(std::string(s.message()), HasSubstr("amsgrad=true"));

  // A round trip resumes the same trajectory.
  Tensor r;
  auto resumed = SteppedOnce(r, true);
  ASSERT_TRUE(resumed->load_state_dict(saved).ok());
  ASSERT_TRUE(r.set_data(p.clone().value()).ok());
  for (Tensor* t : {&p, &r}) {
    t->set_grad(testing::MakeTensor(t->device(), {0.01f, 0.02f, 0.03f}, {3}));
  }
  ASSERT_TRUE(amsgrad->step().ok());
  ASSERT_TRUE(resumed->step().ok());
  EXPECT_EQ(testing::Values(p), testing::Values(r));
}

}  // namespace
}  // namespace mixrt
