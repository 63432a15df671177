#include "tools/info/info_report.h"

#include <algorithm>
#include <map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/tensor/op_fallback.h"

namespace mixrt::tools {
namespace {

constexpr DType kFloatDTypes[] = {DType::kF32, DType::kF16, DType::kBF16};

std::vector<std::string> FlagNames(uint32_t flags) {
  std::vector<std::string> names;
  if (flags & MIXRT_DEVICE_FLAG_HOST_MEMORY) names.push_back("host-memory");
  if (flags & MIXRT_DEVICE_FLAG_TENSOR_CORES) names.push_back("tensor-cores");
  if (flags & MIXRT_DEVICE_FLAG_NEEDS_CONTIGUOUS) {
    names.push_back("needs-contiguous");
  }
  if (flags & MIXRT_DEVICE_FLAG_MATMUL_TRANSPOSED_OPERANDS) {
    names.push_back("matmul-transposed-operands");
  }
  return names;
}

std::string CapabilityCell(const CapabilityEntry& e) {
  std::string cell(SupportLevelName(e.level));
  if (e.speed_vs_f32 > 0)
    absl::StrAppendFormat(&cell, " %.2fx", e.speed_vs_f32);
  return cell;
}

nlohmann::json CapabilityJson(const CapabilityEntry& e) {
  nlohmann::json entry = {{"level", SupportLevelName(e.level)},
                          {"reason", e.reason}};
  if (e.speed_vs_f32 > 0) entry["speed_vs_f32"] = e.speed_vs_f32;
  return entry;
}

nlohmann::json DeviceJson(const DeviceInfo& device) {
  nlohmann::json caps = nlohmann::json::object();
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    nlohmann::json by_dtype = nlohmann::json::object();
    for (int d = 0; d < kNumDTypes; ++d) {
      by_dtype[std::string(DTypeName(static_cast<DType>(d)))] =
          CapabilityJson(device.capabilities[c][d]);
    }
    caps[std::string(OpClassName(static_cast<MixrtOpClass>(c)))] = by_dtype;
  }
  nlohmann::json precisions = nlohmann::json::object();
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    nlohmann::json by_precision = nlohmann::json::object();
    for (int p = 0; p < MIXRT_PRECISION_COUNT; ++p) {
      by_precision[std::string(PrecisionName(static_cast<MixrtPrecision>(p)))] =
          CapabilityJson(device.precisions[c][p]);
    }
    precisions[std::string(OpClassName(static_cast<MixrtOpClass>(c)))] =
        by_precision;
  }
  return {{"index", device.index},
          {"name", device.name},
          {"total_memory", device.total_memory},
          {"alignment", device.alignment},
          {"flags", FlagNames(device.flags)},
          {"capabilities", caps},
          {"precisions", precisions}};
}

// ABI 1.2: the device's memory now, when its plugin tells.
std::string MemoryNow(const Backend& backend, const DeviceInfo& device) {
  absl::StatusOr<Backend::MemoryInfo> m = backend.GetMemoryInfo(device.index);
  if (!m.ok()) return "";
  return absl::StrFormat("%.1f GiB free of %.1f GiB",
                         m->free_bytes / 1073741824.0,
                         m->total_bytes / 1073741824.0);
}

// The precisions beyond the storage dtypes a device declares (ABI 1.2), as
// "tf32: matmul native, conv native", or "" when it declares none.
std::string DeclaredPrecisions(const DeviceInfo& device) {
  std::vector<std::string> parts;
  for (int p = 0; p < MIXRT_PRECISION_COUNT; ++p) {
    std::vector<std::string> classes;
    for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
      const CapabilityEntry& e = device.precisions[c][p];
      if (e.level == MIXRT_SUPPORT_UNSUPPORTED) continue;
      classes.push_back(absl::StrCat(OpClassName(static_cast<MixrtOpClass>(c)),
                                     " ", CapabilityCell(e)));
    }
    if (!classes.empty()) {
      parts.push_back(
          absl::StrCat(PrecisionName(static_cast<MixrtPrecision>(p)), ": ",
                       absl::StrJoin(classes, ", ")));
    }
  }
  return absl::StrJoin(parts, "; ");
}

