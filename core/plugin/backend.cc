#include "core/plugin/backend.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/allocator/caching_allocator.h"
#include "mixrt/op_class.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt {

absl::string_view OpClassName(MixrtOpClass op_class) {
  static constexpr absl::string_view kNames[MIXRT_OP_CLASS_COUNT] = {
      "matmul",    "conv",    "pool",          "elementwise",
      "reduction", "softmax", "normalization", "loss",
      "embedding", "cast",    "optimizer"};
  return op_class < MIXRT_OP_CLASS_COUNT ? kNames[op_class] : "?";
}

absl::string_view SupportLevelName(MixrtSupportLevel level) {
  switch (level) {
    case MIXRT_SUPPORT_NATIVE:
      return "native";
    case MIXRT_SUPPORT_SLOW:
      return "slow";
    default:
      return "unsupported";
  }
}

absl::string_view PrecisionName(MixrtPrecision precision) {
  switch (precision) {
    case MIXRT_PRECISION_TF32:
      return "tf32";
    case MIXRT_PRECISION_FP8_E4M3:
      return "fp8_e4m3";
    case MIXRT_PRECISION_FP8_E5M2:
      return "fp8_e5m2";
    default:
      return "unknown precision";
  }
}

std::string BackendCacheKey(const BackendIdentity& id) {
  return absl::StrCat("backend ", id.name, " ", id.version, " abi ",
                      id.abi_major, ".", id.abi_minor, " ", id.build_info,
                      " file ", id.file_stamp, "\n");
}

std::string OpSignatureName(const OpSignature& sig) {
  const char* variant = MixrtOpVariantName(sig.op, sig.variant);
  return absl::StrCat(MixrtOpName(sig.op), *variant != '\0' ? "/" : "", variant,
                      " ", DTypeName(sig.dtype),
                      sig.out_dtype != sig.dtype
                          ? absl::StrCat("->", DTypeName(sig.out_dtype))
                          : "");
}

namespace {

// Signatures with op < kCachedOps and variant < kCachedVariants are cached.
constexpr uint32_t kCachedOps = 64;
constexpr uint32_t kCachedVariants = 32;
constexpr size_t kOpSlots =
    size_t{kCachedOps} * kCachedVariants * kNumDTypes * kNumDTypes;

int OpSlot(const OpSignature& sig) {
  if (static_cast<uint32_t>(sig.op) >= kCachedOps ||
      sig.variant >= kCachedVariants) {
    return -1;
  }
  return ((static_cast<int>(sig.op) * kCachedVariants + sig.variant) *
              kNumDTypes +
          static_cast<int>(sig.dtype)) *
             kNumDTypes +
         static_cast<int>(sig.out_dtype);
}

// A plugin's message_size is not trusted: a wrong one must not make the host
// read past the string, so the length is the NUL's position, at most
// message_size and at most 4 KiB.
size_t BoundedMessageLength(const MixrtError_Message_Args& msg) {
  constexpr size_t kMaxMessage = 4096;
  return strnlen(msg.message, std::min(msg.message_size, kMaxMessage));
}

}  // namespace

absl::Status StatusFromErrorCode(MixrtErrorCode code, const std::string& text) {
  switch (code) {
    case MIXRT_ERROR_CODE_OK:
      return absl::OkStatus();
    case MIXRT_ERROR_CODE_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(text);
    case MIXRT_ERROR_CODE_UNIMPLEMENTED:
      return absl::UnimplementedError(text);
    case MIXRT_ERROR_CODE_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(text);
    case MIXRT_ERROR_CODE_NO_DEVICE:
      return absl::NotFoundError(text);
    case MIXRT_ERROR_CODE_FAILED_PRECONDITION:
      return absl::FailedPreconditionError(text);
    case MIXRT_ERROR_CODE_UNAVAILABLE:
      return absl::UnavailableError(text);
    default:
      return absl::InternalError(text);
  }
}

