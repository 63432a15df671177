#include "core/plugin/isolation/plugin_host_server.h"

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/shared_library.h"
#include "core/plugin/isolation/fusion_graph_codec.h"
#include "core/plugin/isolation/kernel_graph_codec.h"
#include "core/plugin/isolation/shared_channel.h"
#include "core/plugin/isolation/wire_format.h"

namespace mixrt::isolation {
namespace {

// Strings from the plugin are cut here, as the in-process loader cuts them.
std::string Text(const char* s) {
  return s == nullptr ? std::string() : std::string(s, strnlen(s, 4096));
}

// Ends this process and everything the plugin forked (the host started
// this process as its group's leader).
[[noreturn]] void KillOwnGroup() {
  // Never a group this process does not lead: that one is its starter's.
  if (getpgrp() == getpid()) kill(0, SIGKILL);
  _exit(1);
}

// While the plugin works on a call (or hangs in one), a thread of this
// process notices the host's exit: the plugin's process group must not
// outlive the process it serves.
void WatchForHostExit() {
  const pid_t host = getppid();
  std::thread([host] {
    while (getppid() == host) usleep(200 * 1000);
    KillOwnGroup();
  }).detach();
}

class Server {
 public:
  Server(ChannelBlock* block, unsigned char* arena, uint64_t arena_bytes,
         std::string path)
      : block_(block),
        arena_(arena),
        arena_bytes_(arena_bytes),
        path_(std::move(path)) {}

  // Answers calls until kShutdown (0); when the host is gone, ends this
  // process and its group.
  int Run() {
    const pid_t host = getppid();
    // Idle, not what the block holds now: the host may have posted its
    // first request before this process got here.
    uint32_t seen = kIdle;
    while (true) {
      // Yielding now and then: the plugin's own workers spin after a
      // kernel too, and on a machine with as many busy threads as cores a
      // pure spin here would hold the core the host needs to send the next
      // call.
      const uint32_t state =
          WaitForChange(block_, seen, absl::Microseconds(50),
                        absl::Milliseconds(200), /*yield_while_spinning=*/true);
      if (state == seen) {
        if (getppid() != host) KillOwnGroup();  // Orphaned: the host exited.
        continue;
      }
      seen = state;
      if (state != kRequest) continue;
      const bool keep_going = Serve(static_cast<Call>(block_->call));
      seen = kResponse;
      if (!keep_going) return 0;
    }
  }

 private:
  // One request; false after kShutdown.
  bool Serve(Call call) {
    // The request is read into locals before the response overwrites the
    // payload: every handler reads all it needs first.
    const uint64_t sequence = block_->request_sequence;
    const size_t bytes = std::min<size_t>(block_->request_bytes, kPayloadBytes);
    std::vector<unsigned char> copy(block_->payload, block_->payload + bytes);
    MessageReader request(copy.data(), copy.size());
    MessageWriter out(block_->payload);
    const bool keep_going = Dispatch(call, request, out);
    block_->response_bytes = static_cast<uint32_t>(out.size());
    block_->response_sequence = sequence;
    Publish(block_, kResponse);
    return keep_going;
  }

