#include "core/plugin/plugin_profiling.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace mixrt {
namespace {

// -1: not read yet; 0 off; 1 on.
std::atomic<int> profiling{-1};
std::atomic<uint64_t> next_range_id{1};

}  // namespace

bool PluginProfilingEnabled() {
  int on = profiling.load(std::memory_order_relaxed);
  if (on < 0) {
    const char* env = std::getenv(kPluginProfilingEnv);
    on = env != nullptr && std::strcmp(env, "1") == 0 ? 1 : 0;
    int unread = -1;
    // A SetPluginProfiling that raced ahead wins.
    if (!profiling.compare_exchange_strong(unread, on)) on = unread;
  }
  return on == 1;
}

void SetPluginProfiling(bool on) { profiling.store(on ? 1 : 0); }

uint64_t NextProfilerRangeId() {
  return next_range_id.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace mixrt
