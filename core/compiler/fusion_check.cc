#include "core/compiler/fusion_check.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/compiler/group_scratch.h"
#include "mixrt/float_convert.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {
namespace {

// Deterministic values in [-1, 1) for floating inputs, written in their
// dtype; integer and bool inputs stay 0 (an index 0 is always in range).
std::vector<char> SyntheticBytes(const ValueRef& v, uint64_t seed) {
  const int64_t n = Elements(v);
  std::vector<char> bytes(n * DTypeSize(v.dtype), 0);
  uint64_t state = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int64_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float x =
        static_cast<float>(static_cast<int64_t>(state >> 40) % 2048) / 1024.0f -
        1.0f;
    switch (v.dtype) {
      case DType::kF32:
        std::memcpy(bytes.data() + 4 * i, &x, 4);
        break;
      case DType::kBF16: {
        const uint16_t b = sdk::F32ToBF16Bits(x);
        std::memcpy(bytes.data() + 2 * i, &b, 2);
        break;
      }
      case DType::kF16: {
        const uint16_t h = sdk::F32ToF16Bits(x);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
        break;
      }
      default:
        break;
    }
  }
  return bytes;
}

// The elements of a dense value as doubles (integers and bools too).
std::vector<double> AsDoubles(const std::vector<char>& bytes, DType dtype) {
  const size_t size = DTypeSize(dtype);
  std::vector<double> out(bytes.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    const char* p = bytes.data() + i * size;
    switch (dtype) {
      case DType::kF32: {
        float f;
        std::memcpy(&f, p, 4);
        out[i] = f;
        break;
      }
      case DType::kBF16: {
        uint16_t b;
        std::memcpy(&b, p, 2);
        out[i] = sdk::BF16BitsToF32(b);
        break;
      }
      case DType::kF16: {
        uint16_t h;
        std::memcpy(&h, p, 2);
        out[i] = sdk::F16BitsToF32(h);
        break;
      }
      case DType::kI32: {
        int32_t x;
        std::memcpy(&x, p, 4);
        out[i] = x;
        break;
      }
      case DType::kI64: {
        int64_t x;
        std::memcpy(&x, p, 8);
        out[i] = static_cast<double>(x);
        break;
      }
      default:
        out[i] = static_cast<unsigned char>(*p);
        break;
    }
  }
  return out;
}

// The relative tolerance (of the largest expected magnitude) one
// computation of a group may differ from another by: a few roundings of
// the lowest precision anywhere in it (a fused epilogue keeps f32 where op
// by op rounds to bf16 in between), f32 summation order otherwise.
double Tolerance(const Graph& g, const std::vector<int>& nodes) {
  double tolerance = 1e-4;
  for (int i : nodes) {
    for (const auto* refs : {&g.nodes[i].inputs, &g.nodes[i].outputs}) {
      for (const ValueRef& v : *refs) {
        if (v.dtype == DType::kBF16) tolerance = std::max(tolerance, 1.0 / 32);
        if (v.dtype == DType::kF16) tolerance = std::max(tolerance, 1.0 / 256);
      }
    }
  }
  return tolerance;
}

}  // namespace

bool ChecksFusionOf(const Backend& backend) {
  const char* env = std::getenv(kCheckFusionEnv);
  const std::string mode = env != nullptr ? absl::AsciiStrToLower(env) : "auto";
  if (mode == "on" || mode == "1" || mode == "true") return true;
  if (mode == "off" || mode == "0" || mode == "false") return false;
  const std::string& name = backend.name();
  return name != "cpu" && name != "cuda" && name != "rocm" &&
         name != "reference";
}

absl::StatusOr<std::string> CheckFusedGroup(
    const Graph& g, const std::vector<int>& nodes,
    const PluginFusedKernel& kernel, const std::vector<ValueRef>& value_refs,
    const std::vector<int>& inputs, const std::vector<int>& outputs) {
  std::vector<int> values = inputs;
  values.insert(values.end(), outputs.begin(), outputs.end());
  MIXRT_ASSIGN_OR_RETURN(const GroupScratch scratch,
                         GroupScratch::Create(g, nodes, value_refs, values));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const ValueRef& v = value_refs[inputs[k]];
    if (scratch.IsConstant(v) || !IsDense(v)) continue;  // Weights as they are.
    MIXRT_RETURN_IF_ERROR(scratch.Fill(v, SyntheticBytes(v, k + 1)));
  }
  MIXRT_RETURN_IF_ERROR(scratch.RunLaunches());
  std::vector<std::vector<char>> want;
  for (int o : outputs) {
    const ValueRef& v = value_refs[o];
    if (!IsDense(v)) {
      want.emplace_back();
      continue;
    }
    MIXRT_ASSIGN_OR_RETURN(std::vector<char> bytes, scratch.Read(v));
    want.push_back(std::move(bytes));
    // Poisoned before the kernel runs: all ones is NaN in every float
    // dtype, so a kernel that writes nothing cannot pass.
    MIXRT_RETURN_IF_ERROR(
        scratch.Fill(v, std::vector<char>(want.back().size(), '\xff')));
  }
  MIXRT_RETURN_IF_ERROR(scratch.RunKernel(kernel));
  const double tolerance = Tolerance(g, nodes);
  for (size_t k = 0; k < outputs.size(); ++k) {
    const ValueRef& v = value_refs[outputs[k]];
    if (want[k].empty()) continue;  // Strided: not compared.
    MIXRT_ASSIGN_OR_RETURN(const std::vector<char> bytes, scratch.Read(v));
    const std::vector<double> got = AsDoubles(bytes, v.dtype);
    const std::vector<double> expected = AsDoubles(want[k], v.dtype);
    double scale = 0;
    for (double e : expected) {
      if (std::isfinite(e)) scale = std::max(scale, std::fabs(e));
    }
    const bool exact = !IsFloating(v.dtype);
    for (size_t i = 0; i < got.size(); ++i) {
      const bool both_nan = std::isnan(got[i]) && std::isnan(expected[i]);
      const double allowed = exact ? 0 : tolerance * scale;
      if (both_nan || got[i] == expected[i] ||
          std::fabs(got[i] - expected[i]) <= allowed) {
        continue;
      }
      return absl::StrCat("its results differ from its launches' (value ",
                          outputs[k], ", element ", i, ": ", got[i],
                          " where they give ", expected[i], "; allowed ",
                          allowed, ")");
    }
  }
  return std::string();
}

}  // namespace mixrt::compiler