  bool Dispatch(Call call, MessageReader& in, MessageWriter& out) {
    if (call != Call::kHello && api_ == nullptr) {
      Error(out, MIXRT_ERROR_CODE_FAILED_PRECONDITION, "no plugin loaded");
      return true;
    }
    switch (call) {
      case Call::kHello:
        Hello(out);
        return true;
      case Call::kGetInfo:
        GetInfo(out);
        return true;
      case Call::kInitialize: {
        MixrtPlugin_Initialize_Args a{};
        a.struct_size = sizeof(a);
        Result(out, api_->plugin_initialize(&a));
        return true;
      }
      case Call::kShutdown: {
        MixrtPlugin_Shutdown_Args a{};
        a.struct_size = sizeof(a);
        Result(out, api_->plugin_shutdown != nullptr ? api_->plugin_shutdown(&a)
                                                     : nullptr);
        return false;
      }
      case Call::kDeviceCount: {
        MixrtDevice_Count_Args a{};
        a.struct_size = sizeof(a);
        if (Result(out, api_->device_count(&a))) {
          out.Put(a.count);
          out.PutString(Text(a.no_device_reason));
        }
        return true;
      }
      case Call::kGetProperties: {
        MixrtDevice_GetProperties_Args a{};
        a.struct_size = sizeof(a);
        in.Get(&a.device);
        if (Result(out, api_->device_get_properties(&a))) {
          out.PutString(Text(a.name));
          out.Put(a.total_memory);
          out.Put(a.flags);
          out.Put(a.alignment);
        }
        return true;
      }
      case Call::kGetCapability: {
        MixrtDevice_GetCapability_Args a{};
        a.struct_size = sizeof(a);
        in.Get(&a.device);
        in.Get(&a.op_class);
        in.Get(&a.dtype);
        if (Result(out, api_->device_get_capability(&a))) {
          out.Put(a.level);
          out.PutString(Text(a.reason));
          out.Put(a.speed_vs_f32);
        }
        return true;
      }
      case Call::kGetOpSupport:
        GetOpSupport(in, out);
        return true;
      case Call::kGetMemoryInfo:
        GetMemoryInfo(in, out);
        return true;
      case Call::kGetPrecisionSupport:
        GetPrecisionSupport(in, out);
        return true;
      case Call::kAllocate: {
        MixrtMemory_Allocate_Args a{};
        a.struct_size = sizeof(a);
        in.Get(&a.device);
        in.Get(&a.bytes);
        if (Result(out, api_->memory_allocate(&a))) {
          out.Put(reinterpret_cast<uint64_t>(a.ptr));
        }
        return true;
      }
      case Call::kFree: {
        MixrtMemory_Free_Args a{};
        a.struct_size = sizeof(a);
        WireRef ref;
        in.Get(&a.device);
        in.Get(&ref);
        a.ptr = Resolve(ref);
        Result(out, api_->memory_free(&a));
        return true;
      }
      case Call::kCopy: {
        MixrtMemory_Copy_Args a{};
        a.struct_size = sizeof(a);
        WireRef dst, src;
        in.Get(&a.device);
        in.Get(&a.kind);
        in.Get(&dst);
        in.Get(&src);
        in.Get(&a.bytes);
        a.dst = Resolve(dst);
        a.src = Resolve(src);
        Result(out, api_->memory_copy(&a));
        return true;
      }
      case Call::kSet: {
        MixrtMemory_Set_Args a{};
        a.struct_size = sizeof(a);
        WireRef dst;
        in.Get(&a.device);
        in.Get(&dst);
        in.Get(&a.value);
        in.Get(&a.bytes);
        a.dst = Resolve(dst);
        Result(out,
               api_->memory_set != nullptr ? api_->memory_set(&a) : nullptr);
        return true;
      }
      case Call::kSynchronize: {
        MixrtDevice_Synchronize_Args a{};
        a.struct_size = sizeof(a);
        in.Get(&a.device);
        Result(out, api_->device_synchronize(&a));
        return true;
      }
      case Call::kLaunch:
        Launch(in, out);
        return true;
      case Call::kFusionClaim:
        FusionClaim(in, out);
        return true;
      case Call::kFusionCompile:
        FusionCompile(in, out);
        return true;
      case Call::kFusedRun:
        FusedRun(in, out);
        return true;
      case Call::kFusedDestroy:
        FusedDestroy(in, out);
        return true;
      case Call::kFusedSetWeightVersion:
        FusedSetWeightVersion(in, out);
        return true;
      case Call::kFusedSetScratch:
        FusedSetScratch(in, out);
        return true;
      case Call::kGraphCreate:
        GraphCreate(in, out);
        return true;
      case Call::kGraphRun:
        GraphRun(in, out);
        return true;
      case Call::kGraphDestroy:
        GraphDestroy(in, out);
        return true;
    }
    Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT,
          absl::StrCat("unknown call ", static_cast<uint32_t>(call)));
    return true;
  }

