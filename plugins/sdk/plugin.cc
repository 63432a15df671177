#include "plugins/sdk/plugin.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_set>

#include "mixrt/op_class.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/op_table.h"
#include "plugins/sdk/strings.h"

// The ABI's opaque error object, as every SDK plugin defines it.
struct MixrtError {
  uint32_t code;
  std::string message;
};

// The ABI's opaque kernel graph.
struct MixrtKernelGraph {
  std::unique_ptr<mixrt::sdk::KernelGraph> graph;
};

// The ABI's opaque fused kernel.
struct MixrtFusedKernel {
  std::unique_ptr<mixrt::sdk::FusedKernel> kernel;
  std::string description;
  int num_values = 0;
  int num_symbols = 0;
};

namespace mixrt::sdk {

Status internal::RunFusedKernel(MixrtFusedKernel* kernel,
                                Span<void* const> value_data) {
  return kernel->kernel->Run(value_data, {});
}

int internal::FusedKernelValues(const MixrtFusedKernel* kernel) {
  return kernel->num_values;
}

Status internal::CheckTensorShape(const MixrtTensorDesc& d, const char* what,
                                  int index, std::string_view where) {
  if (d.struct_size < MixrtTensorDesc_STRUCT_SIZE) {
    return InvalidArgumentError(StrCat(where, ": ", what, " ", index,
                                       " has struct_size ", d.struct_size));
  }
  if (d.dtype >= MIXRT_DTYPE_COUNT || d.ndim < 0 || d.ndim > MIXRT_MAX_DIMS ||
      (d.ndim > 0 && (d.shape == nullptr || d.strides == nullptr))) {
    return InvalidArgumentError(
        StrCat(where, ": ", what, " ", index, " has dtype ", d.dtype, ", ndim ",
               d.ndim, " (max ", MIXRT_MAX_DIMS, ") or missing shape/strides"));
  }
  for (int k = 0; k < d.ndim; ++k) {
    if (d.shape[k] < 0 || d.strides[k] < 0) {
      return InvalidArgumentError(
          StrCat(where, ": ", what, " ", index,
                 " has a negative size or stride in dim ", k));
    }
  }
  return OkStatus();
}

namespace {

MixrtErrorCode ToErrorCode(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return MIXRT_ERROR_CODE_INVALID_ARGUMENT;
    case StatusCode::kUnimplemented:
      return MIXRT_ERROR_CODE_UNIMPLEMENTED;
    case StatusCode::kResourceExhausted:
      return MIXRT_ERROR_CODE_OUT_OF_MEMORY;
    case StatusCode::kNotFound:
      return MIXRT_ERROR_CODE_NO_DEVICE;
    case StatusCode::kFailedPrecondition:
      return MIXRT_ERROR_CODE_FAILED_PRECONDITION;
    case StatusCode::kUnavailable:
      return MIXRT_ERROR_CODE_UNAVAILABLE;
    default:
      return MIXRT_ERROR_CODE_INTERNAL;
  }
}

MixrtError* MakeError(const Status& status) {
  if (status.ok()) return nullptr;
  return new MixrtError{ToErrorCode(status.code()),
                        std::string(status.message())};
}

// Process-wide state of the one plugin this shared object holds.
struct PluginState {
  std::unique_ptr<Plugin> plugin;
  std::mutex strings_mu;
  std::unordered_set<std::string> strings;  // Stable addresses.
  PluginInfo info;
  // Why the plugin declined the host (AcceptHost); reported by initialize.
  Status host_declined;
  // The ABI minor version the table is laid out as (MIXRT_SDK_ABI_MINOR).
  uint32_t table_minor = MIXRT_PLUGIN_API_MINOR;

