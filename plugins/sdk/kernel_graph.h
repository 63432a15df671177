// Kernel graphs (ABI 1.1) as the SDK keeps them: the launches of a graph
// checked once at creation and held as calls whose tensors' data is set
// from the run's buffers, so a run costs the kernels and nothing of
// kernel_launch's checks, argument copies or C boundary per step.
#ifndef MIXRT_PLUGINS_SDK_KERNEL_GRAPH_H_
#define MIXRT_PLUGINS_SDK_KERNEL_GRAPH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/span.h"
#include "plugins/sdk/status.h"

namespace mixrt::sdk {

class Plugin;
struct KernelCall;

// `status` (an error of step `step`) marked with the step's index, which
// kernel_graph_run hands the host in failed_step (ABI 1.1): a KernelGraph
// of a plugin's own returns its step errors through this.
Status StepFailed(int step, Status status);
// The step StepFailed marked `status` with, or -1.
int FailedStepOf(const Status& status);

class KernelGraph {
 public:
  virtual ~KernelGraph() = default;
  // `buffers`: the run's base addresses, one per graph buffer. An error of
  // one step comes from StepFailed.
  virtual Status Run(Span<void* const> buffers) = 0;
  virtual int num_buffers() const = 0;
};

// The steps of one graph, owned: each a call whose descriptors, shapes,
// strides and attribute struct are copies, run through Plugin::Launch.
class StepGraph : public KernelGraph {
 public:
  // Checks every step as kernel_launch checks a launch (except the data,
  // given per run) and copies it. An attribute struct with an extension
  // chain cannot be copied: UNIMPLEMENTED (the host launches one by one).
  static StatusOr<std::unique_ptr<StepGraph>> Create(
      Plugin* plugin, int device, int num_buffers,
      Span<const MixrtKernelGraphStep> steps);
  ~StepGraph() override;

  Status Run(Span<void* const> buffers) override;
  int num_buffers() const override { return num_buffers_; }
  int num_steps() const { return static_cast<int>(steps_.size()); }

 private:
  struct Step;
  StepGraph(Plugin* plugin, int num_buffers);

  Plugin* plugin_;
  int num_buffers_;
  std::vector<std::unique_ptr<Step>> steps_;
};

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_KERNEL_GRAPH_H_
