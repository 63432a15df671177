// The CPU backend: oneDNN for matmul, softmax and reductions, the plugin's
// own vectorized loops elsewhere, and a capability matrix detected (not
// assumed) at load time.
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/capability/cpu_capability.h"
#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/capability/load_aware_threads.h"
#include "backends/cpu/fusion/fusion_patterns.h"
#include "backends/cpu/kernels/cpu_kernels.h"
#include "backends/cpu/onednn/onednn3_companion.h"
#include "mixrt/status_macros.h"
#include "plugins/sdk/plugin.h"

namespace mixrt::cpu {
namespace {

// The address space the plugin needs to start and run small models.
constexpr rlim_t kMinAddressSpace = rlim_t{1} << 30;

constexpr char kNumThreadsEnv[] = "MIXRT_NUM_THREADS";

class CpuPlugin : public sdk::HostMemoryPlugin {
 public:
  sdk::PluginInfo Info() const override {
    const CpuInfo& info = GetCpuInfo();
    return {"cpu", "0.1.0",
            absl::StrCat("oneDNN ", info.onednn_version, " (effective ISA ",
                         info.onednn_isa,
                         "); own kernels built for x86-64-v3 (AVX2, FMA, "
                         "F16C); ",
                         OneDnn3CompanionSummary()),
            "cpu"};
  }

  sdk::Status Initialize() override {
    // Under a small address-space limit (ulimit -v) OpenMP's threads and
    // oneDNN's code cannot be mapped, and what failed then was a segfault
    // or glibc's "libgcc_s.so.1 must be installed for unwinding": refuse
    // to start instead, saying so.
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY &&
        limit.rlim_cur < kMinAddressSpace) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the address-space limit (ulimit -v) is ", limit.rlim_cur >> 20,
          " MiB; the CPU plugin needs at least ", kMinAddressSpace >> 20,
          " MiB (its threads' stacks, oneDNN's code and scratch memory) and "
          "does not start under less"));
    }
    if (const char* env = std::getenv(kNumThreadsEnv)) {
      // More threads than a few per hardware thread only oversubscribe
      // (and 100000 makes libgomp crash creating them).
      const long hw = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
      const int max_threads = static_cast<int>(std::min(4 * hw, 4096L));
      int threads = 0;
      if (!absl::SimpleAtoi(env, &threads) || threads < 1 ||
          threads > max_threads) {
        return absl::InvalidArgumentError(absl::StrCat(
            kNumThreadsEnv, "='", env, "' is not an integer from 1 to ",
            max_threads, " (4x the ", hw,
            " hardware threads); unset it to use all of them"));
      }
      omp_set_num_threads(threads);
    }
    ConfigureLoadAwareThreads(omp_get_max_threads());
    speeds_ = GetMatmulSpeeds();
    table_ = CapabilityTable::Detect(speeds_);
    return absl::OkStatus();
  }

  sdk::DeviceCount CountDevices() override { return {1, ""}; }

  sdk::StatusOr<sdk::DeviceProperties> GetDeviceProperties(int) override {
    const CpuInfo& info = GetCpuInfo();
    sdk::DeviceProperties props;
    props.name = absl::StrCat(info.model, " (", omp_get_max_threads(),
                              " threads; matmul speeds ", speeds_.source, ")");
    props.total_memory = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                         static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    props.flags = MIXRT_DEVICE_FLAG_HOST_MEMORY |
                  (info.amx ? MIXRT_DEVICE_FLAG_TENSOR_CORES : 0u);
    props.alignment = kAlignment;
    return props;
  }

  sdk::Capability GetCapability(int, MixrtOpClass op_class,
                                MixrtDtype dtype) override {
    return table_.Get(op_class, dtype);
  }

  // ABI 1.2: said, not left undeclared. x86 has no TF32 (f32 matmuls run
  // in f32; AMX's reduced f32 is bf16, which autocast already offers), and
  // no kernel of this plugin takes fp8.
  sdk::Capability GetPrecisionSupport(int, MixrtOpClass,
                                      MixrtPrecision precision) override {
    return sdk::Unsupported(
        precision == MIXRT_PRECISION_TF32
            ? "x86 CPUs have no TF32: f32 matmuls run in f32"
            : "no fp8 kernels in this plugin");
  }

  // The pattern table's claims, in its order (fusion/fusion_patterns.h).
  sdk::StatusOr<std::vector<int>> ClaimFusion(
      int, const sdk::FusionGraph& graph) override {
    return ClaimFusionPatterns(graph);
  }

  sdk::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileFusion(
      int, const sdk::FusionGraph& graph, sdk::Span<const int> group_of_node,
      int group) override {
    MIXRT_ASSIGN_OR_RETURN(std::unique_ptr<sdk::FusedKernel> kernel,
                           CompileGroup(graph, group_of_node, group));
    return RunOnThreadsLeftFree(std::move(kernel));
  }

  const sdk::OpTable* Ops() const override { return &CpuOps(); }

  sdk::Status Launch(const sdk::KernelCall& call) override {
    UseThreadsLeftFree();
    return RunKernel(call);
  }

 private:
  static absl::StatusOr<std::unique_ptr<sdk::FusedKernel>> CompileGroup(
      const sdk::FusionGraph& graph, absl::Span<const int> group_of_node,
      int group) {
    const FusionPattern* pattern = PatternOwning(graph, group_of_node, group);
    if (pattern == nullptr) {
      return absl::InvalidArgumentError("no node is in the group");
    }
    return pattern->compile(graph, group_of_node, group);
  }

  MatmulSpeeds speeds_;
  CapabilityTable table_;
};

// 0 where this CPU lacks what the plugin was compiled for; otherwise above
// the reference plugin's 1, so the CPU backend is the default.
int32_t Score() { return GetCpuInfo().has_build_isa ? 100 : 0; }

}  // namespace
}  // namespace mixrt::cpu

MIXRT_SDK_DEFINE_PLUGIN(mixrt::cpu::CpuPlugin)
MIXRT_SDK_DEFINE_SCORE(mixrt::cpu::Score)
