#include "core/compiler/fusion_timing.h"

#include <algorithm>
#include <chrono>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/group_scratch.h"
#include "core/compiler/launch_key.h"
#include "mixrt/status_macros.h"

namespace mixrt::compiler {
namespace {

// Rounds of each side: the medians of 5 alternating runs settle within a
// few percent on these machines, for a few ms of compile time per group.
constexpr int kRounds = 5;

double Median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

}  // namespace

std::string FusionTimingKey(const Graph& g, const std::vector<int>& nodes,
                            const std::string& kernel) {
  std::string key = CacheKeyPrefix();
  absl::StrAppend(&key, "fusion timing\n",
                  BackendCacheKey(g.device.backend()->identity()), "kernel ",
                  kernel, "\n");
  for (int i : nodes) {
    absl::StrAppend(
        &key, LaunchKey(g, g.nodes[i], [](int slot) { return slot; }), "\n");
  }
  return key;
}

FusionVerdict JudgeFusedGroup(const FusionTiming& t, int launches,
                              int64_t bytes_not_stored,
                              const std::string& source) {
  if (t.fused_us < t.launches_us) {
    return {true, absl::StrFormat(" [%.1f us, its launches %.1f us%s]",
                                  t.fused_us, t.launches_us, source)};
  }
  if (bytes_not_stored > 0 &&
      t.fused_us <= t.launches_us * (1 + kFusionTimingNoise)) {
    return {true,
            absl::StrFormat(
                " [%.1f us, its launches %.1f us%s: a tie within %.0f%%, kept "
                "for the %d bytes it does not store]",
                t.fused_us, t.launches_us, source, kFusionTimingNoise * 100,
                bytes_not_stored)};
  }
  return {false,
          absl::StrFormat("slower than its %d launches (%.1f vs %.1f us%s)",
                          launches, t.fused_us, t.launches_us, source)};
}

std::string FormatFusionTiming(const FusionTiming& t) {
  return absl::StrFormat("%.3f %.3f", t.fused_us, t.launches_us);
}

std::optional<FusionTiming> ParseFusionTiming(const std::string& payload) {
  const std::vector<std::string> parts = absl::StrSplit(payload, ' ');
  FusionTiming t;
  if (parts.size() != 2 || !absl::SimpleAtod(parts[0], &t.fused_us) ||
      !absl::SimpleAtod(parts[1], &t.launches_us) || !(t.fused_us >= 0) ||
      !(t.launches_us >= 0)) {
    return std::nullopt;
  }
  return t;
}

absl::StatusOr<FusionTiming> TimeFusedGroup(
    const Graph& g, const std::vector<int>& nodes,
    const PluginFusedKernel& kernel, const std::vector<ValueRef>& value_refs,
    const std::vector<int>& values) {
  const Device& device = g.device;
  // The constants themselves (weights as they are), zeros for the rest.
  MIXRT_ASSIGN_OR_RETURN(const GroupScratch scratch,
                         GroupScratch::Create(g, nodes, value_refs, values));
  auto launches = [&]() { return scratch.RunLaunches(); };
  auto fused = [&]() { return scratch.RunKernel(kernel); };
  auto time = [&](auto&& run, std::vector<double>* us) -> absl::Status {
    const auto start = std::chrono::steady_clock::now();
    MIXRT_RETURN_IF_ERROR(run());
    MIXRT_RETURN_IF_ERROR(device.backend()->Synchronize(device.index()));
    us->push_back(std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - start)
                      .count());
    return absl::OkStatus();
  };
  std::vector<double> warm, fused_us, launches_us;
  MIXRT_RETURN_IF_ERROR(time(launches, &warm));
  MIXRT_RETURN_IF_ERROR(time(fused, &warm));
  for (int round = 0; round < kRounds; ++round) {
    MIXRT_RETURN_IF_ERROR(time(launches, &launches_us));
    MIXRT_RETURN_IF_ERROR(time(fused, &fused_us));
  }
  return FusionTiming{Median(fused_us), Median(launches_us)};
}

}  // namespace mixrt::compiler
