#include "core/compiler/call_signature.h"

#include "absl/strings/str_cat.h"
#include "core/amp/autocast/autocast.h"
#include "core/autograd/grad_mode.h"
#include "core/plugin/backend.h"
#include "core/tensor/shape.h"

namespace mixrt::compiler {
namespace {

// The first input before input i viewing its memory (-1 for none): inputs
// that share memory were one slot in the trace.
int FirstAlias(const std::vector<Tensor>& inputs, size_t i) {
  for (size_t j = 0; j < i; ++j) {
    if (inputs[j].defined() && inputs[j].shares_storage_with(inputs[i])) {
      return static_cast<int>(j);
    }
  }
  return -1;
}

// One value of a packed key.
void Append(std::string* key, int64_t v) {
  key->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

}  // namespace

std::vector<Guard> GuardsFor(const std::vector<Tensor>& inputs) {
  std::vector<Guard> g;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const std::string in = absl::StrCat("input ", i, " ");
    if (!t.defined()) {
      g.push_back({in + "defined", "no"});
      continue;
    }
    g.push_back({in + "dtype", std::string(DTypeName(t.dtype()))});
    g.push_back({in + "device", t.device().ToString()});
    g.push_back({in + "shape", ShapeToString(t.shape())});
    g.push_back({in + "strides", ShapeToString(t.strides())});
    g.push_back({in + "requires_grad", t.requires_grad() ? "yes" : "no"});
    g.push_back(
        {in + "shares memory with input", absl::StrCat(FirstAlias(inputs, i))});
  }
  g.push_back({"grad mode", GradModeEnabled() ? "on" : "off"});
  g.push_back({"inference mode", InferenceModeEnabled() ? "on" : "off"});
  g.push_back({"autocast state", AutocastStateKey()});
  g.push_back({"MIXRT_DISABLE_AMP", AmpGloballyDisabled() ? "on" : "off"});
  return g;
}

// With `dynamic`, the listed (input, dim) sizes are left out, and the
// strides of an input holding one are its contiguity (they depend on it).
// With `stable`, backends are named, not addressed: the same in every
// process (for the compile cache).
std::string SignatureKey(const std::vector<Tensor>& inputs,
                         const std::vector<std::pair<int, int>>* dynamic,
                         bool stable) {
  std::string key;
  key.reserve(64 + inputs.size() * 128);
  Append(&key, static_cast<int64_t>(inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined()) {
      Append(&key, -1);
      continue;
    }
    Append(&key, static_cast<int64_t>(t.dtype()));
    if (stable) {
      key += t.device().backend()->name() + "|";
    } else {
      Append(&key, reinterpret_cast<intptr_t>(t.device().backend()));
    }
    Append(&key, t.device().index());
    Append(&key, t.ndim());
    bool symbolic = false;
    for (int d = 0; d < t.ndim(); ++d) {
      bool masked = false;
      if (dynamic != nullptr) {
        for (const auto& [i2, d2] : *dynamic) {
          masked |= i2 == static_cast<int>(i) && d2 == d;
        }
      }
      symbolic |= masked;
      Append(&key, masked ? -2 : t.shape()[d]);
    }
    if (symbolic) {
      Append(&key, t.is_contiguous() ? -3 : -4);
      if (!t.is_contiguous()) {
        for (int64_t s : t.strides()) Append(&key, s);
      }
    } else {
      for (int64_t s : t.strides()) Append(&key, s);
    }
    Append(&key, t.requires_grad());
    Append(&key, FirstAlias(inputs, i));
  }
  Append(&key, GradModeEnabled() * 2 + InferenceModeEnabled());
  Append(&key, AmpGloballyDisabled());
  key += AutocastStateKey();
  return key;
}

// The first guard of `now` that differs from `before`, for the log.
std::string FirstGuardDifference(const std::vector<Guard>& before,
                                 const std::vector<Guard>& now) {
  for (size_t i = 0; i < now.size(); ++i) {
    if (i >= before.size() || before[i].name != now[i].name) {
      return absl::StrCat(now[i].name, " (not in the previous signature)");
    }
    if (before[i].value != now[i].value) {
      return absl::StrCat(now[i].name, " changed from ", before[i].value,
                          " to ", now[i].value);
    }
  }
  return "the number of inputs changed";
}

}  // namespace mixrt::compiler
