#include "plugins/conformance/conformance_harness.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/tensor/factories.h"
#include "core/tensor/op_fallback.h"
#include "gtest/gtest.h"
#include "plugins/sdk/philox.h"

namespace mixrt::conformance {

double UnitRoundoff(DType dtype) {
  switch (dtype) {
    case DType::kF16:
      return std::ldexp(1.0, -11);
    case DType::kBF16:
      return std::ldexp(1.0, -8);
    default:
      return std::ldexp(1.0, -24);
  }
}

Tolerance ExactTolerance(DType dtype) {
  // One unit in the last place; the absolute floor covers subnormals.
  const double floor = dtype == DType::kF16 ? std::ldexp(1.0, -24) : 1e-38;
  return {2 * UnitRoundoff(dtype), floor, {}};
}

Tolerance TranscendentalTolerance(DType dtype) {
  Tolerance t = ExactTolerance(dtype);
  t.rtol += 32 * UnitRoundoff(DType::kF32);
  t.atol = std::max(t.atol, 1e-30);
  return t;
}

std::vector<float> DrawValues(const InputSpec& spec, uint64_t seed) {
  int64_t n = 1;
  for (int64_t s : spec.shape) n *= s;
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<uint64_t>(i);
    const double z = sdk::PhiloxNormal(seed, 0, u, 0, 1);
    switch (spec.values) {
      case Values::kNormal:
        v[i] = static_cast<float>(z);
        break;
      case Values::kPositive:
        v[i] = static_cast<float>(std::fabs(z) + 0.05);
        break;
      case Values::kWide: {
        const double e = sdk::PhiloxUniform(seed, 1u << 20, u, -30, 30);
        v[i] = static_cast<float>((z < 0 ? -1 : 1) * std::pow(10.0, e));
        break;
      }
      case Values::kSpecial: {
        static constexpr float kSpecials[] = {NAN,   INFINITY, -INFINITY, 0.0f,
                                              -0.0f, 1.0f,     -1.0f};
        v[i] = i % 3 == 0 ? kSpecials[(i / 3) % 7] : static_cast<float>(z);
        break;
      }
      case Values::kLabels:
        v[i] = static_cast<float>(
            static_cast<int64_t>(sdk::PhiloxUniform(seed, 0, u, 0, 1) *
                                 spec.label_classes) %
            spec.label_classes);
        break;
    }
  }
  return v;
}

namespace {

bool time_ops = false;

// Microseconds per call of `op` on `inputs` (synchronized): the best of
// three, so a descheduled run does not count.
double BestMicroseconds(const OpFn& op, const std::vector<Tensor>& inputs,
                        const Device& device) {
  double best = -1;
  for (int i = 0; i < 3; ++i) {
    const auto start = std::chrono::steady_clock::now();
    if (!op(inputs).ok() ||
        !device.backend()->Synchronize(device.index()).ok()) {
      return -1;
    }
    const double us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    if (best < 0 || us < best) best = us;
  }
  return best;
}

absl::StatusOr<Tensor> Build(const InputSpec& spec,
                             const std::vector<float>& values,
                             const Device& device) {
  std::vector<int64_t> shape = spec.shape;
  if (spec.transposed && shape.size() >= 2) {
    std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  }
  absl::StatusOr<Tensor> t =
      spec.values == Values::kLabels
          ? from_ints(std::vector<int64_t>(values.begin(), values.end()), shape,
                      spec.dtype, device)
          : from_floats(values, shape, spec.dtype, device);
  if (!t.ok() || !spec.transposed || shape.size() < 2) return t;
  const int64_t nd = static_cast<int64_t>(shape.size());
  return t->transpose(nd - 1, nd - 2);
}

}  // namespace

void SetTimeOps(bool on) { time_ops = on; }

void CompareOp(const Devices& devices, const std::vector<InputSpec>& inputs,
               const OpFn& op, const ToleranceFn& tolerance, uint64_t seed) {
  std::vector<Tensor> on_plugin, on_reference;
  std::vector<std::vector<double>> host_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> values = DrawValues(inputs[i], seed + 101 * i);
    auto ref = Build(inputs[i], values, devices.reference);
    ASSERT_TRUE(ref.ok()) << ref.status();
    // The plugin gets the reference's rounded bits, so inputs are identical.
    auto plug = ref->to(devices.plugin);
    ASSERT_TRUE(plug.ok()) << plug.status();
    on_reference.push_back(*ref);
    on_plugin.push_back(*plug);
    auto host = ref->to_double_vector();
    ASSERT_TRUE(host.ok());
    host_inputs.push_back(*host);
  }
  auto want = op(on_reference);
  ASSERT_TRUE(want.ok()) << "reference: " << want.status();
  auto got = op(on_plugin);
  // The host refused to launch an op the plugin declares it does not run:
  // not a failure, the plugin said so (a claimed op that errors fails).
  if (!got.ok() && IsDeclaredUnsupported(got.status())) {
    GTEST_SKIP() << kNotImplemented << got.status().message();
  }
  ASSERT_TRUE(got.ok()) << "plugin: " << got.status();
  ASSERT_EQ(got->size(), want->size());
  double worst_of_tolerance = 0, worst_absolute = 0;
  for (size_t k = 0; k < want->size(); ++k) {
    const Tensor& g = (*got)[k];
    const Tensor& w = (*want)[k];
    ASSERT_EQ(g.shape(), w.shape()) << "output " << k;
    ASSERT_EQ(g.dtype(), w.dtype()) << "output " << k;
    auto gv = g.to_double_vector();
    auto wv = w.to_double_vector();
    ASSERT_TRUE(gv.ok() && wv.ok());
    const Tolerance tol = tolerance(static_cast<int>(k), host_inputs);
    int reported = 0;
    for (size_t i = 0; i < wv->size(); ++i) {
      const double a = (*gv)[i], b = (*wv)[i];
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b) continue;
      const double allowed = tol.atol + tol.rtol * std::fabs(b) +
                             (tol.extra.empty() ? 0.0 : tol.extra[i]);
      const double diff = std::fabs(a - b);  // NaN or inf: a failure below.
      worst_absolute =
          std::isfinite(diff) ? std::max(worst_absolute, diff) : INFINITY;
      worst_of_tolerance = std::max(
          worst_of_tolerance,
          allowed > 0 && std::isfinite(diff) ? diff / allowed : INFINITY);
      if (!(std::fabs(a - b) <= allowed)) {
        ADD_FAILURE() << "output " << k << " element " << i << ": plugin " << a
                      << ", reference " << b << " (|diff| " << std::fabs(a - b)
                      << " > allowed " << allowed << ")";
        if (++reported == 5) break;
      }
    }
  }
  ::testing::Test::RecordProperty(kWorstErrorOfTolerance,
                                  absl::StrCat(worst_of_tolerance));
  ::testing::Test::RecordProperty(kWorstAbsoluteError,
                                  absl::StrCat(worst_absolute));
  if (time_ops) {
    ::testing::Test::RecordProperty(
        kPluginMicroseconds,
        absl::StrCat(BestMicroseconds(op, on_plugin, devices.plugin)));
    ::testing::Test::RecordProperty(
        kReferenceMicroseconds,
        absl::StrCat(BestMicroseconds(op, on_reference, devices.reference)));
  }
}

}  // namespace mixrt::conformance
