// One trace of a compiled function (torch.compile's cache entry): the
// guards it was traced under, its plans (forward, and the backward of a
// training signature), what else the trace read (host guards) and the
// memory its graphs read without owning it (constants). A replay needs
// every guard to hold and every constant to be there.
#ifndef MIXRT_CORE_COMPILER_TRACE_ENTRY_H_
#define MIXRT_CORE_COMPILER_TRACE_ENTRY_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/compiler/call_signature.h"
#include "core/compiler/capture.h"
#include "core/compiler/plan.h"
#include "core/tensor/capture_hooks.h"
#include "core/tensor/shape.h"
#include "core/tensor/tensor.h"

namespace mixrt::compiler {

struct TraceEntry {
  std::vector<Guard> guards;
  std::vector<Shape> input_shapes;
  std::shared_ptr<Plan> plan;  // Null: runs eagerly.
  std::string eager_reason;
  // Training signatures: the compiled backward and where its gradients go.
  std::shared_ptr<Plan> backward;
  TrainingGraphs training;  // Its `backward` graph moved out.
  // Module modes, GuardedValues, leaves' requires_grad the trace read.
  std::vector<HostGuard> host_guards;
  std::vector<std::weak_ptr<Storage>> constants;
  // The generators its forward draws from (random_draws.h).
  std::vector<std::weak_ptr<Generator::State>> generators;

  // Why this entry cannot serve a call now, or "".
  std::string Stale() const;
  // Holds the constants for a replay; empty when one is gone.
  std::optional<std::vector<std::shared_ptr<Storage>>> Pin() const;
  // `constants` from the plans' constant slots, `generators` from the
  // forward's random sources.
  void FindConstants();
  // The traced graphs (the plans keep them), for generalizing over a
  // dynamic size and for sharing with other instances.
  const Graph& forward_graph() const { return plan->graph(); }
  const Graph& backward_graph() const { return backward->graph(); }
  void SetSignature(std::vector<Guard> signature,
                    const std::vector<Tensor>& inputs);
};

bool HostGuardsHold(const std::vector<HostGuard>& guards);

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_TRACE_ENTRY_H_