  const char* Intern(const std::string& s) {
    std::lock_guard<std::mutex> lock(strings_mu);
    return strings.insert(s).first->c_str();
  }
};

PluginState& State() {
  static PluginState* state = new PluginState();
  return *state;
}

// Runs `body` (returning Status), converting exceptions to errors.
template <typename Body>
MixrtError* Guard(const char* function, Body&& body) {
  try {
    return MakeError(body());
  } catch (const std::exception& e) {
    return MakeError(InternalError(
        StrCat(function, ": plugin threw an exception: ", e.what())));
  } catch (...) {
    return MakeError(InternalError(
        StrCat(function, ": plugin threw a non-standard exception")));
  }
}

template <typename Args>
Status CheckArgs(const Args* args, size_t needed, const char* function) {
  if (args == nullptr) {
    return InvalidArgumentError(StrCat(function, ": args is NULL"));
  }
  if (args->struct_size < needed) {
    return InvalidArgumentError(
        StrCat(function, ": args struct_size ", args->struct_size,
               " is smaller than the ", needed, " bytes required"));
  }
  return OkStatus();
}

// Whether the caller's Args struct holds at least its first version
// (Type##_STRUCT_SIZE, beside the struct in plugin_api.h).
#define MIXRT_SDK_CHECK_ARGS(Type, function)                      \
  do {                                                            \
    Status check = CheckArgs(args, Type##_STRUCT_SIZE, function); \
    if (!check.ok()) return check;                                \
  } while (0)

Status CheckDevice(int device) {
  const DeviceCount count = State().plugin->CountDevices();
  if (device < 0 || device >= count.count) {
    return InvalidArgumentError(StrCat("device index ", device,
                                       " out of range; the plugin has ",
                                       count.count, " device(s)"));
  }
  return OkStatus();
}

Status CheckTensors(const MixrtTensorDesc* descs, int32_t n, const char* what) {
  if (n < 0 || (n > 0 && descs == nullptr)) {
    return InvalidArgumentError(
        StrCat("kernel_launch: bad ", what, " list (count ", n, ")"));
  }
  for (int32_t i = 0; i < n; ++i) {
    const MixrtTensorDesc& d = descs[i];
    MIXRT_RETURN_IF_ERROR(
        internal::CheckTensorShape(d, what, i, "kernel_launch"));
    bool empty = false;
    for (int k = 0; k < d.ndim; ++k) empty |= d.shape[k] == 0;
    if (!empty && d.data == nullptr) {
      return InvalidArgumentError(StrCat("kernel_launch: ", what, " ", i,
                                         " has elements but a NULL data"));
    }
  }
  return OkStatus();
}

// ---- The C entry points --------------------------------------------------

void ErrorDestroy(MixrtError_Destroy_Args* args) {
  if (args != nullptr) delete args->error;
}

void ErrorMessage(MixrtError_Message_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  args->message = args->error->message.c_str();
  args->message_size = args->error->message.size();
}

void ErrorGetCode(MixrtError_GetCode_Args* args) {
  if (args == nullptr || args->error == nullptr) return;
  args->code = args->error->code;
}

MixrtError* GetInfo(MixrtPlugin_GetInfo_Args* args) {
  return Guard("plugin_get_info", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtPlugin_GetInfo_Args, "plugin_get_info");
    const PluginInfo& info = State().info;
    args->name = info.name.c_str();
    args->version = info.version.c_str();
    args->build_info = info.build_info.c_str();
    args->device_type = info.device_type.c_str();
    return OkStatus();
  });
}

MixrtError* Initialize(MixrtPlugin_Initialize_Args* args) {
  return Guard("plugin_initialize", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtPlugin_Initialize_Args, "plugin_initialize");
    if (!State().host_declined.ok()) return State().host_declined;
    return State().plugin->Initialize();
  });
}

MixrtError* Shutdown(MixrtPlugin_Shutdown_Args* args) {
  return Guard("plugin_shutdown", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtPlugin_Shutdown_Args, "plugin_shutdown");
    return State().plugin->Shutdown();
  });
}

MixrtError* CountDevices(MixrtDevice_Count_Args* args) {
  return Guard("device_count", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_Count_Args, "device_count");
    const DeviceCount count = State().plugin->CountDevices();
    args->count = count.count;
    args->no_device_reason =
        count.count == 0 ? State().Intern(count.no_device_reason) : nullptr;
    return OkStatus();
  });
}

