// A loaded, initialized backend plugin, seen through the C ABI. Every call
// turns the plugin's error object into an absl::Status naming the backend.
// Backends live until process exit (plugins are never unloaded: tensors and
// cached allocations may still point into them).
#ifndef MIXRT_CORE_PLUGIN_BACKEND_H_
#define MIXRT_CORE_PLUGIN_BACKEND_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/allocator/caching_allocator.h"
#include "core/dtype.h"
#include "core/plugin/plugin_profiling.h"
#include "mixrt/plugin_api.h"

namespace mixrt {

absl::string_view OpClassName(MixrtOpClass op_class);         // "matmul", ...
absl::string_view SupportLevelName(MixrtSupportLevel level);  // "native"...
absl::string_view PrecisionName(MixrtPrecision precision);    // "tf32", ...

struct CapabilityEntry {
  MixrtSupportLevel level = MIXRT_SUPPORT_UNSUPPORTED;
  std::string reason;
  double speed_vs_f32 = 0.0;
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  uint64_t total_memory = 0;
  uint32_t flags = 0;
  uint32_t alignment = 0;
  // capabilities[op_class][dtype]
  std::array<std::array<CapabilityEntry, kNumDTypes>, MIXRT_OP_CLASS_COUNT>
      capabilities;
  // precisions[op_class][precision] (ABI 1.2; unsupported without it).
  std::array<std::array<CapabilityEntry, MIXRT_PRECISION_COUNT>,
             MIXRT_OP_CLASS_COUNT>
      precisions;

  const CapabilityEntry& capability(MixrtOpClass op_class, DType dtype) const {
    return capabilities[op_class][static_cast<int>(dtype)];
  }
  const CapabilityEntry& precision(MixrtOpClass op_class,
                                   MixrtPrecision precision) const {
    return precisions[op_class][precision];
  }
};

struct BackendIdentity {
  std::string name;
  std::string version;
  std::string build_info;
  std::string device_type;
  std::string path;
  // The loaded file's size and modification time: a rebuilt plugin whose
  // name, version and build info stay the same still differs here.
  std::string file_stamp;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  int32_t score = 1;
};

// What the compile cache keys on for artifacts a backend's code decided
// (plans with its fusion claims, its fused kernels' timings): everything
// above but the path and score, the file's stamp included, so a rebuilt
// or upgraded plugin never reads another build's decisions.
std::string BackendCacheKey(const BackendIdentity& id);

// One op as the per-op support query sees it (MixrtDevice_GetOpSupport_Args
// in plugin_api.h): the op, its kind, its first input's and first output's
// dtypes.
struct OpSignature {
  MixrtOp op = MIXRT_OP_FILL;
  uint32_t variant = 0;
  DType dtype = DType::kF32;
  DType out_dtype = DType::kF32;
};
// "binary/sub f32", "copy f32->bf16": how errors and logs name an op.
std::string OpSignatureName(const OpSignature& sig);

struct OpSupport {
  MixrtSupportLevel level = MIXRT_SUPPORT_UNSUPPORTED;
  std::string reason;
  // True when the plugin has no per-op query and its class matrix answered.
  bool from_class_matrix = false;
};

class Backend;

// A kernel graph a plugin made (ABI 1.1): launches fixed once, run with
// new buffer base addresses each time. Destroyed through its plugin.
class PluginKernelGraph {
 public:
  PluginKernelGraph(const Backend* backend, int device, MixrtKernelGraph* graph,
                    int num_steps)
      : backend_(backend),
        device_(device),
        graph_(graph),
        num_steps_(num_steps) {}
  ~PluginKernelGraph();
  PluginKernelGraph(const PluginKernelGraph&) = delete;
  PluginKernelGraph& operator=(const PluginKernelGraph&) = delete;
  // One base address per buffer the graph was made with. On an error,
  // `failed_step` (when given) is the index of the step that failed, or -1
  // when the plugin did not say.
  absl::Status Run(absl::Span<void* const> buffers,
                   int* failed_step = nullptr) const;

