// The mixrt plugin SDK: implement a backend by filling a C++ class instead of
// the raw C tables of plugin_api.h. The SDK builds the MixrtPluginApi table,
// turns sdk::Status (status.h; no Abseil) into ABI error objects, catches
// every exception at the boundary, and keeps returned strings alive for the
// plugin's lifetime.
//
//   class MyPlugin : public mixrt::sdk::HostMemoryPlugin {
//    public:
//     mixrt::sdk::PluginInfo Info() const override {
//       return {"mine", "0.1", "portable C++", "cpu"};
//     }
//     mixrt::sdk::Capability GetCapability(int, MixrtOpClass,
//                                          MixrtDtype) override { ... }
//     mixrt::sdk::Status Launch(const mixrt::sdk::KernelCall& call) override;
//   };
//   MIXRT_SDK_DEFINE_PLUGIN(MyPlugin)
//
// Build it with mixrt_plugin() from plugins/sdk/plugin.bzl. plugins/README.md
// walks through a complete example.
#ifndef MIXRT_PLUGINS_SDK_PLUGIN_H_
#define MIXRT_PLUGINS_SDK_PLUGIN_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mixrt/plugin_api.h"
#include "plugins/sdk/fusion.h"
#include "plugins/sdk/kernel_graph.h"
#include "plugins/sdk/small_vector.h"
#include "plugins/sdk/status.h"
#include "plugins/sdk/strings.h"
#include "plugins/sdk/tensor_ref.h"

namespace mixrt::sdk {

struct PluginInfo {
  std::string name;         // Short backend name: "cpu", "cuda".
  std::string version;      // The plugin's own version.
  std::string build_info;   // Vendor libraries and targets it was built for.
  std::string device_type;  // Autocast policy family: "cpu" or "cuda".
};

struct DeviceProperties {
  std::string name;
  uint64_t total_memory = 0;
  uint32_t flags = 0;  // MIXRT_DEVICE_FLAG_*
  uint32_t alignment = 64;
};

struct Capability {
  MixrtSupportLevel level = MIXRT_SUPPORT_UNSUPPORTED;
  std::string reason;
  double speed_vs_f32 = 0.0;  // 0 when not measured.
};

inline Capability Unsupported(std::string reason) {
  return {MIXRT_SUPPORT_UNSUPPORTED, std::move(reason), 0.0};
}

// The device's memory now (ABI 1.2's device_get_memory_info).
struct MemoryInfo {
  uint64_t free_bytes = 0;
  uint64_t total_bytes = 0;
};

struct DeviceCount {
  int count = 0;
  std::string no_device_reason;  // Why, when count is 0.
};

// One op as the host asks about it (MixrtDevice_GetOpSupport_Args).
struct OpQuery {
  MixrtOp op = MIXRT_OP_FILL;
  uint32_t variant = 0;  // The op's kind; see plugin_api.h.
  MixrtDtype dtype = MIXRT_DTYPE_F32;
  MixrtDtype out_dtype = MIXRT_DTYPE_F32;
};

// The size of each attribute struct as its first ABI version defined it:
// the part every host sends. Fields appended later are zero when an older
// host's struct lacks them. Frozen: appending a field never changes these.
template <typename Attrs>
struct AttrsFirstVersion;
#define MIXRT_SDK_ATTRS_FIRST_VERSION(Type)             \
  template <>                                           \
  struct AttrsFirstVersion<Type> {                      \
    static constexpr size_t kSize = Type##_STRUCT_SIZE; \
  }
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtScalarAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtArangeAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtRandomAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtPointwiseAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtReduceAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtMatmulAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtAxisAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtAttentionAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtDropoutAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtNormAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtCrossEntropyAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtConvAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtPoolAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtBatchNormAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtEmbeddingAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtUpdateScaleAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtSgdAttrs);
MIXRT_SDK_ATTRS_FIRST_VERSION(MixrtAdamWAttrs);

// One kernel launch, with the descriptors wrapped for convenient access.
struct KernelCall {
  int device = 0;
  MixrtOp op = MIXRT_OP_FILL;
  // Inline: a launch of a few tensors allocates nothing on the heap (two
  // allocations per launch were a tenth of a small model's step).
  SmallVector<TensorRef, 4> inputs;
  SmallVector<TensorRef, 2> outputs;
  const void* attrs = nullptr;