MixrtError* GetProperties(MixrtDevice_GetProperties_Args* args) {
  return Guard("device_get_properties", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_GetProperties_Args,
                         "device_get_properties");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    StatusOr<DeviceProperties> props =
        State().plugin->GetDeviceProperties(args->device);
    if (!props.ok()) return props.status();
    args->name = State().Intern(props->name);
    args->total_memory = props->total_memory;
    args->flags = props->flags;
    args->alignment = props->alignment;
    return OkStatus();
  });
}

MixrtError* GetCapability(MixrtDevice_GetCapability_Args* args) {
  return Guard("device_get_capability", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_GetCapability_Args,
                         "device_get_capability");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    if (args->op_class >= MIXRT_OP_CLASS_COUNT ||
        args->dtype >= MIXRT_DTYPE_COUNT) {
      return InvalidArgumentError(
          StrCat("device_get_capability: unknown op class ", args->op_class,
                 " or dtype ", args->dtype));
    }
    const Capability cap = State().plugin->GetCapability(
        args->device, static_cast<MixrtOpClass>(args->op_class),
        static_cast<MixrtDtype>(args->dtype));
    args->level = cap.level;
    args->reason = State().Intern(cap.reason);
    args->speed_vs_f32 = cap.speed_vs_f32;
    return OkStatus();
  });
}

MixrtError* GetMemoryInfo(MixrtDevice_GetMemoryInfo_Args* args) {
  return Guard("device_get_memory_info", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_GetMemoryInfo_Args,
                         "device_get_memory_info");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    StatusOr<MemoryInfo> info = State().plugin->GetMemoryInfo(args->device);
    if (!info.ok()) return info.status();
    args->free_bytes = info->free_bytes;
    args->total_bytes = info->total_bytes;
    return OkStatus();
  });
}

void ProfilerRange(MixrtProfiler_Range_Args* args) {
  // No error can be returned: a plugin's failure here is its own.
  if (args == nullptr ||
      args->struct_size < MixrtProfiler_Range_Args_STRUCT_SIZE ||
      args->name == nullptr || args->phase > MIXRT_RANGE_END) {
    return;
  }
  try {
    State().plugin->OnProfilerRange(args->device,
                                    static_cast<MixrtRangePhase>(args->phase),
                                    args->id, args->name);
  } catch (...) {
    // Never across the C ABI.
  }
}

MixrtError* GetPrecisionSupport(MixrtDevice_GetPrecisionSupport_Args* args) {
  return Guard("device_get_precision_support", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_GetPrecisionSupport_Args,
                         "device_get_precision_support");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    if (args->op_class >= MIXRT_OP_CLASS_COUNT ||
        args->precision >= MIXRT_PRECISION_COUNT) {
      return InvalidArgumentError(
          StrCat("device_get_precision_support: unknown op class ",
                 args->op_class, " or precision ", args->precision));
    }
    const Capability cap = State().plugin->GetPrecisionSupport(
        args->device, static_cast<MixrtOpClass>(args->op_class),
        static_cast<MixrtPrecision>(args->precision));
    args->level = cap.level;
    args->reason = State().Intern(cap.reason);
    args->speed_vs_f32 = cap.speed_vs_f32;
    return OkStatus();
  });
}

MixrtError* GetOpSupport(MixrtDevice_GetOpSupport_Args* args) {
  return Guard("device_get_op_support", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_GetOpSupport_Args,
                         "device_get_op_support");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    if (args->dtype >= MIXRT_DTYPE_COUNT ||
        args->out_dtype >= MIXRT_DTYPE_COUNT) {
      return InvalidArgumentError(
          StrCat("device_get_op_support: unknown dtype ", args->dtype, " or ",
                 args->out_dtype));
    }
    Capability cap;
    if (args->op >= MIXRT_OP_COUNT) {
      cap = Unsupported(
          StrCat("op ", args->op, " is newer than this plugin (ABI ",
                 MIXRT_PLUGIN_API_MAJOR, ".", MIXRT_PLUGIN_API_MINOR, ")"));
    } else {
      OpQuery query;
      query.op = static_cast<MixrtOp>(args->op);
      query.variant = args->variant;
      query.dtype = static_cast<MixrtDtype>(args->dtype);
      query.out_dtype = static_cast<MixrtDtype>(args->out_dtype);
      cap = State().plugin->GetOpSupport(args->device, query);
    }
    args->level = cap.level;
    args->reason = State().Intern(cap.reason);
    return OkStatus();
  });
}