 private:
  const Backend* backend_;
  int device_;
  MixrtKernelGraph* graph_;
  int num_steps_;
};

// A fusion group a plugin compiled (ABI 1.1). Destroyed through its plugin.
class PluginFusedKernel {
 public:
  PluginFusedKernel(const Backend* backend, int device,
                    MixrtFusedKernel* kernel, std::string description)
      : backend_(backend),
        device_(device),
        kernel_(kernel),
        description_(std::move(description)) {}
  // Destroys the kernel, then returns its scratch memory to the allocator.
  ~PluginFusedKernel();
  PluginFusedKernel(const PluginFusedKernel&) = delete;
  PluginFusedKernel& operator=(const PluginFusedKernel&) = delete;
  // One address per value of the graph it was compiled from.
  absl::Status Run(absl::Span<void* const> value_data,
                   absl::Span<const int64_t> symbol_sizes) const;
  // Tells the kernel which version of WEIGHT value `value` its next runs
  // see (nothing to do for a plugin without the function); true when the
  // kernel keeps its own copy from its next run on (keeps_copy in
  // plugin_api.h), so the value's memory may be released after that run.
  absl::StatusOr<bool> SetWeightVersion(int value, uint64_t version) const;
  const std::string& description() const { return description_; }
  // For a kernel graph's step (MixrtKernelGraphStep::fused_kernel).
  MixrtFusedKernel* handle() const { return kernel_; }

 private:
  friend class Backend;  // Hands the scratch over after the compile.

  const Backend* backend_;
  int device_;
  MixrtFusedKernel* kernel_;
  std::string description_;
  // The device memory the kernel asked for at compile (ABI 1.2), owned
  // here; null for most kernels.
  void* scratch_ = nullptr;
};

// A plugin running in a process of its own (isolated_plugin.h).
class PluginProcess {
 public:
  virtual ~PluginProcess() = default;
  virtual int pid() const = 0;
  // Why the process no longer serves ("crashed: SIGSEGV in matmul"), or ""
  // while it does.
  virtual std::string Failure() const = 0;
};

class Backend : public RawDeviceMemory {
 public:
  // Takes ownership of the dlopen handle. Use LoadPlugin() to make one.
  Backend(void* handle, const MixrtPluginApi* api, BackendIdentity identity,
          std::vector<DeviceInfo> devices, std::string no_device_reason);
  ~Backend() override;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  const BackendIdentity& identity() const { return identity_; }
  const std::string& name() const override { return identity_.name; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }
  const std::string& no_device_reason() const { return no_device_reason_; }
  const MixrtPluginApi* api() const { return api_; }

  // Out-of-process plugins: the process that serves api() (kept alive as
  // long as the backend), null for a plugin loaded in this process.
  void AdoptProcess(std::shared_ptr<PluginProcess> process) {
    process_ = std::move(process);
  }
  const PluginProcess* process() const { return process_.get(); }
  // Why an out-of-process plugin stopped serving, or "" (always "" in
  // process: a plugin that crashes there takes this process with it).
  std::string failure() const {
    return process_ != nullptr ? process_->Failure() : std::string();
  }

  absl::StatusOr<void*> Allocate(int device, uint64_t bytes) const override;
  absl::Status Free(int device, void* ptr) const override;
  absl::Status Copy(int device, MixrtCopyKind kind, void* dst, const void* src,
                    uint64_t bytes) const;
  absl::Status Memset(int device, void* dst, uint8_t value,
                      uint64_t bytes) const;
  absl::Status Synchronize(int device) const;
  absl::Status Launch(int device, MixrtOp op,
                      absl::Span<const MixrtTensorDesc> inputs,
                      absl::Span<const MixrtTensorDesc> outputs,
                      const void* attrs) const;

  // The caching allocator of one device (created with the backend).
  CachingAllocator& allocator(int device) const;

