#include "core/plugin/plugin_host_table.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <utility>

#include "core/plugin/isolation/wire_format.h"
#include "core/plugin/plugin_host_process.h"

namespace mixrt::isolation {
namespace {

std::atomic<PluginHostProcess*> g_slots[kMaxIsolatedPlugins];
std::mutex g_slots_mu;

template <int S>
struct Slot {
  static PluginHostProcess* P() {
    return g_slots[S].load(std::memory_order_acquire);
  }
#define MIXRT_FORWARD(Fn, Args) \
  static MixrtError* Fn(Args* a) { return P()->Fn(a); }
  MIXRT_FORWARD(GetInfo, MixrtPlugin_GetInfo_Args)
  MIXRT_FORWARD(Initialize, MixrtPlugin_Initialize_Args)
  MIXRT_FORWARD(Shutdown, MixrtPlugin_Shutdown_Args)
  MIXRT_FORWARD(DeviceCount, MixrtDevice_Count_Args)
  MIXRT_FORWARD(GetProperties, MixrtDevice_GetProperties_Args)
  MIXRT_FORWARD(GetCapability, MixrtDevice_GetCapability_Args)
  MIXRT_FORWARD(GetOpSupport, MixrtDevice_GetOpSupport_Args)
  MIXRT_FORWARD(GetMemoryInfo, MixrtDevice_GetMemoryInfo_Args)
  MIXRT_FORWARD(GetPrecisionSupport, MixrtDevice_GetPrecisionSupport_Args)
  MIXRT_FORWARD(Synchronize, MixrtDevice_Synchronize_Args)
  MIXRT_FORWARD(Allocate, MixrtMemory_Allocate_Args)
  MIXRT_FORWARD(Free, MixrtMemory_Free_Args)
  MIXRT_FORWARD(Copy, MixrtMemory_Copy_Args)
  MIXRT_FORWARD(Set, MixrtMemory_Set_Args)
  MIXRT_FORWARD(Launch, MixrtKernel_Launch_Args)
  MIXRT_FORWARD(FusionClaim, MixrtFusion_Claim_Args)
  MIXRT_FORWARD(FusionCompile, MixrtFusion_Compile_Args)
  MIXRT_FORWARD(FusedRun, MixrtFusedKernel_Run_Args)
  MIXRT_FORWARD(FusedSetWeightVersion, MixrtFusedKernel_SetWeightVersion_Args)
  MIXRT_FORWARD(FusedSetScratch, MixrtFusedKernel_SetScratch_Args)
  MIXRT_FORWARD(GraphCreate, MixrtKernelGraph_Create_Args)
  MIXRT_FORWARD(GraphRun, MixrtKernelGraph_Run_Args)
#undef MIXRT_FORWARD
  static void FusedDestroy(MixrtFusedKernel_Destroy_Args* a) {
    P()->FusedDestroy(a);
  }
  static void GraphDestroy(MixrtKernelGraph_Destroy_Args* a) {
    P()->GraphDestroy(a);
  }

  static MixrtPluginApi Table(uint32_t abi_minor, uint32_t bits) {
    MixrtPluginApi t{};
    t.struct_size = sizeof(t);
    t.abi_major = MIXRT_PLUGIN_API_MAJOR;
    t.abi_minor = std::min<uint32_t>(abi_minor, MIXRT_PLUGIN_API_MINOR);
    t.error_destroy = ErrorDestroy;
    t.error_message = ErrorMessage;
    t.error_get_code = ErrorGetCode;
    t.plugin_get_info = GetInfo;
    t.plugin_initialize = Initialize;
    t.plugin_shutdown =
        (bits & isolation::kHasShutdown) != 0 ? Shutdown : nullptr;
    t.device_count = DeviceCount;
    t.device_get_properties = GetProperties;
    t.device_get_capability = GetCapability;
    t.device_synchronize = Synchronize;
    t.memory_allocate = Allocate;
    t.memory_free = Free;
    t.memory_copy = Copy;
    t.memory_set = Set;  // The host side fills what the plugin cannot.
    t.kernel_launch = Launch;
    if ((bits & isolation::kHasOpSupport) != 0) {
      t.device_get_op_support = GetOpSupport;
    }
    if ((bits & isolation::kHasMemoryInfo) != 0) {
      t.device_get_memory_info = GetMemoryInfo;
    }
    if ((bits & isolation::kHasPrecisionSupport) != 0) {
      t.device_get_precision_support = GetPrecisionSupport;
    }
    if ((bits & isolation::kHasKernelGraphs) != 0) {
      t.kernel_graph_create = GraphCreate;
      t.kernel_graph_run = GraphRun;
      t.kernel_graph_destroy = GraphDestroy;
    }
    if ((bits & isolation::kHasFusion) != 0) {
      t.fusion_claim = FusionClaim;
      t.fusion_compile = FusionCompile;
      t.fused_kernel_run = FusedRun;
      t.fused_kernel_destroy = FusedDestroy;
      if ((bits & isolation::kHasWeightVersion) != 0) {
        t.fused_kernel_set_weight_version = FusedSetWeightVersion;
      }
      if ((bits & isolation::kHasScratch) != 0) {
        t.fused_kernel_set_scratch = FusedSetScratch;
      }
    }
    return t;
  }
};

template <size_t... S>
MixrtPluginApi TableForSlot(int slot, uint32_t abi_minor, uint32_t bits,
                            std::index_sequence<S...>) {
  using Maker = MixrtPluginApi (*)(uint32_t, uint32_t);
  static constexpr Maker kMakers[] = {&Slot<S>::Table...};
  return kMakers[slot](abi_minor, bits);
}

}  // namespace

int AcquireSlot(PluginHostProcess* process) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  for (int i = 0; i < kMaxIsolatedPlugins; ++i) {
    if (g_slots[i].load() == nullptr) {
      g_slots[i].store(process, std::memory_order_release);
      return i;
    }
  }
  return -1;
}

void ReleaseSlot(int slot) {
  std::lock_guard<std::mutex> lock(g_slots_mu);
  g_slots[slot].store(nullptr);
}

MixrtPluginApi ProxyTable(int slot, uint32_t abi_minor, uint32_t bits) {
  return TableForSlot(slot, abi_minor, bits,
                      std::make_index_sequence<kMaxIsolatedPlugins>());
}

}  // namespace mixrt::isolation