absl::Status PluginErrorToStatus(const MixrtPluginApi* api, MixrtError* error,
                                 absl::string_view backend,
                                 absl::string_view what) {
  if (error == nullptr) return absl::OkStatus();
  MixrtError_Message_Args msg{};
  msg.struct_size = sizeof(msg);
  msg.error = error;
  api->error_message(&msg);
  MixrtError_GetCode_Args code{};
  code.struct_size = sizeof(code);
  code.error = error;
  code.code = MIXRT_ERROR_CODE_INTERNAL;
  api->error_get_code(&code);
  const std::string text = absl::StrCat(
      "backend '", backend, "' ", what, ": ",
      msg.message != nullptr
          ? absl::string_view(msg.message, BoundedMessageLength(msg))
          : absl::string_view("(no message)"));
  MixrtError_Destroy_Args destroy{};
  destroy.struct_size = sizeof(destroy);
  destroy.error = error;
  api->error_destroy(&destroy);
  return StatusFromErrorCode(static_cast<MixrtErrorCode>(code.code), text);
}

Backend::Backend(void* handle, const MixrtPluginApi* api,
                 BackendIdentity identity, std::vector<DeviceInfo> devices,
                 std::string no_device_reason)
    : handle_(handle),
      api_(api),
      identity_(std::move(identity)),
      devices_(std::move(devices)),
      no_device_reason_(std::move(no_device_reason)) {
  for (const DeviceInfo& device : devices_) {
    allocators_.push_back(
        std::make_unique<CachingAllocator>(this, device.index));
    op_runs_.push_back(std::make_unique<std::atomic<uint8_t>[]>(kOpSlots));
  }
}

// Plugins stay mapped: code and static data of the plugin may still be
// referenced by the process (see the header).
Backend::~Backend() = default;

absl::Status Backend::CheckDevice(int device) const {
  if (device < 0 || device >= static_cast<int>(devices_.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend '", name(), "' has no device ", device,
                     " (it has ", devices_.size(), ")"));
  }
  return absl::OkStatus();
}

CachingAllocator& Backend::allocator(int device) const {
  return *allocators_.at(device);
}

absl::StatusOr<void*> Backend::Allocate(int device, uint64_t bytes) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtMemory_Allocate_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.bytes = bytes;
  absl::Status s = PluginErrorToStatus(api_, api_->memory_allocate(&args),
                                       name(), "memory_allocate");
  if (!s.ok()) return s;
  if (args.ptr == nullptr && bytes > 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("backend '", name(), "' returned NULL allocating ", bytes,
                     " bytes on device ", device));
  }
  return args.ptr;
}

absl::Status Backend::Free(int device, void* ptr) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtMemory_Free_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.ptr = ptr;
  return PluginErrorToStatus(api_, api_->memory_free(&args), name(),
                             "memory_free");
}

absl::Status Backend::Copy(int device, MixrtCopyKind kind, void* dst,
                           const void* src, uint64_t bytes) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  MixrtMemory_Copy_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.kind = kind;
  args.dst = dst;
  args.src = src;
  args.bytes = bytes;
  return PluginErrorToStatus(api_, api_->memory_copy(&args), name(),
                             "memory_copy");
}

absl::Status Backend::Memset(int device, void* dst, uint8_t value,
                             uint64_t bytes) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  if (bytes == 0) return absl::OkStatus();
  if (api_->memory_set == nullptr) {
    // Optional in the ABI: fall back to a host buffer and a copy.
    std::string host(bytes, static_cast<char>(value));
    return Copy(device, MIXRT_COPY_HOST_TO_DEVICE, dst, host.data(), bytes);
  }
  MixrtMemory_Set_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.dst = dst;
  args.value = value;
  args.bytes = bytes;
  return PluginErrorToStatus(api_, api_->memory_set(&args), name(),
                             "memory_set");
}

absl::Status Backend::Synchronize(int device) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtDevice_Synchronize_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  return PluginErrorToStatus(api_, api_->device_synchronize(&args), name(),
                             "device_synchronize");
}

absl::Status Backend::Launch(int device, MixrtOp op,
                             absl::Span<const MixrtTensorDesc> inputs,
                             absl::Span<const MixrtTensorDesc> outputs,
                             const void* attrs) const {
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtKernel_Launch_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.op = op;
  args.num_inputs = static_cast<int32_t>(inputs.size());
  args.inputs = inputs.data();
  args.num_outputs = static_cast<int32_t>(outputs.size());
  args.outputs = outputs.data();
  args.attrs = attrs;
  return InProfilerRange(
      device,
      [&] {
        const bool known = !outputs.empty() &&
                           outputs[0].dtype < static_cast<uint32_t>(kNumDTypes);
        return absl::StrCat(
            MixrtOpName(op), " ",
            known ? DTypeName(static_cast<DType>(outputs[0].dtype)) : "");
      },
      [&] {
        // The hot path of every op: the message is built only for an error.
        MixrtError* error = api_->kernel_launch(&args);
        if (error == nullptr) return absl::OkStatus();
        return PluginErrorToStatus(
            api_, error, name(),
            absl::StrCat("kernel_launch(", MixrtOpName(op), ")"));
      });
}

