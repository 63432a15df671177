// Parameter groups (PyTorch's param_groups): each group steps with its own
// lr and weight decay, as a separate optimizer with those options would,
// bit for bit; schedules move every group from its own base.
#include <cmath>
#include <memory>
#include <vector>

#include "core/optim/lr_scheduler.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/op_test_util.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

using ::testing::HasSubstr;
using testing::MakeTensor;
using testing::Values;

struct Params {
  std::vector<Tensor> a, b;  // Group 0, group 1.
};

// Parameters with fixed values and gradients.
Params MakeParams(uint64_t seed) {
  const Device d = testing::ReferenceDevice();
  Params p;
  for (int i = 0; i < 3; ++i) {
    Tensor t = MakeTensor(d, testing::RandomValues(6, seed + i), {2, 3});
    t.set_grad(MakeTensor(d, testing::RandomValues(6, seed + 10 + i), {2, 3}));
    (i < 2 ? p.a : p.b).push_back(t);
  }
  return p;
}

void ResetGrads(const Params& p, uint64_t seed) {
  const Device d = testing::ReferenceDevice();
  for (int i = 0; i < 3; ++i) {
    const Tensor& t = i < 2 ? p.a[i] : p.b[0];
    Tensor copy = t;
    copy.set_grad(
        MakeTensor(d, testing::RandomValues(6, seed + 10 + i), {2, 3}));
  }
}

std::vector<std::vector<double>> AllValues(const Params& p) {
  std::vector<std::vector<double>> v;
  for (const Tensor& t : p.a) v.push_back(Values(t));
  for (const Tensor& t : p.b) v.push_back(Values(t));
  return v;
}

TEST(ParamGroups, AdamWGroupsStepAsSeparateOptimizers) {
  Params grouped = MakeParams(1), separate = MakeParams(1);
  AdamW opt({{grouped.a, {}, {}}, {grouped.b, 0.05, 0.0}},
            {.lr = 0.01, .weight_decay = 0.1});
  AdamW first(separate.a, {.lr = 0.01, .weight_decay = 0.1});
  AdamW second(separate.b, {.lr = 0.05, .weight_decay = 0.0});
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(opt.step().ok());
    ASSERT_TRUE(first.step().ok());
    ASSERT_TRUE(second.step().ok());
    ResetGrads(grouped, 100 + step);
    ResetGrads(separate, 100 + step);
  }
  EXPECT_EQ(AllValues(grouped), AllValues(separate));
  EXPECT_EQ(opt.num_param_groups(), 2u);
  EXPECT_EQ(opt.group_lr(1), 0.05);
  EXPECT_EQ(opt.group_weight_decay(0), 0.1);
  EXPECT_EQ(opt.group_weight_decay(1), 0.0);
  EXPECT_EQ(opt.params().size(), 3u);
  EXPECT_EQ(opt.group_params(1).size(), 1u);
}

TEST(ParamGroups, SgdGroupsStepAsSeparateOptimizers) {
  Params grouped = MakeParams(7), separate = MakeParams(7);
  SGD opt({{grouped.a, 0.2, {}}, {grouped.b, {}, 0.01}},
          {.lr = 0.1, .momentum = 0.9});
  SGD first(separate.a, {.lr = 0.2, .momentum = 0.9});
  SGD second(separate.b, {.lr = 0.1, .momentum = 0.9, .weight_decay = 0.01});
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(opt.step().ok());
    ASSERT_TRUE(first.step().ok());
    ASSERT_TRUE(second.step().ok());
    ResetGrads(grouped, 200 + step);
    ResetGrads(separate, 200 + step);
  }
  EXPECT_EQ(AllValues(grouped), AllValues(separate));
}

TEST(ParamGroups, RefusesWhatPyTorchRefuses) {
  Params p = MakeParams(3);
  auto twice = AdamW::Create({{p.a, {}, {}}, {{p.a[0]}, {}, {}}}, {});
  EXPECT_THAT(twice.status().message(),
              HasSubstr("more than one parameter group"));
  auto bad_lr = SGD::Create({{p.a, -1.0, {}}}, {});
  EXPECT_THAT(bad_lr.status().message(), HasSubstr("Invalid learning rate"));
  auto bad_wd = SGD::Create({{p.a, {}, std::nan("")}}, {});
  EXPECT_THAT(bad_wd.status().message(), HasSubstr("weight_decay"));
  // Constructed directly, the error waits for step(), which changes nothing.
  const auto before = AllValues(p);
  SGD direct({{p.a, {}, {}}, {p.a, {}, {}}}, {.lr = 0.1});
  EXPECT_THAT(direct.step().message(), HasSubstr("more than one"));
  EXPECT_EQ(AllValues(p), before);
  EXPECT_EQ(direct.set_group_lr(5, 0.1).code(), absl::StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace mixrt