  void Hello(MessageWriter& out) {
    if (api_ != nullptr) {
      Error(out, MIXRT_ERROR_CODE_FAILED_PRECONDITION, "already loaded");
      return;
    }
    // The host judged where the plugin lies before starting this process.
    files::SharedLibraryOptions load;
    load.trusted_location = false;
    absl::StatusOr<void*> loaded = files::LoadSharedLibrary(path_, load);
    if (!loaded.ok()) {
      Error(out, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
            std::string(loaded.status().message()));
      return;
    }
    void* handle = *loaded;
    auto* entry = reinterpret_cast<MixrtPluginEntryFn*>(
        dlsym(handle, MIXRT_PLUGIN_ENTRY_SYMBOL));
    if (entry == nullptr) {
      Error(out, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
            absl::StrCat("plugin ", path_, " refused: it does not export ",
                         MIXRT_PLUGIN_ENTRY_SYMBOL));
      return;
    }
    const MixrtPluginApi* api =
        entry(MIXRT_PLUGIN_API_MAJOR, MIXRT_PLUGIN_API_MINOR);
    if (api == nullptr || api->struct_size < MIXRT_PLUGIN_API_STRUCT_SIZE_1_0) {
      Error(out, MIXRT_ERROR_CODE_FAILED_PRECONDITION,
            absl::StrCat("plugin ", path_,
                         " refused: no ABI 1.x table (NULL or too small)"));
      return;
    }
    int32_t score = 1;
    uint32_t has_score = 0;
    if (auto* score_fn = reinterpret_cast<MixrtPluginScoreFn*>(
            dlsym(handle, MIXRT_PLUGIN_SCORE_SYMBOL))) {
      score = score_fn();
      has_score = 1;
    }
    api_ = api;
    uint32_t bits = table_bits();
    if (api->plugin_shutdown != nullptr) bits |= kHasShutdown;
    if (api->memory_set != nullptr) bits |= kHasMemorySet;
    Ok(out);
    out.Put(api->abi_major);
    out.Put(api->abi_minor);
    out.Put(bits);
    out.Put(has_score);
    out.Put(score);
  }

  void GetInfo(MessageWriter& out) {
    MixrtPlugin_GetInfo_Args a{};
    a.struct_size = sizeof(a);
    if (!Result(out, api_->plugin_get_info(&a))) return;
    out.PutString(Text(a.name));
    out.PutString(Text(a.version));
    out.PutString(Text(a.build_info));
    out.PutString(Text(a.device_type));
  }