bool Backend::has_kernel_graphs() const {
  return MIXRT_STRUCT_HAS(api_, MixrtPluginApi, kernel_graph_destroy) &&
         api_->kernel_graph_create != nullptr &&
         api_->kernel_graph_run != nullptr &&
         api_->kernel_graph_destroy != nullptr;
}

absl::StatusOr<std::unique_ptr<PluginKernelGraph>> Backend::CreateKernelGraph(
    int device, int num_buffers,
    absl::Span<const MixrtKernelGraphStep> steps) const {
  if (!has_kernel_graphs()) {
    return absl::UnimplementedError(
        absl::StrCat(name(),
                     " makes no kernel graphs (a 1.0 plugin, or one "
                     "without kernel_graph_create)"));
  }
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtKernelGraph_Create_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.num_buffers = num_buffers;
  args.num_steps = static_cast<int32_t>(steps.size());
  args.steps = steps.data();
  MIXRT_RETURN_IF_ERROR(PluginErrorToStatus(
      api_, api_->kernel_graph_create(&args), name(), "kernel_graph_create"));
  if (args.graph == nullptr) {
    return absl::InternalError(absl::StrCat(
        name(), ": kernel_graph_create succeeded but returned no graph"));
  }
  return std::make_unique<PluginKernelGraph>(this, device, args.graph,
                                             args.num_steps);
}

PluginKernelGraph::~PluginKernelGraph() {
  MixrtKernelGraph_Destroy_Args args{};
  args.struct_size = sizeof(args);
  args.graph = graph_;
  backend_->api()->kernel_graph_destroy(&args);
}

absl::Status PluginKernelGraph::Run(absl::Span<void* const> buffers,
                                    int* failed_step) const {
  MixrtKernelGraph_Run_Args args{};
  args.struct_size = sizeof(args);
  args.graph = graph_;
  args.buffers = buffers.data();
  args.failed_step = -1;
  absl::Status status = backend_->InProfilerRange(
      device_, [&] { return absl::StrCat("graph: ", num_steps_, " launches"); },
      [&] {
        return PluginErrorToStatus(backend_->api(),
                                   backend_->api()->kernel_graph_run(&args),
                                   backend_->name(), "kernel_graph_run");
      });
  if (failed_step != nullptr)
    *failed_step = status.ok() ? -1 : args.failed_step;
  return status;
}

bool Backend::has_fusion() const {
  return MIXRT_STRUCT_HAS(api_, MixrtPluginApi, fused_kernel_destroy) &&
         api_->fusion_claim != nullptr && api_->fusion_compile != nullptr &&
         api_->fused_kernel_run != nullptr &&
         api_->fused_kernel_destroy != nullptr;
}

absl::StatusOr<std::vector<int32_t>> Backend::ClaimFusion(
    int device, const MixrtFusionGraph& graph) const {
  if (!has_fusion()) {
    return absl::UnimplementedError(absl::StrCat(
        name(), " fuses nothing (a 1.0 plugin, or one without fusion_claim)"));
  }
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  std::vector<int32_t> groups(graph.num_nodes, -1);
  MixrtFusion_Claim_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.graph = &graph;
  args.group_of_node = groups.data();
  MIXRT_RETURN_IF_ERROR(PluginErrorToStatus(api_, api_->fusion_claim(&args),
                                            name(), "fusion_claim"));
  for (int32_t g : groups) {
    if (g < -1 || g >= args.num_groups) {
      return absl::InternalError(absl::StrCat(name(),
                                              ": fusion_claim answered group ",
                                              g, " of ", args.num_groups));
    }
  }
  return groups;
}

