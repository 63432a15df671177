// When a device graph captured from a kernel graph's steps (ABI 1.1) may be
// replayed. A captured CUDA graph bakes in every tensor address, so it
// replays only for the buffer bases it was captured with; other bases
// capture again (and update the instantiated graph). A capture that failed
// once (a step that synchronizes, or allocates outside stream order) and
// bases that keep changing (more captures than replays after a few runs)
// make the graph run its steps as launches from then on, with the reason.
// Host logic only: tested without a GPU (tests/gpu:graph_replay_test).
#ifndef MIXRT_BACKENDS_GPU_GRAPH_REPLAY_H_
#define MIXRT_BACKENDS_GPU_GRAPH_REPLAY_H_

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace mixrt::gpu {

class GraphReplay {
 public:
  enum class Action { kReplay, kCapture, kLaunch };
  // Captures allowed before bases that keep changing stop capturing.
  static constexpr int kCapturesBeforeJudging = 8;

  Action Next(absl::Span<void* const> buffers) const {
    if (!launch_reason_.empty()) return Action::kLaunch;
    if (captured_ && absl::MakeConstSpan(bases_) == buffers) {
      return Action::kReplay;
    }
    return Action::kCapture;
  }
  void Replayed() { ++replays_; }
  void Captured(absl::Span<void* const> buffers) {
    bases_.assign(buffers.begin(), buffers.end());
    captured_ = true;
    ++captures_;
    if (captures_ > kCapturesBeforeJudging && captures_ > replays_) {
      launch_reason_ = absl::StrCat(
          "buffer addresses changed on ", captures_, " of ",
          captures_ + replays_, " runs: capturing costs more than it saves");
    }
  }
  void CaptureFailed(std::string reason) {
    launch_reason_ = absl::StrCat("capture failed: ", reason);
    captured_ = false;
  }
  // Why the steps run as launches; empty while graphs are used.
  const std::string& launch_reason() const { return launch_reason_; }
  int captures() const { return captures_; }
  int replays() const { return replays_; }

 private:
  std::vector<void*> bases_;
  bool captured_ = false;
  int captures_ = 0, replays_ = 0;
  std::string launch_reason_;
};

}  // namespace mixrt::gpu

#endif  // MIXRT_BACKENDS_GPU_GRAPH_REPLAY_H_
