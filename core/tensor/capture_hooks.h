// What a tracer sees of eager execution on this thread: each kernel launch,
// each storage allocated, each host write into a tensor and each host read
// of tensor data. The compiler (core/compiler, a layer above) installs an
// implementation for the duration of a capture; this layer only calls
// through the interface, so nothing here depends on the compiler.
#ifndef MIXRT_CORE_TENSOR_CAPTURE_HOOKS_H_
#define MIXRT_CORE_TENSOR_CAPTURE_HOOKS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/types/span.h"
#include "core/tensor/generator.h"
#include "core/tensor/storage.h"
#include "core/tensor/tensor.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

// What a trace assumed about a value outside its tensors. `identity`
// tells two reads of one value apart from reads of two (a trace keeps one
// guard per identity); `what` names it and the value read, for Explain.
struct HostGuard {
  const void* identity = nullptr;
  std::string what;
  std::function<bool()> holds;
};

class CaptureHooks {
 public:
  virtual ~CaptureHooks() = default;
  // After a launch succeeded, with the tensors the backend saw.
  virtual void OnLaunch(MixrtOp op, absl::Span<const Tensor> inputs,
                        absl::Span<const Tensor> outputs,
                        const void* attrs) = 0;
  virtual void OnAllocate(const std::shared_ptr<Storage>& storage) = 0;
  // `bytes` of host data copied to the start of dst's view.
  virtual void OnHostWrite(const Tensor& dst, const void* src,
                           size_t bytes) = 0;
  // The `bytes` of dense tensor `src` copied to the host (at `data`): what
  // the traced code does next may depend on them.
  virtual void OnHostRead(const Tensor& src, const void* data,
                          size_t bytes) = 0;
  // Work a graph of launches cannot replay faithfully: `what` says which
  // (a backward inside the traced code sets .grad tensors the graph does
  // not own; an optimizer step bakes its host-side step count into its
  // launches).
  virtual void OnUntraceable(const char* what) = 0;
  // A host value the traced code read and may have branched on (a
  // module's training flag, a GuardedValue): a replay is valid only while
  // the guard holds.
  virtual void OnHostGuard(const HostGuard& guard) = 0;
  // Philox blocks [offset, offset + blocks) handed out under `seed` by the
  // generator whose state `source` is.
  virtual void OnRandomDraw(const std::shared_ptr<Generator::State>& source,
                            uint64_t seed, uint64_t offset,
                            uint64_t blocks) = 0;
  // A leaf tensor an op took as an input (autograd sees every one): a
  // replay assumes it still does or does not require grad.
  virtual void OnLeafRead(const Tensor& leaf) = 0;
};

// Reports a host value the traced code read to this thread's hooks, if
// any (cheap when nothing is being captured).
void ReportHostGuard(const HostGuard& guard);

// Reports `what` to this thread's hooks, if any.
void ReportUntraceable(const char* what);

// This thread's hooks, or null when nothing is being captured.
CaptureHooks* ActiveCaptureHooks();

// Installs hooks for its scope (the previous ones come back after).
class ScopedCaptureHooks {
 public:
  explicit ScopedCaptureHooks(CaptureHooks* hooks);
  ~ScopedCaptureHooks();
  ScopedCaptureHooks(const ScopedCaptureHooks&) = delete;
  ScopedCaptureHooks& operator=(const ScopedCaptureHooks&) = delete;

 private:
  CaptureHooks* previous_;
};

}  // namespace mixrt

#endif  // MIXRT_CORE_TENSOR_CAPTURE_HOOKS_H_