  void GetOpSupport(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasOpSupport)) return;
    MixrtDevice_GetOpSupport_Args a{};
    a.struct_size = sizeof(a);
    in.Get(&a.device);
    in.Get(&a.op);
    in.Get(&a.variant);
    in.Get(&a.dtype);
    in.Get(&a.out_dtype);
    if (!Result(out, api_->device_get_op_support(&a))) return;
    out.Put(a.level);
    out.PutString(Text(a.reason));
  }

  void GetMemoryInfo(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasMemoryInfo)) return;
    MixrtDevice_GetMemoryInfo_Args a{};
    a.struct_size = sizeof(a);
    in.Get(&a.device);
    if (!Result(out, api_->device_get_memory_info(&a))) return;
    out.Put(a.free_bytes);
    out.Put(a.total_bytes);
  }

  void GetPrecisionSupport(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasPrecisionSupport)) return;
    MixrtDevice_GetPrecisionSupport_Args a{};
    a.struct_size = sizeof(a);
    in.Get(&a.device);
    in.Get(&a.op_class);
    in.Get(&a.precision);
    if (!Result(out, api_->device_get_precision_support(&a))) return;
    out.Put(a.level);
    out.PutString(Text(a.reason));
    out.Put(a.speed_vs_f32);
  }

  void Launch(MessageReader& in, MessageWriter& out) {
    MixrtKernel_Launch_Args a{};
    a.struct_size = sizeof(a);
    in.Get(&a.device);
    in.Get(&a.op);
    in.Get(&a.num_inputs);
    in.Get(&a.num_outputs);
    const int64_t count = static_cast<int64_t>(a.num_inputs) +
                          static_cast<int64_t>(a.num_outputs);
    if (a.num_inputs < 0 || a.num_outputs < 0 || count > kMaxLaunchTensors) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "bad tensor counts");
      return;
    }
    wire_.resize(count);
    descs_.resize(count);
    for (int64_t i = 0; i < count; ++i) {
      WireTensorDesc& w = wire_[i];
      if (!in.Get(&w) || w.ndim < 0 || w.ndim > MIXRT_MAX_DIMS) {
        Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "bad tensor descriptor");
        return;
      }
      MixrtTensorDesc& d = descs_[i];
      d = MixrtTensorDesc{};
      d.struct_size = sizeof(d);
      d.data = Resolve(w.data);
      d.dtype = w.dtype;
      d.ndim = w.ndim;
      d.shape = w.shape;
      d.strides = w.strides;
    }
    uint32_t attr_bytes = 0;
    in.Get(&attr_bytes);
    const unsigned char* attrs = nullptr;
    if (attr_bytes > kMaxAttrBytes || !in.View(&attrs, attr_bytes)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "bad attributes");
      return;
    }
    // Aligned for the doubles inside; the extension chain does not cross
    // processes.
    alignas(16) unsigned char attr_copy[kMaxAttrBytes];
    if (attr_bytes > 0) {
      std::memcpy(attr_copy, attrs, attr_bytes);
      if (attr_bytes >= sizeof(size_t) + sizeof(void*)) {
        std::memset(attr_copy + sizeof(size_t), 0, sizeof(void*));
      }
    }
    a.inputs = descs_.data();
    a.outputs = descs_.data() + a.num_inputs;
    a.attrs = attr_bytes > 0 ? attr_copy : nullptr;
    Result(out, api_->kernel_launch(&a));
  }

  void FusionClaim(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasFusion)) return;
    MixrtFusion_Claim_Args a{};
    a.struct_size = sizeof(a);
    DecodedFusionGraph graph;
    if (!in.Get(&a.device) || !graph.Read(in)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed fusion graph");
      return;
    }
    std::vector<int32_t> groups(graph.graph().num_nodes, -1);
    a.graph = &graph.graph();
    a.group_of_node = groups.data();
    if (!Result(out, api_->fusion_claim(&a))) return;
    out.Put(a.num_groups);
    out.PutBytes(groups.data(), sizeof(int32_t) * groups.size());
  }

  void FusionCompile(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasFusion)) return;
    MixrtFusion_Compile_Args a{};
    a.struct_size = sizeof(a);
    DecodedFusionGraph graph;
    if (!in.Get(&a.device) || !graph.Read(in)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed fusion graph");
      return;
    }
    std::vector<int32_t> groups(graph.graph().num_nodes, -1);
    if (!in.GetBytes(groups.data(), sizeof(int32_t) * groups.size()) ||
        !in.Get(&a.group)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed fusion groups");
      return;
    }
    a.graph = &graph.graph();
    a.group_of_node = groups.data();
    if (!Result(out, api_->fusion_compile(&a))) return;
    out.Put(reinterpret_cast<uint64_t>(a.kernel));
    out.PutString(Text(a.description));
    out.Put(a.scratch_bytes);
  }

  void FusedRun(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasFusion)) return;
    MixrtFusedKernel_Run_Args a{};
    a.struct_size = sizeof(a);
    uint64_t kernel = 0;
    int32_t num_symbols = 0;
    if (!in.Get(&kernel) || !ReadPlaces(in)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed fused run");
      return;
    }
    if (!in.Get(&num_symbols) || num_symbols < 0 || num_symbols > (1 << 16)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed fused run");
      return;
    }
    run_sizes_.resize(num_symbols);
    if (!in.GetBytes(run_sizes_.data(), sizeof(int64_t) * num_symbols)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed fused run");
      return;
    }
    a.kernel = reinterpret_cast<MixrtFusedKernel*>(kernel);
    a.value_data = run_data_.data();
    a.symbol_sizes = num_symbols > 0 ? run_sizes_.data() : nullptr;
    Result(out, api_->fused_kernel_run(&a));
  }

  void FusedDestroy(MessageReader& in, MessageWriter& out) {
    MixrtFusedKernel_Destroy_Args a{};
    a.struct_size = sizeof(a);
    uint64_t kernel = 0;
    in.Get(&kernel);
    a.kernel = reinterpret_cast<MixrtFusedKernel*>(kernel);
    if ((table_bits() & kHasFusion) != 0) api_->fused_kernel_destroy(&a);
    Ok(out);
  }

  void FusedSetWeightVersion(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasWeightVersion)) return;
    MixrtFusedKernel_SetWeightVersion_Args a{};
    a.struct_size = sizeof(a);
    uint64_t kernel = 0;
    in.Get(&kernel);
    in.Get(&a.value);
    in.Get(&a.version);
    a.kernel = reinterpret_cast<MixrtFusedKernel*>(kernel);
    if (!Result(out, api_->fused_kernel_set_weight_version(&a))) return;
    out.Put(a.keeps_copy);
  }

  void FusedSetScratch(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasScratch)) return;
    MixrtFusedKernel_SetScratch_Args a{};
    a.struct_size = sizeof(a);
    uint64_t kernel = 0;
    WireRef scratch;
    in.Get(&kernel);
    in.Get(&scratch);
    in.Get(&a.bytes);
    a.kernel = reinterpret_cast<MixrtFusedKernel*>(kernel);
    a.scratch = Resolve(scratch);
    Result(out, api_->fused_kernel_set_scratch(&a));
  }

  void GraphCreate(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasKernelGraphs)) return;
    MixrtKernelGraph_Create_Args a{};
    a.struct_size = sizeof(a);
    DecodedKernelGraphSteps steps;
    if (!in.Get(&a.device) || !in.Get(&a.num_buffers) || a.num_buffers < 0 ||
        !steps.Read(in, a.num_buffers)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed kernel graph");
      return;
    }
    a.num_steps = steps.count();
    a.steps = steps.steps();
    if (!Result(out, api_->kernel_graph_create(&a))) return;
    out.Put(reinterpret_cast<uint64_t>(a.graph));
  }

  // The failed step follows the status, on success and on error alike.
  void GraphRun(MessageReader& in, MessageWriter& out) {
    if (!Has(out, kHasKernelGraphs)) return;
    MixrtKernelGraph_Run_Args a{};
    a.struct_size = sizeof(a);
    a.failed_step = -1;
    uint64_t graph = 0;
    if (!in.Get(&graph) || !ReadPlaces(in)) {
      Error(out, MIXRT_ERROR_CODE_INVALID_ARGUMENT, "malformed graph run");
      return;
    }
    a.graph = reinterpret_cast<MixrtKernelGraph*>(graph);
    a.buffers = run_data_.data();
    Result(out, api_->kernel_graph_run(&a));
    out.Put(a.failed_step);
  }

  void GraphDestroy(MessageReader& in, MessageWriter& out) {
    MixrtKernelGraph_Destroy_Args a{};
    a.struct_size = sizeof(a);
    uint64_t graph = 0;
    in.Get(&graph);
    a.graph = reinterpret_cast<MixrtKernelGraph*>(graph);
    if ((table_bits() & kHasKernelGraphs) != 0) api_->kernel_graph_destroy(&a);
    Ok(out);
  }

  // A count, then that many places, resolved into run_data_.
  bool ReadPlaces(MessageReader& in) {
    int32_t count = 0;
    if (!in.Get(&count) || count < 0 || count > (1 << 20)) return false;
    run_data_.resize(count);
    for (int32_t i = 0; i < count; ++i) {
      WireRef ref;
      if (!in.Get(&ref)) return false;
      run_data_[i] = Resolve(ref);
    }
    return true;
  }

  void* Resolve(const WireRef& ref) const {
    switch (static_cast<Space>(ref.space)) {
      case Space::kArena:
        return ref.value < arena_bytes_ ? arena_ + ref.value : nullptr;
      case Space::kDevice:
        return reinterpret_cast<void*>(ref.value);
      case Space::kNull:
        break;
    }
    return nullptr;
  }

  bool Has(MessageWriter& out, uint32_t bit) {
    if ((table_bits() & bit) != 0) return true;
    Error(out, MIXRT_ERROR_CODE_UNIMPLEMENTED, "the plugin has no such call");
    return false;
  }
  uint32_t table_bits() const {
    uint32_t bits = 0;
    const auto has = [this](size_t through, const void* fn) {
      return api_->struct_size >= through && fn != nullptr;
    };
    if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, device_get_op_support),
            reinterpret_cast<const void*>(api_->device_get_op_support))) {
      bits |= kHasOpSupport;
    }
    if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, device_get_memory_info),
            reinterpret_cast<const void*>(api_->device_get_memory_info))) {
      bits |= kHasMemoryInfo;
    }
    if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi,
                                      device_get_precision_support),
            reinterpret_cast<const void*>(
                api_->device_get_precision_support))) {
      bits |= kHasPrecisionSupport;
    }
    if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, kernel_graph_destroy),
            reinterpret_cast<const void*>(api_->kernel_graph_create)) &&
        api_->kernel_graph_run != nullptr &&
        api_->kernel_graph_destroy != nullptr) {
      bits |= kHasKernelGraphs;
    }
    if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi, fused_kernel_destroy),
            reinterpret_cast<const void*>(api_->fusion_claim)) &&
        api_->fusion_compile != nullptr && api_->fused_kernel_run != nullptr &&
        api_->fused_kernel_destroy != nullptr) {
      bits |= kHasFusion;
      if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi,
                                        fused_kernel_set_weight_version),
              reinterpret_cast<const void*>(
                  api_->fused_kernel_set_weight_version))) {
        bits |= kHasWeightVersion;
      }
      if (has(MIXRT_STRUCT_SIZE_THROUGH(MixrtPluginApi,
                                        fused_kernel_set_scratch),
              reinterpret_cast<const void*>(api_->fused_kernel_set_scratch))) {
        bits |= kHasScratch;
      }
    }
    return bits;
  }

  static void Ok(MessageWriter& out) {
    out.Put(static_cast<uint32_t>(MIXRT_ERROR_CODE_OK));
    out.PutString("");
  }
  static void Error(MessageWriter& out, MixrtErrorCode code,
                    const std::string& message) {
    out.Put(static_cast<uint32_t>(code));
    out.PutString(message);
  }
  // Writes the call's outcome; true when it succeeded (outputs follow).
  bool Result(MessageWriter& out, MixrtError* error) {
    if (error == nullptr) {
      Ok(out);
      return true;
    }
    MixrtError_GetCode_Args code{};
    code.struct_size = sizeof(code);
    code.error = error;
    api_->error_get_code(&code);
    MixrtError_Message_Args message{};
    message.struct_size = sizeof(message);
    message.error = error;
    api_->error_message(&message);
    const std::string text =
        message.message == nullptr
            ? std::string()
            : std::string(message.message, strnlen(message.message, 4096));
    MixrtError_Destroy_Args destroy{};
    destroy.struct_size = sizeof(destroy);
    destroy.error = error;
    api_->error_destroy(&destroy);
    Error(out,
          code.code == MIXRT_ERROR_CODE_OK
              ? MIXRT_ERROR_CODE_INTERNAL
              : static_cast<MixrtErrorCode>(code.code),
          text);
    return false;
  }

  ChannelBlock* block_;
  unsigned char* arena_;
  uint64_t arena_bytes_;
  std::string path_;
  const MixrtPluginApi* api_ = nullptr;
  std::vector<WireTensorDesc> wire_;
  std::vector<MixrtTensorDesc> descs_;
  std::vector<void*> run_data_;
  std::vector<int64_t> run_sizes_;
};

}  // namespace