  // The op's attribute struct. A struct from an older host that ends before
  // fields this plugin's header has (but holds at least the first version's)
  // is copied into a zero-filled one that lives as long as this call; one
  // from a newer host is read as far as this plugin knows it.
  template <typename Attrs>
  StatusOr<const Attrs*> GetAttrs() const {
    const auto* a = static_cast<const Attrs*>(attrs);
    constexpr size_t kFirst = AttrsFirstVersion<Attrs>::kSize;
    if (a == nullptr) {
      return InvalidArgumentError(
          "kernel attributes missing: the op takes an attribute struct");
    }
    if (a->struct_size < kFirst) {
      return InvalidArgumentError(StrCat(
          "kernel attributes have struct_size ", a->struct_size,
          "; the op's attribute struct has at least ", kFirst, " bytes"));
    }
    if (a->struct_size >= sizeof(Attrs)) return a;
    auto padded = std::make_shared<Attrs>();
    std::memset(padded.get(), 0, sizeof(Attrs));
    std::memcpy(padded.get(), a, a->struct_size);
    padded_attrs_.push_back(padded);
    return padded.get();
  }

 private:
  mutable std::vector<std::shared_ptr<const void>> padded_attrs_;
};

class OpTable;  // plugins/sdk/op_table.h

// Every method may be called from many threads at once after Initialize
// (see plugin_api.h); implementations synchronize their own state.
class Plugin {
 public:
  virtual ~Plugin() = default;

  virtual PluginInfo Info() const = 0;
  virtual Status Initialize() { return OkStatus(); }
  virtual Status Shutdown() { return OkStatus(); }

  virtual DeviceCount CountDevices() = 0;
  virtual StatusOr<DeviceProperties> GetDeviceProperties(int device) = 0;
  virtual Capability GetCapability(int device, MixrtOpClass op_class,
                                   MixrtDtype dtype) = 0;
  // What this plugin's kernels are, when it dispatches through an
  // sdk::OpTable: the default GetOpSupport answers from it. nullptr (the
  // default): the plugin declares no table.
  virtual const OpTable* Ops() const { return nullptr; }

  // Whether the device runs one op (ABI 1.1's per-op query). The host never
  // launches what this calls unsupported: it runs it elsewhere. The default
  // claims what Ops() has a kernel for — in the dtypes and variants of its
  // row, at the speed GetCapability gives the op's class — and, without an
  // OpTable, nothing ("declares no ops"): an unchanged plugin then runs
  // nothing rather than failing what it never implemented. Override it to
  // answer by hand.
  virtual Capability GetOpSupport(int device, const OpQuery& query);

  // The answer of plugins written before per-op answers: GetCapability of
  // the op's class on floating dtypes, integer dtypes supported. It claims
  // whole classes: only for a plugin whose kernels run every op of each
  // class it calls supported.
  Capability OpSupportFromClassMatrix(int device, const OpQuery& query);

  // ABI 1.2, each optional. The device's free and total memory now; the
  // default: UNIMPLEMENTED (HostMemoryPlugin: the machine's).
  virtual StatusOr<MemoryInfo> GetMemoryInfo(int device);
  // Called right before (MIXRT_RANGE_BEGIN) and after (END) each launch
  // the host makes on `device` while its profiling is on, with the launch's
  // name (valid during the call only): open and close a range of your
  // trace viewer here. Must not block; the default does nothing.
  virtual void OnProfilerRange(int device, MixrtRangePhase phase, uint64_t id,
                               const char* name) {}
  // A precision beyond the storage dtypes (TF32, fp8) for an op class, as
  // GetCapability answers for dtypes. The default: unsupported.
  virtual Capability GetPrecisionSupport(int device, MixrtOpClass op_class,
                                         MixrtPrecision precision);

  // Called with the host's ABI version before anything else; an error
  // declines that host, and the loader prints the message as the reason
  // (e.g. "needs a 1.1 host for multi_tensor_norm"). The default accepts
  // every host of this major version.
  virtual Status AcceptHost(uint32_t host_major, uint32_t host_minor);

