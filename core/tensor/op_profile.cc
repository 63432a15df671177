#include "core/tensor/op_profile.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"

namespace mixrt {
namespace {

struct Totals {
  int64_t calls = 0;
  double seconds = 0;
};

struct Profile {
  absl::Mutex mu;
  absl::flat_hash_map<std::string, Totals> totals ABSL_GUARDED_BY(mu);
};

Profile& GetProfile() {
  static Profile* profile = new Profile();  // Outlives the atexit print.
  return *profile;
}

bool EnvAsksForProfile() {
  const char* env = std::getenv("MIXRT_PROFILE_OPS");
  return env != nullptr && std::strcmp(env, "") != 0 &&
         std::strcmp(env, "0") != 0;
}

void PrintAtExit() { std::fputs(OpProfileTable().c_str(), stderr); }

std::atomic<bool>& Enabled() {
  static std::atomic<bool> enabled = [] {
    if (!EnvAsksForProfile()) return false;
    std::atexit(PrintAtExit);
    return true;
  }();
  return enabled;
}

}  // namespace

bool OpProfileEnabled() { return Enabled().load(std::memory_order_relaxed); }

void EnableOpProfile(bool enabled) { Enabled().store(enabled); }

void ResetOpProfile() {
  Profile& p = GetProfile();
  absl::MutexLock lock(&p.mu);
  p.totals.clear();
}

void RecordOpTime(const std::string& op, double seconds) {
  Profile& p = GetProfile();
  absl::MutexLock lock(&p.mu);
  Totals& t = p.totals[op];
  ++t.calls;
  t.seconds += seconds;
}

std::vector<OpProfileEntry> OpProfileEntries() {
  std::vector<OpProfileEntry> entries;
  {
    Profile& p = GetProfile();
    absl::MutexLock lock(&p.mu);
    for (const auto& [op, t] : p.totals) {
      entries.push_back({op, t.calls, t.seconds});
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const OpProfileEntry& a, const OpProfileEntry& b) {
              return a.seconds != b.seconds ? a.seconds > b.seconds
                                            : a.op < b.op;
            });
  return entries;
}

std::string OpProfileTable() {
  const std::vector<OpProfileEntry> entries = OpProfileEntries();
  double total = 0;
  for (const OpProfileEntry& e : entries) total += e.seconds;
  std::string out = absl::StrFormat("%-52s %8s %11s %10s %6s\n", "op", "calls",
                                    "total ms", "ms/call", "share");
  for (const OpProfileEntry& e : entries) {
    absl::StrAppendFormat(&out, "%-52s %8d %11.2f %10.4f %5.1f%%\n", e.op,
                          e.calls, e.seconds * 1e3,
                          e.seconds * 1e3 / static_cast<double>(e.calls),
                          total > 0 ? 100 * e.seconds / total : 0.0);
  }
  absl::StrAppendFormat(&out, "%-52s %8s %11.2f\n", "all kernels", "",
                        total * 1e3);
  return out;
}

}  // namespace mixrt