absl::StatusOr<std::unique_ptr<PluginFusedKernel>> Backend::CompileFusion(
    int device, const MixrtFusionGraph& graph,
    absl::Span<const int32_t> group_of_node, int group) const {
  if (!has_fusion()) {
    return absl::UnimplementedError(absl::StrCat(name(), " fuses nothing"));
  }
  MixrtFusion_Compile_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.graph = &graph;
  args.group_of_node = group_of_node.data();
  args.group = group;
  MIXRT_RETURN_IF_ERROR(PluginErrorToStatus(api_, api_->fusion_compile(&args),
                                            name(), "fusion_compile"));
  if (args.kernel == nullptr) {
    return absl::InternalError(absl::StrCat(
        name(), ": fusion_compile succeeded but returned no kernel"));
  }
  auto kernel = std::make_unique<PluginFusedKernel>(
      this, device, args.kernel,
      args.description != nullptr ? args.description : "");
  // A plugin before 1.2 never wrote scratch_bytes: the zero it started at.
  if (args.scratch_bytes > 0) {
    MIXRT_RETURN_IF_ERROR(GiveScratch(*kernel, args.scratch_bytes));
  }
  return kernel;
}

absl::Status Backend::GiveScratch(PluginFusedKernel& kernel,
                                  uint64_t bytes) const {
  if (!MIXRT_STRUCT_HAS(api_, MixrtPluginApi, fused_kernel_set_scratch) ||
      api_->fused_kernel_set_scratch == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        name(), ": fused kernel '", kernel.description(), "' asks for ", bytes,
        " bytes of scratch memory, but the plugin has no "
        "fused_kernel_set_scratch to receive them (ABI 1.2)"));
  }
  MIXRT_ASSIGN_OR_RETURN(void* scratch,
                         allocator(kernel.device_).Allocate(bytes));
  // Owned by the kernel from here: freed after it is destroyed, even when
  // the plugin refuses it below.
  kernel.scratch_ = scratch;
  MixrtFusedKernel_SetScratch_Args args{};
  args.struct_size = sizeof(args);
  args.kernel = kernel.handle();
  args.scratch = scratch;
  args.bytes = bytes;
  return PluginErrorToStatus(api_, api_->fused_kernel_set_scratch(&args),
                             name(), "fused_kernel_set_scratch");
}

PluginFusedKernel::~PluginFusedKernel() {
  MixrtFusedKernel_Destroy_Args args{};
  args.struct_size = sizeof(args);
  args.kernel = kernel_;
  backend_->api()->fused_kernel_destroy(&args);
  // After the destroy: the kernel may use it up to then. Later work on the
  // device's stream is ordered after the kernel's last run.
  if (scratch_ != nullptr) backend_->allocator(device_).Free(scratch_);
}

absl::Status PluginFusedKernel::Run(
    absl::Span<void* const> value_data,
    absl::Span<const int64_t> symbol_sizes) const {
  MixrtFusedKernel_Run_Args args{};
  args.struct_size = sizeof(args);
  args.kernel = kernel_;
  args.value_data = value_data.data();
  args.symbol_sizes = symbol_sizes.empty() ? nullptr : symbol_sizes.data();
  return backend_->InProfilerRange(
      device_, [&] { return absl::StrCat("fused: ", description_); },
      [&] {
        return PluginErrorToStatus(backend_->api(),
                                   backend_->api()->fused_kernel_run(&args),
                                   backend_->name(), "fused_kernel_run");
      });
}

absl::StatusOr<bool> PluginFusedKernel::SetWeightVersion(
    int value, uint64_t version) const {
  const MixrtPluginApi* api = backend_->api();
  if (!MIXRT_STRUCT_HAS(api, MixrtPluginApi, fused_kernel_set_weight_version) ||
      api->fused_kernel_set_weight_version == nullptr) {
    return false;
  }
  MixrtFusedKernel_SetWeightVersion_Args args{};
  args.struct_size = sizeof(args);
  args.kernel = kernel_;
  args.value = value;
  args.version = version;
  MIXRT_RETURN_IF_ERROR(
      PluginErrorToStatus(api, api->fused_kernel_set_weight_version(&args),
                          backend_->name(), "fused_kernel_set_weight_version"));
  return args.keeps_copy != 0;
}