MixrtError* Synchronize(MixrtDevice_Synchronize_Args* args) {
  return Guard("device_synchronize", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtDevice_Synchronize_Args, "device_synchronize");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    return State().plugin->Synchronize(args->device);
  });
}

MixrtError* Allocate(MixrtMemory_Allocate_Args* args) {
  return Guard("memory_allocate", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtMemory_Allocate_Args, "memory_allocate");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    StatusOr<void*> ptr = State().plugin->Allocate(args->device, args->bytes);
    if (!ptr.ok()) return ptr.status();
    args->ptr = *ptr;
    return OkStatus();
  });
}

MixrtError* Free(MixrtMemory_Free_Args* args) {
  return Guard("memory_free", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtMemory_Free_Args, "memory_free");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    return State().plugin->Free(args->device, args->ptr);
  });
}

MixrtError* Copy(MixrtMemory_Copy_Args* args) {
  return Guard("memory_copy", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtMemory_Copy_Args, "memory_copy");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    if (args->kind > MIXRT_COPY_DEVICE_TO_DEVICE) {
      return InvalidArgumentError(
          StrCat("memory_copy: unknown copy kind ", args->kind));
    }
    if (args->bytes > 0 && (args->dst == nullptr || args->src == nullptr)) {
      return InvalidArgumentError("memory_copy: NULL pointer");
    }
    return State().plugin->Copy(args->device,
                                static_cast<MixrtCopyKind>(args->kind),
                                args->dst, args->src, args->bytes);
  });
}

MixrtError* Set(MixrtMemory_Set_Args* args) {
  return Guard("memory_set", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtMemory_Set_Args, "memory_set");
    Status ok = CheckDevice(args->device);
    if (!ok.ok()) return ok;
    if (args->bytes > 0 && args->dst == nullptr) {
      return InvalidArgumentError("memory_set: NULL pointer");
    }
    return State().plugin->Memset(args->device, args->dst, args->value,
                                  args->bytes);
  });
}

MixrtError* Launch(MixrtKernel_Launch_Args* args) {
  return Guard("kernel_launch", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtKernel_Launch_Args, "kernel_launch");
    Status ok = CheckDevice(args->device);
    if (ok.ok()) ok = CheckTensors(args->inputs, args->num_inputs, "input");
    if (ok.ok()) ok = CheckTensors(args->outputs, args->num_outputs, "output");
    if (!ok.ok()) return ok;
    if (args->op >= MIXRT_OP_COUNT) {
      return UnimplementedError(StrCat(
          "kernel_launch: op ", args->op, " is newer than this plugin (ABI ",
          MIXRT_PLUGIN_API_MAJOR, ".", MIXRT_PLUGIN_API_MINOR, ")"));
    }
    KernelCall call;
    call.device = args->device;
    call.op = static_cast<MixrtOp>(args->op);
    call.attrs = args->attrs;
    for (int32_t i = 0; i < args->num_inputs; ++i) {
      call.inputs.emplace_back(args->inputs[i]);
    }
    for (int32_t i = 0; i < args->num_outputs; ++i) {
      call.outputs.emplace_back(args->outputs[i]);
    }
    return State().plugin->Launch(call);
  });
}

