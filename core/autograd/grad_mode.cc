#include "core/autograd/grad_mode.h"

namespace mixrt {
namespace {

thread_local bool g_grad_enabled = true;
thread_local bool g_inference_mode = false;

}  // namespace

bool GradModeEnabled() { return g_grad_enabled; }
bool InferenceModeEnabled() { return g_inference_mode; }

NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) {
  g_grad_enabled = false;
}
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

EnableGradGuard::EnableGradGuard() : previous_(g_grad_enabled) {
  g_grad_enabled = true;
}
EnableGradGuard::~EnableGradGuard() { g_grad_enabled = previous_; }

InferenceModeGuard::InferenceModeGuard()
    : previous_grad_(g_grad_enabled), previous_inference_(g_inference_mode) {
  g_grad_enabled = false;
  g_inference_mode = true;
}
InferenceModeGuard::~InferenceModeGuard() {
  g_grad_enabled = previous_grad_;
  g_inference_mode = previous_inference_;
}

}  // namespace mixrt
