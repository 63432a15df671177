// A buggy or malicious plugin controls everything the loader reads: the API
// table (struct_size, versions, NULL functions), identity strings (missing,
// unterminated, overlong), device counts, properties, capability levels and
// error objects (wrong message_size, unknown codes). The loader must return
// a Backend or a Status for all of it, never crash or over-read, and must
// destroy every error object it is given exactly once.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>

#include "absl/status/statusor.h"
#include "core/plugin/plugin_loader.h"
#include "fuzz/fuzz_input.h"
#include "mixrt/plugin_api.h"

struct MixrtError {
  std::string message;
  size_t claimed_size;
  uint32_t code;
};

namespace {

struct FakePlugin {
  mixrt::fuzz::FuzzInput* in = nullptr;
  std::deque<std::string> strings;  // Stable addresses for returned strings.
  int live_errors = 0;
  int32_t device_count = 0;
};

FakePlugin* g_plugin = nullptr;
// 4096 bytes without a NUL: the most the host may read of one string.
char g_unterminated[4096];

uint8_t Byte() { return g_plugin->in->Read<uint8_t>(); }

const char* String() {
  switch (Byte() % 4) {
    case 0:
      return nullptr;
    case 1:
      return g_unterminated;
    default:
      g_plugin->strings.push_back(g_plugin->in->ReadString(80));
      return g_plugin->strings.back().c_str();
  }
}

// One call in eight fails, with fuzzed message, size claim and code.
MixrtError* MaybeError() {
  if (Byte() % 8 != 0) return nullptr;
  auto* e = new MixrtError;
  e->message = g_plugin->in->ReadString(80);
  e->claimed_size =
      Byte() % 2 ? e->message.size() : g_plugin->in->Read<size_t>();
  e->code = Byte();
  ++g_plugin->live_errors;
  return e;
}

void ErrorDestroy(MixrtError_Destroy_Args* args) {
  delete args->error;
  --g_plugin->live_errors;
}
void ErrorMessage(MixrtError_Message_Args* args) {
  args->message = args->error->message.c_str();
  args->message_size = args->error->claimed_size;
}
void ErrorGetCode(MixrtError_GetCode_Args* args) {
  args->code = args->error->code;
}

MixrtError* GetInfo(MixrtPlugin_GetInfo_Args* args) {
  if (MixrtError* e = MaybeError()) return e;
  args->name = Byte() % 2 ? "fuzz" : String();
  args->version = String();
  args->build_info = String();
  args->device_type = String();
  return nullptr;
}
MixrtError* Initialize(MixrtPlugin_Initialize_Args*) { return MaybeError(); }
MixrtError* Count(MixrtDevice_Count_Args* args) {
  if (MixrtError* e = MaybeError()) return e;
  const uint8_t kind = Byte();
  args->count = kind < 240 ? kind % 4 : g_plugin->in->Read<int32_t>();
  args->no_device_reason = String();
  g_plugin->device_count = args->count;
  return nullptr;
}
MixrtError* Properties(MixrtDevice_GetProperties_Args* args) {
  if (MixrtError* e = MaybeError()) return e;
  args->name = String();
  args->total_memory = g_plugin->in->Read<uint64_t>();
  args->flags = g_plugin->in->Read<uint32_t>();
  const uint8_t kind = Byte();
  args->alignment = kind < 240 ? 64 : g_plugin->in->Read<uint32_t>();
  return nullptr;
}
MixrtError* Capability(MixrtDevice_GetCapability_Args* args) {
  // Capabilities are read hundreds of times per device: errors are rarer.
  if (Byte() == 255) return MaybeError();
  const uint8_t kind = Byte();
  args->level = kind < 250 ? kind % 3 : g_plugin->in->Read<uint32_t>();
  args->reason = kind % 16 == 0 ? String() : nullptr;
  args->speed_vs_f32 = kind % 32 == 1 ? g_plugin->in->Read<double>() : 1.0;
  return nullptr;
}
MixrtError* Unused() { std::abort(); }  // Loading must not call these.
MixrtError* Synchronize(MixrtDevice_Synchronize_Args*) { return Unused(); }
MixrtError* Allocate(MixrtMemory_Allocate_Args*) { return Unused(); }
MixrtError* Free(MixrtMemory_Free_Args*) { return Unused(); }
MixrtError* Copy(MixrtMemory_Copy_Args*) { return Unused(); }
MixrtError* Launch(MixrtKernel_Launch_Args*) { return Unused(); }

MixrtPluginApi MakeTable() {
  MixrtPluginApi api{};
  api.struct_size = sizeof(api);
  api.abi_major = MIXRT_PLUGIN_API_MAJOR;
  api.abi_minor = MIXRT_PLUGIN_API_MINOR;
  api.error_destroy = ErrorDestroy;
  api.error_message = ErrorMessage;
  api.error_get_code = ErrorGetCode;
  api.plugin_get_info = GetInfo;
  api.plugin_initialize = Initialize;
  api.device_count = Count;
  api.device_get_properties = Properties;
  api.device_get_capability = Capability;
  api.device_synchronize = Synchronize;
  api.memory_allocate = Allocate;
  api.memory_free = Free;
  api.memory_copy = Copy;
  api.kernel_launch = Launch;
  return api;
}

// Damages the table as the input says: sizes, versions, NULL entries.
void Damage(MixrtPluginApi& api) {
  const uint8_t what = Byte();
  if (what < 200) return;
  switch (what % 4) {
    case 0:
      api.struct_size = g_plugin->in->Read<uint16_t>();
      break;
    case 1:
      api.abi_major = g_plugin->in->Read<uint32_t>();
      api.abi_minor = g_plugin->in->Read<uint32_t>();
      break;
    case 2: {
      // NULLs one function pointer slot (they follow the header fields).
      void** slots = reinterpret_cast<void**>(&api.error_destroy);
      const size_t count =
          (sizeof(api) - offsetof(MixrtPluginApi, error_destroy)) /
          sizeof(void*);
      slots[Byte() % count] = nullptr;
      break;
    }
    case 3:
      api.struct_size = g_plugin->in->Read<size_t>();
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::memset(g_unterminated, 'x', sizeof(g_unterminated));
  mixrt::fuzz::FuzzInput in(data, size);
  FakePlugin plugin;
  plugin.in = &in;
  g_plugin = &plugin;
  MixrtPluginApi api = MakeTable();
  Damage(api);
  const bool no_table = Byte() == 255;
  {
    absl::StatusOr<std::unique_ptr<mixrt::Backend>> backend =
        mixrt::BackendFromApiTable("fuzz.so", nullptr,
                                   no_table ? nullptr : &api, std::nullopt);
    if (backend.ok()) {
      if (static_cast<int32_t>((*backend)->devices().size()) !=
          plugin.device_count) {
        std::abort();
      }
    } else if (backend.status().message().empty()) {
      std::abort();
    }
  }
  // Every error object handed to the host was destroyed, once.
  if (plugin.live_errors != 0) std::abort();
  g_plugin = nullptr;
  return 0;
}
