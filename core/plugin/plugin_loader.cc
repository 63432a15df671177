#include "core/plugin/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/elf_check.h"
#include "common/shared_library.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

// Device counts above this are taken as garbage, not hardware.
constexpr int32_t kMaxDevices = 1024;
// Strings from a plugin longer than this are cut (a missing NUL must not make
// the host read forever).
constexpr size_t kMaxPluginString = 4096;

std::string CopyPluginString(const char* s) {
  if (s == nullptr) return "";
  return std::string(s, strnlen(s, kMaxPluginString));
}

absl::Status Refuse(const std::string& path, absl::string_view why) {
  return absl::FailedPreconditionError(
      absl::StrCat("plugin ", path, " refused: ", why));
}

absl::Status CheckTable(const std::string& path, const MixrtPluginApi* api) {
  if (api == nullptr) {
    return Refuse(path, "mixrt_plugin_entry returned no API table (NULL)");
  }
  if (api->struct_size < MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, abi_minor)) {
    return Refuse(path, absl::StrCat("API table struct_size ", api->struct_size,
                                     " is too small to hold a version"));
  }
  if (api->abi_major != MIXRT_PLUGIN_API_MAJOR) {
    return Refuse(
        path,
        absl::StrCat("it was built for mixrt plugin ABI ", api->abi_major, ".",
                     api->abi_minor, " but this host implements ABI ",
                     MIXRT_PLUGIN_API_MAJOR, ".", MIXRT_PLUGIN_API_MINOR,
                     "; the major versions must match (rebuild the "
                     "plugin against this mixrt)"));
  }
  if (api->struct_size < MIXRT_PLUGIN_API_STRUCT_SIZE_1_0) {
    return Refuse(path, absl::StrCat("API table struct_size ", api->struct_size,
                                     " is smaller than the ",
                                     MIXRT_PLUGIN_API_STRUCT_SIZE_1_0,
                                     " bytes ABI 1.0 requires"));
  }
  const std::pair<const void*, const char*> required[] = {
      {reinterpret_cast<const void*>(api->error_destroy), "error_destroy"},
      {reinterpret_cast<const void*>(api->error_message), "error_message"},
      {reinterpret_cast<const void*>(api->error_get_code), "error_get_code"},
      {reinterpret_cast<const void*>(api->plugin_get_info), "plugin_get_info"},
      {reinterpret_cast<const void*>(api->plugin_initialize),
       "plugin_initialize"},
      {reinterpret_cast<const void*>(api->device_count), "device_count"},
      {reinterpret_cast<const void*>(api->device_get_properties),
       "device_get_properties"},
      {reinterpret_cast<const void*>(api->device_get_capability),
       "device_get_capability"},
      {reinterpret_cast<const void*>(api->device_synchronize),
       "device_synchronize"},
      {reinterpret_cast<const void*>(api->memory_allocate), "memory_allocate"},
      {reinterpret_cast<const void*>(api->memory_free), "memory_free"},
      {reinterpret_cast<const void*>(api->memory_copy), "memory_copy"},
      {reinterpret_cast<const void*>(api->kernel_launch), "kernel_launch"},
  };
  for (const auto& [fn, fn_name] : required) {
    if (fn == nullptr) {
      return Refuse(path, absl::StrCat("required function ", fn_name,
                                       " is NULL in its API table"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<BackendIdentity> ReadIdentity(const std::string& path,
                                             const MixrtPluginApi* api) {
  MixrtPlugin_GetInfo_Args info{};
  info.struct_size = sizeof(info);
  MIXRT_RETURN_IF_ERROR(PluginErrorToStatus(api, api->plugin_get_info(&info),
                                            path, "plugin_get_info"));
  BackendIdentity id;
  id.name = CopyPluginString(info.name);
  id.version = CopyPluginString(info.version);
  id.build_info = CopyPluginString(info.build_info);
  id.device_type = CopyPluginString(info.device_type);
  id.path = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    id.file_stamp = absl::StrCat(st.st_size, " bytes, modified ",
                                 st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec);
  }
  id.abi_major = api->abi_major;
  id.abi_minor = api->abi_minor;
  if (id.name.empty() || id.name.size() > 64) {
    return Refuse(path, "plugin_get_info returned an empty or overlong name");
  }
  for (char c : id.name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
          c == '-')) {
      return Refuse(path, absl::StrCat("plugin name '", id.name,
                                       "' has characters other than "
                                       "[A-Za-z0-9_-]"));
    }
  }
  if (id.device_type.empty()) id.device_type = id.name;
  return id;
}

// One cell of a capability matrix as the plugin answered it (`cell`
// names it: "matmul/f16"): the level checked, the reason copied, a speed
// outside [0, 1e6) taken as not measured.
absl::StatusOr<CapabilityEntry> CapabilityCell(const std::string& name,
                                               uint32_t level,
                                               const char* reason,
                                               double speed_vs_f32,
                                               const std::string& cell) {
  if (level > MIXRT_SUPPORT_NATIVE) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin '", name, "' reports capability level ", level, " for ", cell,
        "; expected 0 (unsupported), 1 (slow) or 2 (native)"));
  }
  CapabilityEntry entry;
  entry.level = static_cast<MixrtSupportLevel>(level);
  entry.reason = CopyPluginString(reason);
  entry.speed_vs_f32 =
      speed_vs_f32 >= 0.0 && speed_vs_f32 < 1e6 ? speed_vs_f32 : 0.0;
  return entry;
}

