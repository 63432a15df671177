// Thread-local gradient recording state, like torch.no_grad and
// torch.inference_mode. Guards restore the previous state when they go out
// of scope, so they nest.
#ifndef MIXRT_CORE_AUTOGRAD_GRAD_MODE_H_
#define MIXRT_CORE_AUTOGRAD_GRAD_MODE_H_

namespace mixrt {

bool GradModeEnabled();
bool InferenceModeEnabled();

class NoGradGuard {
 public:
  NoGradGuard();
  ~NoGradGuard();
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool previous_;
};

// Gradient recording on again inside a no_grad region, as torch.enable_grad
// (gradient checkpointing recomputes its forward this way during backward).
class EnableGradGuard {
 public:
  EnableGradGuard();
  ~EnableGradGuard();
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool previous_;
};

// No gradient recording and no autocast weight cache, as
// torch.inference_mode.
class InferenceModeGuard {
 public:
  InferenceModeGuard();
  ~InferenceModeGuard();
  InferenceModeGuard(const InferenceModeGuard&) = delete;
  InferenceModeGuard& operator=(const InferenceModeGuard&) = delete;

 private:
  bool previous_grad_;
  bool previous_inference_;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_AUTOGRAD_GRAD_MODE_H_