MixrtError* GraphCreate(MixrtKernelGraph_Create_Args* args) {
  return Guard("kernel_graph_create", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtKernelGraph_Create_Args, "kernel_graph_create");
    MIXRT_RETURN_IF_ERROR(CheckDevice(args->device));
    if (args->num_steps < 0 ||
        (args->num_steps > 0 && args->steps == nullptr)) {
      return InvalidArgumentError(StrCat(
          "kernel_graph_create: bad step list (count ", args->num_steps, ")"));
    }
    Plugin* plugin = State().plugin.get();
    MIXRT_ASSIGN_OR_RETURN(
        std::unique_ptr<StepGraph> steps,
        StepGraph::Create(plugin, args->device, args->num_buffers,
                          MakeConstSpan(args->steps, args->num_steps)));
    MIXRT_ASSIGN_OR_RETURN(
        std::unique_ptr<KernelGraph> graph,
        plugin->CreateKernelGraph(args->device, std::move(steps)));
    args->graph = new MixrtKernelGraph{std::move(graph)};
    return OkStatus();
  });
}

MixrtError* GraphRun(MixrtKernelGraph_Run_Args* args) {
  return Guard("kernel_graph_run", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtKernelGraph_Run_Args, "kernel_graph_run");
    if (args->graph == nullptr) {
      return InvalidArgumentError("kernel_graph_run: graph is NULL");
    }
    KernelGraph& graph = *args->graph->graph;
    const int n = graph.num_buffers();
    if (n > 0 && args->buffers == nullptr) {
      return InvalidArgumentError("kernel_graph_run: buffers is NULL");
    }
    Status status = graph.Run(MakeConstSpan(args->buffers, n));
    if (!status.ok() &&
        MIXRT_STRUCT_HAS(args, MixrtKernelGraph_Run_Args, failed_step)) {
      args->failed_step = FailedStepOf(status);
    }
    return status;
  });
}

void GraphDestroy(MixrtKernelGraph_Destroy_Args* args) {
  if (args != nullptr) delete args->graph;
}

StatusOr<FusionGraph> DecodeFusionGraph(const MixrtFusionGraph* graph,
                                        std::string_view function) {
  if (graph == nullptr) {
    return InvalidArgumentError(StrCat(function, ": graph is NULL"));
  }
  return FusionGraph::Decode(*graph);
}

MixrtError* FusionClaim(MixrtFusion_Claim_Args* args) {
  return Guard("fusion_claim", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtFusion_Claim_Args, "fusion_claim");
    MIXRT_RETURN_IF_ERROR(CheckDevice(args->device));
    MIXRT_ASSIGN_OR_RETURN(FusionGraph graph,
                           DecodeFusionGraph(args->graph, "fusion_claim"));
    if (!graph.nodes.empty() && args->group_of_node == nullptr) {
      return InvalidArgumentError("fusion_claim: group_of_node is NULL");
    }
    MIXRT_ASSIGN_OR_RETURN(std::vector<int> groups,
                           State().plugin->ClaimFusion(args->device, graph));
    if (groups.size() != graph.nodes.size()) {
      return InternalError(StrCat("fusion_claim: the plugin answered for ",
                                  groups.size(), " nodes of ",
                                  graph.nodes.size()));
    }
    // Groups are numbered 0.. densely, so none reaches the node count (a
    // larger number would size the host's tables by the plugin's whim).
    int num_groups = 0;
    for (int g : groups) {
      if (g < -1) return InternalError("fusion_claim: a group below -1");
      if (g >= static_cast<int64_t>(groups.size())) {
        return InternalError(
            StrCat("fusion_claim: group ", g, " of ", groups.size(),
                   " nodes (groups are numbered from 0 densely)"));
      }
      num_groups = std::max(num_groups, g + 1);
    }
    std::vector<bool> seen(num_groups, false);
    for (int g : groups) {
      if (g >= 0) seen[g] = true;
    }
    for (int g = 0; g < num_groups; ++g) {
      if (!seen[g]) {
        return InternalError(StrCat("fusion_claim: group ", g, " has no node"));
      }
    }
    std::copy(groups.begin(), groups.end(), args->group_of_node);
    args->num_groups = num_groups;
    return OkStatus();
  });
}

