// Kernel graphs (ABI 1.1) that run two small independent steps at once:
// inter-op parallelism for graphs of small kernels, which run on one
// thread each (their work is below what forking OpenMP threads repays)
// and so left the second core idle. A backward's two products per layer
// (the input's gradient and the weight's) need nothing from each other.
// The second step goes to a helper thread that spins a while after each
// pair and then sleeps; if it has not taken the step by the time the
// caller finished its own, the caller runs it: a pair never waits for a
// thread to wake. MIXRT_CPU_STEP_PAIRS=0 runs every step in order.
#ifndef MIXRT_BACKENDS_CPU_STEP_PAIRS_H_
#define MIXRT_BACKENDS_CPU_STEP_PAIRS_H_

#include <memory>
#include <vector>

#include "plugins/sdk/kernel_graph.h"

namespace mixrt::cpu {

class PairedStepGraph : public sdk::KernelGraph {
 public:
  // `steps` itself when no two neighbouring steps pair.
  static std::unique_ptr<sdk::KernelGraph> Make(
      std::unique_ptr<sdk::StepGraph> steps);

  absl::Status Run(absl::Span<void* const> buffers) override;
  int num_buffers() const override { return steps_->num_buffers(); }
  int pairs() const;

 private:
  explicit PairedStepGraph(std::unique_ptr<sdk::StepGraph> steps)
      : steps_(std::move(steps)) {}

  std::unique_ptr<sdk::StepGraph> steps_;
  std::vector<bool> paired_with_next_;  // Per step.
};

// Whether steps a and b of `graph` touch memory in a way that orders them
// (one writes bytes the other reads or writes).
bool StepsConflict(const sdk::StepGraph& graph, int a, int b);

}  // namespace mixrt::cpu

#endif  // MIXRT_BACKENDS_CPU_STEP_PAIRS_H_