void AppendDeviceText(const Backend& backend, const DeviceInfo& device,
                      std::string* out) {
  absl::StrAppendFormat(out, "    device %d: %s\n", device.index, device.name);
  if (const std::string now = MemoryNow(backend, device); !now.empty()) {
    absl::StrAppend(out, "      memory: ", now, "\n");
  } else if (device.total_memory > 0) {
    absl::StrAppendFormat(out, "      memory: %.1f GiB\n",
                          device.total_memory / 1073741824.0);
  }
  std::string precisions = DeclaredPrecisions(device);
  if (precisions.empty()) {
    // None: why, as the matmul cells say (the class they matter most for).
    std::vector<std::string> why;
    for (int p = 0; p < MIXRT_PRECISION_COUNT; ++p) {
      const std::string& reason =
          device.precisions[MIXRT_OP_CLASS_MATMUL][p].reason;
      const std::string item = absl::StrCat(
          PrecisionName(static_cast<MixrtPrecision>(p)), ": ", reason);
      if (!reason.empty() &&
          std::find(why.begin(), why.end(), item) == why.end())
        why.push_back(item);
    }
    precisions = why.empty()
                     ? "none"
                     : absl::StrCat("none (", absl::StrJoin(why, "; "), ")");
  }
  absl::StrAppend(out, "      precisions beyond f32/f16/bf16: ", precisions,
                  "\n");
  const std::vector<std::string> flags = FlagNames(device.flags);
  if (!flags.empty()) {
    absl::StrAppend(out, "      flags: ", absl::StrJoin(flags, ", "), "\n");
  }
  absl::StrAppendFormat(out, "      %-14s", "op class");
  for (DType d : kFloatDTypes)
    absl::StrAppendFormat(out, " %-18s", DTypeName(d));
  absl::StrAppend(out, "\n");
  // Reason -> the op/dtype cells it explains, so a shared reason prints once.
  std::map<std::string, std::vector<std::string>> notes;
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    const auto op_class = static_cast<MixrtOpClass>(c);
    absl::StrAppendFormat(out, "      %-14s", OpClassName(op_class));
    for (DType d : kFloatDTypes) {
      const CapabilityEntry& e = device.capability(op_class, d);
      absl::StrAppendFormat(out, " %-18s", CapabilityCell(e));
      if (!e.reason.empty()) {
        notes[absl::StrCat(SupportLevelName(e.level), ": ", e.reason)]
            .push_back(absl::StrCat(OpClassName(op_class), "/", DTypeName(d)));
      }
    }
    absl::StrAppend(out, "\n");
  }
  if (!notes.empty()) {
    absl::StrAppend(out, "      why:\n");
    for (const auto& [reason, cells] : notes) {
      absl::StrAppend(out, "        ", reason, "\n          (",
                      absl::StrJoin(cells, ", "), ")\n");
    }
  }
}

// The variants of `op` the per-op query distinguishes (plugin_api.h).
uint32_t VariantCount(MixrtOp op) {
  switch (op) {
    case MIXRT_OP_BINARY:
      return MIXRT_BINARY_COUNT;
    case MIXRT_OP_UNARY:
    case MIXRT_OP_UNARY_BACKWARD:
      return MIXRT_UNARY_COUNT;
    case MIXRT_OP_COMPARE:
      return MIXRT_COMPARE_COUNT;
    case MIXRT_OP_REDUCE:
      return MIXRT_REDUCE_COUNT;
    case MIXRT_OP_POOL2D:
    case MIXRT_OP_POOL2D_BACKWARD:
      return 2;
    case MIXRT_OP_MATMUL:
    case MIXRT_OP_CONV2D:
      return MIXRT_ACTIVATION_GELU_TANH + 1;
    default:
      return 1;
  }
}

// The op variants device 0 of `backend` runs in `dtype`, and how many
// there are.
std::vector<std::string> OpsRun(const Backend& backend,
                                const DeviceInfo& device, DType dtype,
                                int* total) {
  std::vector<std::string> runs;
  *total = 0;
  for (int op = 0; op < MIXRT_OP_COUNT; ++op) {
    const auto o = static_cast<MixrtOp>(op);
    for (uint32_t v = 0; v < VariantCount(o); ++v) {
      ++*total;
      const OpSignature sig{o, v, dtype, dtype};
      if (backend.QueryOpSupport(device.index, sig).level !=
          MIXRT_SUPPORT_UNSUPPORTED) {
        std::string name = OpSignatureName(sig);
        runs.push_back(name.substr(0, name.rfind(' ')));
      }
    }
  }
  return runs;
}

void AppendOpSupportText(const Backend& backend, const DeviceInfo& device,
                         std::string* out) {
  absl::StrAppend(out, "      ops run (",
                  backend.has_op_support_query()
                      ? "the plugin's per-op answers, ABI 1.1"
                      : "from the class matrix: the plugin has no per-op "
                        "query",
                  "; the rest run on the fallback backend):\n");
  for (DType d : kFloatDTypes) {
    int total = 0;
    const std::vector<std::string> runs = OpsRun(backend, device, d, &total);
    std::string list;
    if (runs.empty()) {
      list = "none";
    } else if (static_cast<int>(runs.size()) == total) {
      list = absl::StrCat("all ", total);
    } else if (runs.size() <= 12) {
      list = absl::StrCat(runs.size(), " of ", total, ": ",
                          absl::StrJoin(runs, ", "));
    } else {
      list = absl::StrCat(runs.size(), " of ", total);
    }
    absl::StrAppend(out, "        ", DTypeName(d), ": ", list, "\n");
  }
}

}  // namespace