  // Whether `device` runs `sig`, asked of the plugin once per signature and
  // cached (lock-free after the first answer).
  bool RunsOp(int device, const OpSignature& sig) const;
  // The full answer, asked afresh: for messages and `mixrt info`.
  OpSupport QueryOpSupport(int device, const OpSignature& sig) const;
  // Whether the plugin answers per op (ABI 1.1) or by its class matrix.
  bool has_op_support_query() const;

  // Whether the plugin makes kernel graphs (ABI 1.1, all three functions).
  bool has_kernel_graphs() const;
  // UNIMPLEMENTED when it does not, or declines these steps (launch them
  // one by one then).
  absl::StatusOr<std::unique_ptr<PluginKernelGraph>> CreateKernelGraph(
      int device, int num_buffers,
      absl::Span<const MixrtKernelGraphStep> steps) const;

  // Whether the plugin fuses (ABI 1.1, all four fusion functions).
  bool has_fusion() const;
  // Per node of `graph`, the group the plugin claimed it for, or -1.
  absl::StatusOr<std::vector<int32_t>> ClaimFusion(
      int device, const MixrtFusionGraph& graph) const;
  // A kernel asking for scratch memory (ABI 1.2) gets it from this
  // device's allocator, or the compile fails saying why.
  absl::StatusOr<std::unique_ptr<PluginFusedKernel>> CompileFusion(
      int device, const MixrtFusionGraph& graph,
      absl::Span<const int32_t> group_of_node, int group) const;

  // ABI 1.2, each optional: the device's memory now (UNIMPLEMENTED without
  // device_get_memory_info), and whether the plugin takes profiling ranges.
  struct MemoryInfo {
    uint64_t free_bytes = 0, total_bytes = 0;
  };
  absl::StatusOr<MemoryInfo> GetMemoryInfo(int device) const;
  bool has_profiler_ranges() const;
  // Calls `run` inside a profiling range named name() on `device` when
  // profiling is on and the plugin takes ranges; else just calls it.
  template <typename Run, typename Name>
  absl::Status InProfilerRange(int device, const Name& name,
                               const Run& run) const;

 private:
  // Allocates `bytes` for `kernel` (which then owns them) and hands them to
  // the plugin's fused_kernel_set_scratch.
  absl::Status GiveScratch(PluginFusedKernel& kernel, uint64_t bytes) const;
  absl::Status CheckDevice(int device) const;
  void ProfilerRange(int device, MixrtRangePhase phase, uint64_t id,
                     const std::string& name) const;

  void* handle_;
  const MixrtPluginApi* api_;
  std::shared_ptr<PluginProcess> process_;
  BackendIdentity identity_;
  std::vector<DeviceInfo> devices_;
  std::string no_device_reason_;
  std::vector<std::unique_ptr<CachingAllocator>> allocators_;
  // Per device, one slot per signature: 0 not asked yet, else 1 + whether
  // it runs.
  std::vector<std::unique_ptr<std::atomic<uint8_t>[]>> op_runs_;
};

template <typename Run, typename Name>
absl::Status Backend::InProfilerRange(int device, const Name& name,
                                      const Run& run) const {
  // One relaxed load on every launch while profiling is off.
  if (!PluginProfilingEnabled() || !has_profiler_ranges()) return run();
  const uint64_t id = NextProfilerRangeId();
  const std::string text = name();
  ProfilerRange(device, MIXRT_RANGE_BEGIN, id, text);
  absl::Status status = run();
  ProfilerRange(device, MIXRT_RANGE_END, id, text);
  return status;
}

// The Status for an ABI error code (OK for MIXRT_ERROR_CODE_OK): one mapping
// for every plugin kind (backends, collectives).
absl::Status StatusFromErrorCode(MixrtErrorCode code, const std::string& text);

// Converts a plugin error (or NULL) to a Status, destroying the error.
// `what` names the call, e.g. "memory_allocate".
absl::Status PluginErrorToStatus(const MixrtPluginApi* api, MixrtError* error,
                                 absl::string_view backend,
                                 absl::string_view what);

}  // namespace mixrt

#endif  // MIXRT_CORE_PLUGIN_BACKEND_H_
