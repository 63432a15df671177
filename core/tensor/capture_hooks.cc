#include "core/tensor/capture_hooks.h"

namespace mixrt {
namespace {

thread_local CaptureHooks* t_hooks = nullptr;

}  // namespace

CaptureHooks* ActiveCaptureHooks() { return t_hooks; }

void ReportUntraceable(const char* what) {
  if (t_hooks != nullptr) t_hooks->OnUntraceable(what);
}

void ReportHostGuard(const HostGuard& guard) {
  if (t_hooks != nullptr) t_hooks->OnHostGuard(guard);
}

ScopedCaptureHooks::ScopedCaptureHooks(CaptureHooks* hooks)
    : previous_(t_hooks) {
  t_hooks = hooks;
}

ScopedCaptureHooks::~ScopedCaptureHooks() { t_hooks = previous_; }

}  // namespace mixrt