nlohmann::json InfoJson(const Registry& registry) {
  nlohmann::json plugins = nlohmann::json::array();
  for (const PluginReport& report : registry.Reports()) {
    nlohmann::json p = {{"path", report.path},
                        {"name", report.name},
                        {"usable", report.usable},
                        {"state", PluginStateName(report.state)},
                        {"reason", report.reason}};
    if (report.backend != nullptr) {
      const BackendIdentity& id = report.backend->identity();
      p["version"] = id.version;
      p["build_info"] = id.build_info;
      p["device_type"] = id.device_type;
      p["score"] = id.score;
      p["abi"] = absl::StrCat(id.abi_major, ".", id.abi_minor);
      p["per_op_query"] = report.backend->has_op_support_query();
      // Out of process (MIXRT_PLUGIN_ISOLATION): the plugin host's pid.
      p["out_of_process"] = report.backend->process() != nullptr;
      if (report.backend->process() != nullptr) {
        p["pid"] = report.backend->process()->pid();
      }
      nlohmann::json devices = nlohmann::json::array();
      for (const DeviceInfo& device : report.backend->devices()) {
        nlohmann::json d = DeviceJson(device);
        if (auto m = report.backend->GetMemoryInfo(device.index); m.ok()) {
          d["free_memory"] = m->free_bytes;
          d["memory_now_total"] = m->total_bytes;
        }
        nlohmann::json runs = nlohmann::json::object();
        for (DType dtype : kFloatDTypes) {
          int total = 0;
          runs[std::string(DTypeName(dtype))] =
              OpsRun(*report.backend, device, dtype, &total);
        }
        d["ops_run"] = runs;
        devices.push_back(d);
      }
      p["devices"] = devices;
    }
    plugins.push_back(p);
  }
  absl::StatusOr<Device> selected = registry.SelectDevice();
  const FallbackCounters fallbacks = GetFallbackCounters();
  return {{"host_abi",
           absl::StrCat(MIXRT_PLUGIN_API_MAJOR, ".", MIXRT_PLUGIN_API_MINOR)},
          {"fallback",
           {{"policy", FallbackPolicy()},
            {"launches", fallbacks.launches},
            {"copies", fallbacks.copies},
            {"bytes_copied", fallbacks.bytes_copied}}},
          {"plugins", plugins},
          {"selected", selected.ok() ? nlohmann::json(selected->ToString())
                                     : nlohmann::json(nullptr)},
          {"selection_error",
           selected.ok() ? "" : std::string(selected.status().message())}};
}

std::string InfoText(const Registry& registry) {
  std::string out = absl::StrCat("mixrt (plugin ABI ", MIXRT_PLUGIN_API_MAJOR,
                                 ".", MIXRT_PLUGIN_API_MINOR, ")\n");
  const std::vector<PluginReport> reports = registry.Reports();
  if (reports.empty()) {
    absl::StrAppend(&out, "no plugins found (set MIXRT_PLUGIN_PATH)\n");
  }
  for (const PluginReport& report : reports) {
    const std::string status = PluginStateName(report.state);
    absl::StrAppend(&out, "\n", report.name.empty() ? "(unnamed)" : report.name,
                    " [", status, "] ", report.path, "\n");
    if (!report.usable)
      absl::StrAppend(&out, "    reason: ", report.reason, "\n");
    if (report.backend == nullptr) continue;
    const BackendIdentity& id = report.backend->identity();
    absl::StrAppend(&out, "    version ", id.version, ", ABI ", id.abi_major,
                    ".", id.abi_minor, ", score ", id.score,
                    ", autocast device type '", id.device_type, "'\n",
                    "    build: ", id.build_info, "\n");
    if (const PluginProcess* process = report.backend->process()) {
      absl::StrAppend(&out, "    out of process: mixrt-plugin-host, pid ",
                      process->pid(), "\n");
    }
    for (const DeviceInfo& device : report.backend->devices()) {
      AppendDeviceText(*report.backend, device, &out);
      AppendOpSupportText(*report.backend, device, &out);
    }
  }
  const std::string policy = FallbackPolicy();
  absl::StrAppend(
      &out, "\nfallback: ",
      policy == "auto"
          ? "auto (an op a device does not run goes to the best host backend "
            "that runs it; MIXRT_FALLBACK=0 turns this off)"
      : policy == "off"
          ? "off (MIXRT_FALLBACK): an op a device does not "
            "run fails, naming it"
          : absl::StrCat("to backend '", policy, "' (MIXRT_FALLBACK)"),
      "\n");
  absl::StatusOr<Device> selected = registry.SelectDevice();
  absl::StrAppend(&out, "\nselected: ",
                  selected.ok() ? selected->ToString()
                                : std::string(selected.status().message()),
                  "\n");
  return out;
}

}  // namespace mixrt::tools