MixrtError* FusionCompile(MixrtFusion_Compile_Args* args) {
  return Guard("fusion_compile", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtFusion_Compile_Args, "fusion_compile");
    MIXRT_RETURN_IF_ERROR(CheckDevice(args->device));
    MIXRT_ASSIGN_OR_RETURN(FusionGraph graph,
                           DecodeFusionGraph(args->graph, "fusion_compile"));
    if (!graph.nodes.empty() && args->group_of_node == nullptr) {
      return InvalidArgumentError("fusion_compile: group_of_node is NULL");
    }
    const auto groups = MakeConstSpan(args->group_of_node, graph.nodes.size());
    if (FusionGraph::GroupNodes(groups, args->group).empty()) {
      return InvalidArgumentError(
          StrCat("fusion_compile: group ", args->group, " has no node"));
    }
    MIXRT_ASSIGN_OR_RETURN(std::unique_ptr<FusedKernel> kernel,
                           State().plugin->CompileFusion(args->device, graph,
                                                         groups, args->group));
    const uint64_t scratch_bytes = kernel->ScratchBytes();
    if (scratch_bytes > 0 &&
        (State().table_minor < 2 ||
         !MIXRT_STRUCT_HAS(args, MixrtFusion_Compile_Args, scratch_bytes))) {
      return FailedPreconditionError(StrCat(
          "fusion_compile: the kernel needs ", scratch_bytes,
          " bytes of scratch memory, which only an ABI 1.2 host and table "
          "can hand over"));
    }
    auto* out = new MixrtFusedKernel{std::move(kernel), "",
                                     static_cast<int>(graph.values.size()),
                                     graph.num_symbols};
    out->description = out->kernel->Description();
    args->kernel = out;
    args->description = out->description.c_str();
    if (scratch_bytes > 0) args->scratch_bytes = scratch_bytes;
    return OkStatus();
  });
}

MixrtError* FusedKernelRun(MixrtFusedKernel_Run_Args* args) {
  return Guard("fused_kernel_run", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtFusedKernel_Run_Args, "fused_kernel_run");
    MixrtFusedKernel* k = args->kernel;
    if (k == nullptr) {
      return InvalidArgumentError("fused_kernel_run: kernel is NULL");
    }
    if ((k->num_values > 0 && args->value_data == nullptr) ||
        (k->num_symbols > 0 && args->symbol_sizes == nullptr)) {
      return InvalidArgumentError(
          "fused_kernel_run: value_data or symbol_sizes is NULL");
    }
    return k->kernel->Run(MakeConstSpan(args->value_data, k->num_values),
                          MakeConstSpan(args->symbol_sizes, k->num_symbols));
  });
}

MixrtError* FusedKernelSetWeightVersion(
    MixrtFusedKernel_SetWeightVersion_Args* args) {
  return Guard("fused_kernel_set_weight_version", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtFusedKernel_SetWeightVersion_Args,
                         "fused_kernel_set_weight_version");
    MixrtFusedKernel* k = args->kernel;
    if (k == nullptr || args->value < 0 || args->value >= k->num_values) {
      return InvalidArgumentError(
          "fused_kernel_set_weight_version: no such kernel or value");
    }
    k->kernel->SetWeightVersion(args->value, args->version);
    if (MIXRT_STRUCT_HAS(args, MixrtFusedKernel_SetWeightVersion_Args,
                         keeps_copy)) {
      args->keeps_copy = k->kernel->KeepsCopyOf(args->value) ? 1 : 0;
    }
    return OkStatus();
  });
}

MixrtError* FusedKernelSetScratch(MixrtFusedKernel_SetScratch_Args* args) {
  return Guard("fused_kernel_set_scratch", [&]() -> Status {
    MIXRT_SDK_CHECK_ARGS(MixrtFusedKernel_SetScratch_Args,
                         "fused_kernel_set_scratch");
    MixrtFusedKernel* k = args->kernel;
    if (k == nullptr) {
      return InvalidArgumentError("fused_kernel_set_scratch: kernel is NULL");
    }
    const uint64_t needed = k->kernel->ScratchBytes();
    if (args->scratch == nullptr || args->bytes < needed) {
      return InvalidArgumentError(
          StrCat("fused_kernel_set_scratch: the kernel needs ", needed,
                 " bytes, got ", args->bytes, " at ",
                 args->scratch == nullptr ? "NULL" : "an address"));
    }
    k->kernel->SetScratch(args->scratch);
    return OkStatus();
  });
}

