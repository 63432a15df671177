// GradScaler trajectories equal PyTorch's bit for bit: each case of
// tests/amp/golden/grad_scaler_trajectories.tsv (written by
// tools/golden/grad_scaler_trajectories.py from torch.amp.GradScaler("cpu"))
// is replayed with the same options and the same finite/inf/NaN pattern, and
// after every update() the scale's f32 bits, the growth tracker and the skip
// decision must match.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "core/amp/grad_scaler/grad_scaler.h"
#include "core/functional/ops.h"
#include "core/optim/optimizer.h"
#include "core/tensor/factories.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt {
namespace {

struct Step {
  char grad;  // F finite, I an inf, N a NaN.
  uint32_t scale_bits;
  int growth_tracker;
  bool skipped;
};

struct Case {
  GradScalerOptions options;
  std::vector<Step> steps;
};

std::map<std::string, Case> ReadGolden() {
  std::ifstream in(
      testing::RunfilePath("tests/amp/golden/grad_scaler_trajectories.tsv"));
  std::map<std::string, Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (line.rfind("# ", 0) == 0 && f.size() == 2 && f[0] != "# case") {
      // "# name\tinit_scale growth backoff interval"
      std::vector<std::string> o = absl::StrSplit(f[1], ' ');
      GradScalerOptions opt;
      EXPECT_TRUE(o.size() == 4 && absl::SimpleAtod(o[0], &opt.init_scale) &&
                  absl::SimpleAtod(o[1], &opt.growth_factor) &&
                  absl::SimpleAtod(o[2], &opt.backoff_factor) &&
                  absl::SimpleAtoi(o[3], &opt.growth_interval))
          << line;
      cases[f[0].substr(2)].options = opt;
      continue;
    }
    if (line.empty() || line[0] == '#' || f.size() != 6 || f[0] == "case") {
      continue;
    }
    Step s;
    s.grad = f[2][0];
    s.scale_bits = static_cast<uint32_t>(std::stoul(f[3], nullptr, 16));
    s.growth_tracker = std::stoi(f[4]);
    s.skipped = f[5] == "1";
    cases[f[0]].steps.push_back(s);
  }
  return cases;
}

uint32_t F32Bits(double scale) {
  const float f = static_cast<float>(scale);  // Exact: the scale is f32.
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

// The pattern's step in mixrt as the script does it in PyTorch: loss =
// sum(w * arange(4)), scaled, backward, then one gradient element made
// inf or NaN, step, update.
void Replay(const std::string& name, const Case& c) {
  const Device d = testing::ReferenceDevice();
  Tensor w = *ones({4}, DType::kF32, d);
  ASSERT_TRUE(w.set_requires_grad(true).ok());
  SGD opt({w}, {.lr = 0.1});
  GradScaler scaler(d, c.options);
  const Tensor x = *arange(0, 4, 1, DType::kF32, d);
  for (size_t i = 0; i < c.steps.size(); ++i) {
    const Step& want = c.steps[i];
    opt.zero_grad();
    auto loss = sum(*mul(w, x));
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_TRUE(scaler.scale(*loss)->backward().ok());
    if (want.grad != 'F') {
      std::vector<float> g = *w.grad().to_float_vector();
      g[want.grad == 'I' ? 1 : 2] = want.grad == 'I' ? INFINITY : NAN;
      w.set_grad(*from_floats(g, {4}, DType::kF32, d));
    }
    ASSERT_TRUE(scaler.step(opt).ok());
    ASSERT_TRUE(scaler.update().ok());
    const std::string where = name + " step " + std::to_string(i);
    ASSERT_EQ(F32Bits(*scaler.get_scale()), want.scale_bits)
        << where << ": scale " << *scaler.get_scale();
    ASSERT_EQ(*scaler.get_growth_tracker(), want.growth_tracker) << where;
    ASSERT_EQ(*scaler.last_step_skipped(), want.skipped) << where;
  }
}

TEST(GradScalerGolden, TrajectoriesMatchPyTorchBitForBit) {
  const std::map<std::string, Case> cases = ReadGolden();
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& [name, c] : cases) {
    ASSERT_FALSE(c.steps.empty()) << name;
    Replay(name, c);
  }
  // The non-default case must really use non-power-of-two factors.
  EXPECT_EQ(cases.at("nonpow2").options.growth_factor, 1.1);
  EXPECT_EQ(cases.at("nonpow2").options.backoff_factor, 0.3);
  EXPECT_EQ(cases.at("nonpow2").options.growth_interval, 3);
}

}  // namespace
}  // namespace mixrt