// The channel and arena arrive at kChannelFd and kArenaFd (wire_format.h).
int ServePlugin(const std::string& plugin_path, uint64_t arena_bytes) {
  // This binary's crash handlers (a sanitizer's) would turn the plugin's
  // fault into an exit of their own; the default action lets the host name
  // the signal that ended the plugin.
  for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) {
    signal(sig, SIG_DFL);
  }
  absl::StatusOr<void*> channel = MapShared(kChannelFd, sizeof(ChannelBlock));
  if (!channel.ok()) {
    std::fprintf(stderr, "mixrt-plugin-host: %s\n",
                 std::string(channel.status().message()).c_str());
    return 2;
  }
  auto* block = static_cast<ChannelBlock*>(*channel);
  if (block->magic != kChannelMagic || block->version != kWireVersion) {
    std::fprintf(stderr,
                 "mixrt-plugin-host: the channel is not this build's "
                 "(version %u, expected %u)\n",
                 block->version, kWireVersion);
    return 2;
  }
  unsigned char* arena = nullptr;
  if (arena_bytes > 0) {
    absl::StatusOr<void*> mapped = MapShared(kArenaFd, arena_bytes);
    if (!mapped.ok()) {
      std::fprintf(stderr, "mixrt-plugin-host: %s\n",
                   std::string(mapped.status().message()).c_str());
      return 2;
    }
    arena = static_cast<unsigned char*>(*mapped);
  }
  WatchForHostExit();
  Server server(block, arena, arena_bytes, plugin_path);
  return server.Run();
}

}  // namespace mixrt::isolation