void FusedKernelDestroy(MixrtFusedKernel_Destroy_Args* args) {
  if (args != nullptr) delete args->kernel;
}

}  // namespace

// ---- Plugin defaults
// ---------------------------------------------------------

Capability Plugin::GetOpSupport(int device, const OpQuery& query) {
  const OpTable* ops = Ops();
  if (ops == nullptr) {
    return Unsupported(
        "the plugin declares no ops: return its sdk::OpTable from "
        "Plugin::Ops() or answer Plugin::GetOpSupport");
  }
  if (std::string lacks = ops->Lacks(query); !lacks.empty()) {
    return Unsupported(std::move(lacks));
  }
  // The class's speed in the floating dtype involved (a cast from an
  // integer is asked at its output's dtype); all-integer ops run natively.
  const MixrtDtype floating =
      IsFloatingDtype(query.dtype) ? query.dtype : query.out_dtype;
  if (!IsFloatingDtype(floating)) return {MIXRT_SUPPORT_NATIVE, "", 0.0};
  return GetCapability(device, MixrtOpClassOf(query.op), floating);
}

Capability Plugin::OpSupportFromClassMatrix(int device, const OpQuery& query) {
  const MixrtOpClass op_class = MixrtOpClassOf(query.op);
  if (op_class == MIXRT_OP_CLASS_COUNT) {
    return Unsupported(
        StrCat("this plugin does not know op ", MixrtOpName(query.op)));
  }
  if (query.dtype != MIXRT_DTYPE_F32 && query.dtype != MIXRT_DTYPE_F16 &&
      query.dtype != MIXRT_DTYPE_BF16) {
    return {MIXRT_SUPPORT_NATIVE, "", 0.0};
  }
  return GetCapability(device, op_class, query.dtype);
}

StatusOr<MemoryInfo> Plugin::GetMemoryInfo(int /*device*/) {
  return UnimplementedError("this plugin does not report its device's memory");
}

Capability Plugin::GetPrecisionSupport(int /*device*/,
                                       MixrtOpClass /*op_class*/,
                                       MixrtPrecision /*precision*/) {
  return Unsupported("not declared by this plugin");
}

Status Plugin::AcceptHost(uint32_t host_major, uint32_t host_minor) {
  if (host_major != MIXRT_PLUGIN_API_MAJOR) {
    return FailedPreconditionError(StrCat("the plugin was built for ABI ",
                                          MIXRT_PLUGIN_API_MAJOR,
                                          ".x; the host "
                                          "speaks ",
                                          host_major, ".", host_minor));
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<KernelGraph>> Plugin::CreateKernelGraph(
    int /*device*/, std::unique_ptr<StepGraph> steps) {
  return steps;
}

StatusOr<std::vector<int>> Plugin::ClaimFusion(int /*device*/,
                                               const FusionGraph& graph) {
  return std::vector<int>(graph.nodes.size(), -1);
}

StatusOr<std::unique_ptr<FusedKernel>> Plugin::CompileFusion(
    int /*device*/, const FusionGraph& /*graph*/,
    Span<const int> /*group_of_node*/, int group) {
  return UnimplementedError(
      StrCat("this plugin compiles no fusion group (asked for ", group, ")"));
}

// ---- HostMemoryPlugin ------------------------------------------------------

StatusOr<void*> HostMemoryPlugin::Allocate(int device, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  const uint64_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded < bytes) {
    return ResourceExhaustedError(StrCat("cannot allocate ", bytes,
                                         " bytes on host device ", device,
                                         ": size overflows"));
  }
  void* ptr = std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) {
    return ResourceExhaustedError(StrCat("out of host memory allocating ",
                                         bytes, " bytes on device ", device));
  }
  return ptr;
}

Status HostMemoryPlugin::Free(int /*device*/, void* ptr) {
  std::free(ptr);
  return OkStatus();
}

Status HostMemoryPlugin::Copy(int /*device*/, MixrtCopyKind /*kind*/, void* dst,
                              const void* src, uint64_t bytes) {
  if (bytes > 0) std::memmove(dst, src, bytes);
  return OkStatus();
}