// The precisions beyond the storage dtypes (ABI 1.2): unsupported, with
// the reason, for a plugin without device_get_precision_support.
absl::Status ReadPrecisions(const std::string& name, const MixrtPluginApi* api,
                            int index, DeviceInfo* device) {
  const bool asks =
      MIXRT_STRUCT_HAS(api, MixrtPluginApi, device_get_precision_support) &&
      api->device_get_precision_support != nullptr;
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    for (int p = 0; p < MIXRT_PRECISION_COUNT; ++p) {
      CapabilityEntry& entry = device->precisions[c][p];
      if (!asks) {
        entry.reason = "not declared (a plugin before ABI 1.2)";
        continue;
      }
      MixrtDevice_GetPrecisionSupport_Args args{};
      args.struct_size = sizeof(args);
      args.device = index;
      args.op_class = static_cast<uint32_t>(c);
      args.precision = static_cast<uint32_t>(p);
      MIXRT_RETURN_IF_ERROR(
          PluginErrorToStatus(api, api->device_get_precision_support(&args),
                              name, "device_get_precision_support"));
      MIXRT_ASSIGN_OR_RETURN(
          entry,
          CapabilityCell(
              name, args.level, args.reason, args.speed_vs_f32,
              absl::StrCat(OpClassName(static_cast<MixrtOpClass>(c)), "/",
                           PrecisionName(static_cast<MixrtPrecision>(p)))));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<DeviceInfo> ReadDevice(const std::string& name,
                                      const MixrtPluginApi* api, int index) {
  DeviceInfo device;
  device.index = index;
  MixrtDevice_GetProperties_Args props{};
  props.struct_size = sizeof(props);
  props.device = index;
  MIXRT_RETURN_IF_ERROR(
      PluginErrorToStatus(api, api->device_get_properties(&props), name,
                          absl::StrCat("device_get_properties(", index, ")")));
  device.name = CopyPluginString(props.name);
  device.total_memory = props.total_memory;
  device.flags = props.flags;
  device.alignment = props.alignment;
  if (props.alignment == 0 || (props.alignment & (props.alignment - 1)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin '", name, "' device ", index, " reports alignment ",
        props.alignment, "; expected a power of two"));
  }
  for (int c = 0; c < MIXRT_OP_CLASS_COUNT; ++c) {
    for (int d = 0; d < kNumDTypes; ++d) {
      MixrtDevice_GetCapability_Args cap{};
      cap.struct_size = sizeof(cap);
      cap.device = index;
      cap.op_class = static_cast<uint32_t>(c);
      cap.dtype = static_cast<uint32_t>(d);
      MIXRT_RETURN_IF_ERROR(
          PluginErrorToStatus(api, api->device_get_capability(&cap), name,
                              "device_get_capability"));
      MIXRT_ASSIGN_OR_RETURN(
          device.capabilities[c][d],
          CapabilityCell(name, cap.level, cap.reason, cap.speed_vs_f32,
                         absl::StrCat(OpClassName(static_cast<MixrtOpClass>(c)),
                                      "/", DTypeName(static_cast<DType>(d)))));
    }
  }
  MIXRT_RETURN_IF_ERROR(ReadPrecisions(name, api, index, &device));
  return device;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> LoadPlugin(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat("plugin ", path, " not found: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin ", path, " is not a regular file"));
  }
  // Where it lies was judged by the caller (the registry refuses a plugin
  // it found where others could write, and loads one the user named);
  // here the file checked is the file mapped.
  files::SharedLibraryOptions load;
  load.trusted_location = false;
  MIXRT_ASSIGN_OR_RETURN(void* handle, files::LoadSharedLibrary(path, load));
  auto* entry = reinterpret_cast<MixrtPluginEntryFn*>(
      dlsym(handle, MIXRT_PLUGIN_ENTRY_SYMBOL));
  if (entry == nullptr) {
    dlclose(handle);
    return Refuse(path, absl::StrCat("it does not export the entry symbol ",
                                     MIXRT_PLUGIN_ENTRY_SYMBOL,
                                     " (is it a mixrt plugin?)"));
  }
  // From here on the plugin's code has run; it stays mapped even when refused
  // (it may have started threads or registered atexit handlers).
  const MixrtPluginApi* api =
      entry(MIXRT_PLUGIN_API_MAJOR, MIXRT_PLUGIN_API_MINOR);
  std::optional<int32_t> score;
  if (auto* score_fn = reinterpret_cast<MixrtPluginScoreFn*>(
          dlsym(handle, MIXRT_PLUGIN_SCORE_SYMBOL))) {
    score = score_fn();
  }
  return BackendFromApiTable(path, handle, api, score);
}