  virtual StatusOr<void*> Allocate(int device, uint64_t bytes) = 0;
  virtual Status Free(int device, void* ptr) = 0;
  virtual Status Copy(int device, MixrtCopyKind kind, void* dst,
                      const void* src, uint64_t bytes) = 0;
  virtual Status Memset(int device, void* dst, uint8_t value,
                        uint64_t bytes) = 0;
  virtual Status Synchronize(int device) = 0;

  virtual Status Launch(const KernelCall& call) = 0;

  // A kernel graph (ABI 1.1) from its steps, checked and copied: what
  // kernel_graph_run will run. The default runs the steps' calls through
  // Launch in order; a device with its own graphs (CUDA graphs) wraps them.
  // Return UNIMPLEMENTED to have the host launch one by one.
  virtual StatusOr<std::unique_ptr<KernelGraph>> CreateKernelGraph(
      int device, std::unique_ptr<StepGraph> steps);

  // Fusion (ABI 1.1): per node of `graph`, its group (0, 1, ... with no
  // gaps) or -1 for a node the host runs op by op. The default claims
  // nothing. A group of one node gains nothing; the host runs what the
  // plugin claims where all its inputs are ready (see plugin_api.h).
  virtual StatusOr<std::vector<int>> ClaimFusion(int device,
                                                 const FusionGraph& graph);
  // The kernel running `group` as ClaimFusion claimed it.
  virtual StatusOr<std::unique_ptr<FusedKernel>> CompileFusion(
      int device, const FusionGraph& graph, Span<const int> group_of_node,
      int group);
};

// A plugin whose "device" is host memory (CPU backends, the reference
// plugin): memory functions are aligned malloc and memcpy.
class HostMemoryPlugin : public Plugin {
 public:
  static constexpr uint32_t kAlignment = 64;

  StatusOr<void*> Allocate(int device, uint64_t bytes) override;
  Status Free(int device, void* ptr) override;
  Status Copy(int device, MixrtCopyKind kind, void* dst, const void* src,
              uint64_t bytes) override;
  Status Memset(int device, void* dst, uint8_t value, uint64_t bytes) override;
  Status Synchronize(int device) override;
  // The machine's memory: available and total physical pages.
  StatusOr<MemoryInfo> GetMemoryInfo(int device) override;
};

namespace internal {
// The checks kernel_launch makes of a descriptor, but its data pointer.
Status CheckTensorShape(const MixrtTensorDesc& desc, const char* what,
                        int index, std::string_view where);

// Runs a fused kernel of this plugin with one address per value of the
// graph it was compiled from (`value_data` has that many).
Status RunFusedKernel(MixrtFusedKernel* kernel, Span<void* const> value_data);
int FusedKernelValues(const MixrtFusedKernel* kernel);

using PluginFactory = Plugin* (*)();
// Builds (once) and returns the table for the plugin made by `factory`,
// laid out for ABI 1.`table_minor` (1.0's table has no per-op query).
const MixrtPluginApi* GetApi(PluginFactory factory, uint32_t host_major,
                             uint32_t host_minor, uint32_t table_minor);
}  // namespace internal

}  // namespace mixrt::sdk

#define MIXRT_SDK_EXPORT extern "C" __attribute__((visibility("default")))

// The ABI minor version a plugin's table is laid out for. Define it to 0
// or 1 (before including this header, or with -D) to build a plugin
// exactly as one built against the 1.0 or 1.1 header: every 1.x host
// loads each.
#ifndef MIXRT_SDK_ABI_MINOR
#define MIXRT_SDK_ABI_MINOR MIXRT_PLUGIN_API_MINOR
#endif

// Defines the plugin's entry symbol for PluginClass (default-constructible).
#define MIXRT_SDK_DEFINE_PLUGIN(PluginClass)                         \
  MIXRT_SDK_EXPORT const MixrtPluginApi* mixrt_plugin_entry(         \
      uint32_t host_major, uint32_t host_minor) {                    \
    return ::mixrt::sdk::internal::GetApi(                           \
        []() -> ::mixrt::sdk::Plugin* { return new PluginClass(); }, \
        host_major, host_minor, MIXRT_SDK_ABI_MINOR);                \
  }

// Defines the optional score symbol from an `int32_t fn()`.
#define MIXRT_SDK_DEFINE_SCORE(score_fn) \
  MIXRT_SDK_EXPORT int32_t mixrt_plugin_score(void) { return score_fn(); }

#endif  // MIXRT_PLUGINS_SDK_PLUGIN_H_