Status HostMemoryPlugin::Memset(int /*device*/, void* dst, uint8_t value,
                                uint64_t bytes) {
  if (bytes > 0) std::memset(dst, value, bytes);
  return OkStatus();
}

Status HostMemoryPlugin::Synchronize(int /*device*/) { return OkStatus(); }

StatusOr<MemoryInfo> HostMemoryPlugin::GetMemoryInfo(int /*device*/) {
  const long page = sysconf(_SC_PAGESIZE);
  const long total = sysconf(_SC_PHYS_PAGES);
  const long available = sysconf(_SC_AVPHYS_PAGES);
  if (page <= 0 || total <= 0 || available < 0) {
    return UnavailableError("sysconf cannot tell the machine's memory");
  }
  return MemoryInfo{static_cast<uint64_t>(available) * page,
                    static_cast<uint64_t>(total) * page};
}

namespace internal {

const MixrtPluginApi* GetApi(PluginFactory factory, uint32_t host_major,
                             uint32_t host_minor, uint32_t table_minor) {
  static const MixrtPluginApi* api = [=]() {
    PluginState& state = State();
    state.plugin.reset(factory());
    state.info = state.plugin->Info();
    state.table_minor = table_minor;
    auto* table = new MixrtPluginApi();
    std::memset(table, 0, sizeof(*table));
    // Laid out as the header of that minor version had it: an older
    // layout ends earlier and leaves the later entries out.
    const bool is_1_0 = table_minor == 0;
    const bool is_1_1 = table_minor == 1;
    table->struct_size = is_1_0   ? MIXRT_PLUGIN_API_STRUCT_SIZE_1_0
                         : is_1_1 ? MIXRT_PLUGIN_API_STRUCT_SIZE_1_1
                                  : sizeof(MixrtPluginApi);
    table->abi_major = MIXRT_PLUGIN_API_MAJOR;
    table->abi_minor = is_1_0 ? 0 : is_1_1 ? 1 : MIXRT_PLUGIN_API_MINOR;
    if (!is_1_0 && !is_1_1) {
      table->device_get_memory_info = &GetMemoryInfo;
      table->profiler_range = &ProfilerRange;
      table->device_get_precision_support = &GetPrecisionSupport;
      table->fused_kernel_set_scratch = &FusedKernelSetScratch;
    }
    if (!is_1_0) {
      table->device_get_op_support = &GetOpSupport;
      table->kernel_graph_create = &GraphCreate;
      table->kernel_graph_run = &GraphRun;
      table->kernel_graph_destroy = &GraphDestroy;
      table->fusion_claim = &FusionClaim;
      table->fusion_compile = &FusionCompile;
      table->fused_kernel_run = &FusedKernelRun;
      table->fused_kernel_destroy = &FusedKernelDestroy;
      table->fused_kernel_set_weight_version = &FusedKernelSetWeightVersion;
    }
    table->error_destroy = &ErrorDestroy;
    table->error_message = &ErrorMessage;
    table->error_get_code = &ErrorGetCode;
    table->plugin_get_info = &GetInfo;
    table->plugin_initialize = &Initialize;
    table->plugin_shutdown = &Shutdown;
    table->device_count = &CountDevices;
    table->device_get_properties = &GetProperties;
    table->device_get_capability = &GetCapability;
    table->device_synchronize = &Synchronize;
    table->memory_allocate = &Allocate;
    table->memory_free = &Free;
    table->memory_copy = &Copy;
    table->memory_set = &Set;
    table->kernel_launch = &Launch;
    return table;
  }();
  // Asked at every entry call: the host that calls plugin_initialize next
  // is the one that was just asked about.
  PluginState& state = State();
  try {
    state.host_declined = state.plugin->AcceptHost(host_major, host_minor);
  } catch (const std::exception& e) {
    state.host_declined =
        InternalError(StrCat("AcceptHost threw an exception: ", e.what()));
  }
  return api;
}

}  // namespace internal
}  // namespace mixrt::sdk
