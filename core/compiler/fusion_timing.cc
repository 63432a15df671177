#include "core/compiler/fusion_timing.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/compiler/artifact_cache.h"
#include "core/compiler/launch_key.h"
#include "core/tensor/storage.h"
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
  // Bytes each touched slot needs: its views' furthest element.
  std::map<int, int64_t> bytes;
  auto need = [&bytes](const ValueRef& v) {
    int64_t last = v.offset;
    for (size_t d = 0; d < v.shape.size(); ++d) {
      if (v.shape[d] == 0) return;
      last += (v.shape[d] - 1) * std::max<int64_t>(v.strides[d], 0);
    }
    const int64_t b = (last + 1) * static_cast<int64_t>(DTypeSize(v.dtype));
    bytes[v.slot] = std::max(bytes[v.slot], b);
  };
  for (int i : nodes) {
    for (const ValueRef& v : g.nodes[i].inputs) need(v);
    for (const ValueRef& v : g.nodes[i].outputs) need(v);
  }
  for (int v : values) need(value_refs[v]);
  // The constants themselves (weights as they are), zeros for the rest.
  std::map<int, char*> base;
  std::vector<std::shared_ptr<Storage>> scratch;
  for (const auto& [slot, size] : bytes) {
    if (g.slots[slot].kind == StorageSlot::Kind::kConstant) {
      std::shared_ptr<Storage> constant = g.slots[slot].constant.lock();
      if (constant == nullptr) {
        return absl::FailedPreconditionError("a constant of the graph is gone");
      }
      base[slot] = static_cast<char*>(constant->data());
      scratch.push_back(std::move(constant));  // Held while timing.
      continue;
    }
    MIXRT_ASSIGN_OR_RETURN(std::shared_ptr<Storage> s,
                           Storage::Allocate(device, size));
    const std::vector<char> zeros(size, 0);
    MIXRT_RETURN_IF_ERROR(
        device.backend()->Copy(device.index(), MIXRT_COPY_HOST_TO_DEVICE,
                               s->data(), zeros.data(), zeros.size()));
    base[slot] = static_cast<char*>(s->data());
    scratch.push_back(std::move(s));
  }
  auto place = [&base](const ValueRef& v) -> void* {
    return base[v.slot] + v.offset * static_cast<int64_t>(DTypeSize(v.dtype));
  };
  std::vector<std::vector<MixrtTensorDesc>> ins(nodes.size()),
      outs(nodes.size());
  for (size_t k = 0; k < nodes.size(); ++k) {
    for (const ValueRef& v : g.nodes[nodes[k]].inputs) {
      ins[k].push_back(Describe(v));
      ins[k].back().data = place(v);
    }
    for (const ValueRef& v : g.nodes[nodes[k]].outputs) {
      outs[k].push_back(Describe(v));
      outs[k].back().data = place(v);
    }
  }
  std::vector<void*> value_data(value_refs.size(), nullptr);
  for (int v : values) value_data[v] = place(value_refs[v]);

  auto launches = [&]() -> absl::Status {
    for (size_t k = 0; k < nodes.size(); ++k) {
      const GraphNode& n = g.nodes[nodes[k]];
      MIXRT_RETURN_IF_ERROR(
          device.backend()->Launch(device.index(), n.op, ins[k], outs[k],
                                   n.attrs.empty() ? nullptr : n.attrs.data()));
    }
    return absl::OkStatus();
  };
  auto fused = [&]() { return kernel.Run(value_data, {}); };
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