absl::StatusOr<Backend::MemoryInfo> Backend::GetMemoryInfo(int device) const {
  if (!MIXRT_STRUCT_HAS(api_, MixrtPluginApi, device_get_memory_info) ||
      api_->device_get_memory_info == nullptr) {
    return absl::UnimplementedError(
        absl::StrCat(name(),
                     " does not report device memory (device_get_memory_info, "
                     "ABI 1.2)"));
  }
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  MixrtDevice_GetMemoryInfo_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  MIXRT_RETURN_IF_ERROR(PluginErrorToStatus(api_,
                                            api_->device_get_memory_info(&args),
                                            name(), "device_get_memory_info"));
  if (args.free_bytes > args.total_bytes && args.total_bytes != 0) {
    return absl::InternalError(
        absl::StrCat(name(), ": device_get_memory_info reported ",
                     args.free_bytes, " bytes free of ", args.total_bytes));
  }
  return MemoryInfo{args.free_bytes, args.total_bytes};
}

bool Backend::has_profiler_ranges() const {
  return MIXRT_STRUCT_HAS(api_, MixrtPluginApi, profiler_range) &&
         api_->profiler_range != nullptr;
}

void Backend::ProfilerRange(int device, MixrtRangePhase phase, uint64_t id,
                            const std::string& name) const {
  MixrtProfiler_Range_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.phase = phase;
  args.id = id;
  args.name = name.c_str();
  api_->profiler_range(&args);
}

bool Backend::has_op_support_query() const {
  return MIXRT_STRUCT_HAS(api_, MixrtPluginApi, device_get_op_support) &&
         api_->device_get_op_support != nullptr;
}

OpSupport Backend::QueryOpSupport(int device, const OpSignature& sig) const {
  OpSupport support;
  if (!CheckDevice(device).ok()) {
    support.reason = absl::StrCat("no device ", device);
    return support;
  }
  if (!has_op_support_query()) {
    // The class matrix speaks for floating dtypes only: integer and bool
    // operands (indices, masks, counters) are assumed to run.
    support.from_class_matrix = true;
    const MixrtOpClass op_class = MixrtOpClassOf(sig.op);
    if (op_class == MIXRT_OP_CLASS_COUNT || !IsFloating(sig.dtype)) {
      support.level = MIXRT_SUPPORT_NATIVE;
      return support;
    }
    const CapabilityEntry& cap =
        devices_[device].capability(op_class, sig.dtype);
    support.level = cap.level;
    support.reason = cap.reason;
    return support;
  }
  MixrtDevice_GetOpSupport_Args args{};
  args.struct_size = sizeof(args);
  args.device = device;
  args.op = sig.op;
  args.variant = sig.variant;
  args.dtype = ToAbi(sig.dtype);
  args.out_dtype = ToAbi(sig.out_dtype);
  const absl::Status asked =
      PluginErrorToStatus(api_, api_->device_get_op_support(&args), name(),
                          "device_get_op_support");
  if (!asked.ok()) {
    support.reason = std::string(asked.message());
    return support;
  }
  if (args.level > MIXRT_SUPPORT_NATIVE) {
    support.reason = absl::StrCat("device_get_op_support reported level ",
                                  args.level, ", which does not exist");
    return support;
  }
  support.level = static_cast<MixrtSupportLevel>(args.level);
  if (args.reason != nullptr) support.reason = args.reason;
  return support;
}

bool Backend::RunsOp(int device, const OpSignature& sig) const {
  const int slot = OpSlot(sig);
  if (slot < 0 || device < 0 || device >= static_cast<int>(op_runs_.size())) {
    return QueryOpSupport(device, sig).level != MIXRT_SUPPORT_UNSUPPORTED;
  }
  std::atomic<uint8_t>& cached = op_runs_[device][slot];
  uint8_t known = cached.load(std::memory_order_relaxed);
  if (known == 0) {
    // A plugin process that is gone answers nothing: not "unsupported" (that
    // would send the op to a fallback backend), but a launch that returns
    // UNAVAILABLE with the reason.
    if (process_ != nullptr && !process_->Failure().empty()) return true;
    // Two threads may both ask; the plugin gives both the same answer.
    known =
        QueryOpSupport(device, sig).level != MIXRT_SUPPORT_UNSUPPORTED ? 2 : 1;
    cached.store(known, std::memory_order_relaxed);
  }
  return known == 2;
}

}  // namespace mixrt