absl::StatusOr<std::unique_ptr<Backend>> BackendFromApiTable(
    const std::string& path, void* handle, const MixrtPluginApi* api,
    std::optional<int32_t> score) {
  MIXRT_RETURN_IF_ERROR(CheckTable(path, api));
  MIXRT_ASSIGN_OR_RETURN(BackendIdentity identity, ReadIdentity(path, api));
  if (score.has_value()) identity.score = *score;

  MixrtPlugin_Initialize_Args init{};
  init.struct_size = sizeof(init);
  absl::Status init_status = PluginErrorToStatus(
      api, api->plugin_initialize(&init), identity.name, "plugin_initialize");
  if (!init_status.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin ", path, " failed to initialize: ", init_status.message()));
  }

  MixrtDevice_Count_Args count{};
  count.struct_size = sizeof(count);
  MIXRT_RETURN_IF_ERROR(PluginErrorToStatus(api, api->device_count(&count),
                                            identity.name, "device_count"));
  if (count.count < 0 || count.count > kMaxDevices) {
    return Refuse(path, absl::StrCat("device_count returned ", count.count,
                                     "; expected 0 to ", kMaxDevices));
  }
  std::string no_device_reason;
  if (count.count == 0) {
    no_device_reason = CopyPluginString(count.no_device_reason);
    if (no_device_reason.empty())
      no_device_reason = "no device (no reason given)";
  }
  std::vector<DeviceInfo> devices;
  for (int i = 0; i < count.count; ++i) {
    MIXRT_ASSIGN_OR_RETURN(DeviceInfo device,
                           ReadDevice(identity.name, api, i));
    devices.push_back(std::move(device));
  }
  return std::make_unique<Backend>(handle, api, std::move(identity),
                                   std::move(devices),
                                   std::move(no_device_reason));
}

}  // namespace mixrt
