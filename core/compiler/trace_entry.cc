#include "core/compiler/trace_entry.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace mixrt::compiler {

std::string TraceEntry::Stale() const {
  for (const std::weak_ptr<Storage>& c : constants) {
    if (c.expired()) {
      return "a tensor it read that is not an input is gone (the "
             "variable holding it was rebound or freed)";
    }
  }
  for (const std::weak_ptr<Generator::State>& g : generators) {
    if (g.expired()) {
      return "a generator it draws random numbers from is gone (the "
             "Generator was destroyed)";
    }
  }
  for (const HostGuard& g : host_guards) {
    if (!g.holds()) return absl::StrCat(g.what, " changed");
  }
  return "";
}

std::optional<std::vector<std::shared_ptr<Storage>>> TraceEntry::Pin() const {
  std::vector<std::shared_ptr<Storage>> pins;
  for (const std::weak_ptr<Storage>& c : constants) {
    pins.push_back(c.lock());
    if (pins.back() == nullptr) return std::nullopt;
  }
  return pins;
}

void TraceEntry::FindConstants() {
  constants.clear();
  generators.clear();
  if (plan != nullptr) {
    for (const RandomSource& r : plan->graph().random_sources) {
      generators.push_back(r.state);
    }
  }
  for (const auto& p : {plan, backward}) {
    if (p == nullptr) continue;
    for (const StorageSlot& slot : p->graph().slots) {
      if (slot.kind == StorageSlot::Kind::kConstant) {
        constants.push_back(slot.constant);
      }
    }
  }
}

void TraceEntry::SetSignature(std::vector<Guard> signature,
                              const std::vector<Tensor>& inputs) {
  guards = std::move(signature);
  input_shapes.clear();
  for (const Tensor& t : inputs) {
    input_shapes.push_back(t.defined() ? t.shape() : Shape{});
  }
}

bool HostGuardsHold(const std::vector<HostGuard>& guards) {
  for (const HostGuard& g : guards) {
    if (!g.holds()) return false;
  }
  return true;
}

}  // namespace mixrt::compiler
