// The host's side of one out-of-process plugin (isolated_plugin.h): the
// plugin host it started, the channel and the arena shared with it, the
// watchdog, and one method per ABI function, which the proxy table
// (plugin_host_table.h) points at. Methods are split by what they serve:
// plugin_host_process.cc (starting, the channel, identity and
// capabilities), plugin_host_memory.cc (memory and launches),
// plugin_host_compiled.cc (fusion and kernel graphs).
#ifndef MIXRT_CORE_PLUGIN_PLUGIN_HOST_PROCESS_H_
#define MIXRT_CORE_PLUGIN_PLUGIN_HOST_PROCESS_H_

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/plugin/backend.h"
#include "core/plugin/isolated_plugin.h"
#include "core/plugin/isolation/arena_allocator.h"
#include "core/plugin/isolation/shared_channel.h"
#include "core/plugin/isolation/wire_format.h"
#include "mixrt/plugin_api.h"

namespace mixrt::isolation {

inline constexpr char kHostBinaryName[] = "mixrt-plugin-host";
// Arena ranges start on this; a device asking for more gets its alignment.
inline constexpr uint64_t kArenaGranule = 256;
// Freed ranges at least this large go back to the kernel.
inline constexpr uint64_t kReleaseBytes = uint64_t{1} << 20;
// Device-memory copies go through the arena in pieces of this size.
inline constexpr uint64_t kStagingBytes = uint64_t{8} << 20;
// Spinning for an answer before sleeping on it: a calls' usual round trip.
inline constexpr absl::Duration kDefaultSpin = absl::Microseconds(20);
// Launches that took longer than this last time are slept on at once.
inline constexpr absl::Duration kLongLaunch = absl::Microseconds(50);

// The error objects this side makes (never a plugin's: those stay in the
// plugin's process and arrive as code and text).
struct ProxyError {
  MixrtErrorCode code;
  std::string message;
};

inline MixrtError* MakeError(MixrtErrorCode code, std::string message) {
  return reinterpret_cast<MixrtError*>(
      new ProxyError{code, std::move(message)});
}

inline void ErrorDestroy(MixrtError_Destroy_Args* a) {
  delete reinterpret_cast<ProxyError*>(a->error);
}
inline void ErrorMessage(MixrtError_Message_Args* a) {
  const auto* e = reinterpret_cast<const ProxyError*>(a->error);
  a->message = e->message.c_str();
  a->message_size = e->message.size();
}
inline void ErrorGetCode(MixrtError_GetCode_Args* a) {
  a->code = reinterpret_cast<const ProxyError*>(a->error)->code;
}

// How long to spin for the answer to a fused kernel's or a kernel graph's
// run whose last run took `last` (zero: never ran): a short one is worth
// it; during a long one the spin would only take a core from the plugin's
// workers. Other calls, kernel launches included, spin kDefaultSpin. This
// side never yields while spinning: measured on 2 cores, sched_yield here
// made the recipe's large GEMMs 35% slower for the rest of the run.
absl::Duration SpinFor(absl::Duration last);

class PluginHostProcess : public PluginProcess {
 public:
  PluginHostProcess(std::string path, IsolationOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}
  // Kills the plugin host if it still serves; releases the slot.
  ~PluginHostProcess() override;

  int pid() const override { return pid_; }
  std::string Failure() const override {
    if (!failed_.load(std::memory_order_acquire)) return "";
    std::lock_guard<std::mutex> lock(failure_mu_);
    return failure_;
  }

  // Maps the channel and arena, starts the plugin host, loads the plugin.
  absl::Status Start(int slot);
  const MixrtPluginApi* table() const { return &table_; }
  std::optional<int32_t> score() const { return score_; }

  // The ABI, one function per table entry.
  MixrtError* GetInfo(MixrtPlugin_GetInfo_Args* a);
  MixrtError* Initialize(MixrtPlugin_Initialize_Args*) {
    return Simple(Call::kInitialize, "plugin_initialize",
                  [](MessageWriter&) {});
  }
  MixrtError* Shutdown(MixrtPlugin_Shutdown_Args*) {
    return Simple(Call::kShutdown, "plugin_shutdown", [](MessageWriter&) {});
  }
  MixrtError* DeviceCount(MixrtDevice_Count_Args* a);
  MixrtError* GetProperties(MixrtDevice_GetProperties_Args* a);
  MixrtError* GetCapability(MixrtDevice_GetCapability_Args* a);
  MixrtError* GetOpSupport(MixrtDevice_GetOpSupport_Args* a);
  MixrtError* GetMemoryInfo(MixrtDevice_GetMemoryInfo_Args* a);
  MixrtError* GetPrecisionSupport(MixrtDevice_GetPrecisionSupport_Args* a);
  MixrtError* SynchronizeDevice(int32_t device) {
    MixrtDevice_Synchronize_Args a{};
    a.struct_size = sizeof(a);
    a.device = device;
    return Synchronize(&a);
  }
  MixrtError* Synchronize(MixrtDevice_Synchronize_Args* a) {
    const int32_t device = a->device;
    return Simple(Call::kSynchronize, "device_synchronize",
                  [device](MessageWriter& w) { w.Put(device); });
  }
  MixrtError* Allocate(MixrtMemory_Allocate_Args* a);
  MixrtError* Free(MixrtMemory_Free_Args* a);
  MixrtError* Copy(MixrtMemory_Copy_Args* a);
  MixrtError* Set(MixrtMemory_Set_Args* a);
  MixrtError* Launch(MixrtKernel_Launch_Args* a);
  MixrtError* FusionClaim(MixrtFusion_Claim_Args* a);
  MixrtError* FusionCompile(MixrtFusion_Compile_Args* a);
  MixrtError* FusedRun(MixrtFusedKernel_Run_Args* a);
  void FusedDestroy(MixrtFusedKernel_Destroy_Args* a);
  MixrtError* FusedSetWeightVersion(MixrtFusedKernel_SetWeightVersion_Args* a);
  MixrtError* FusedSetScratch(MixrtFusedKernel_SetScratch_Args* a);
  MixrtError* GraphCreate(MixrtKernelGraph_Create_Args* a);
  MixrtError* GraphRun(MixrtKernelGraph_Run_Args* a);
  void GraphDestroy(MixrtKernelGraph_Destroy_Args* a);

 private:
  // Where `p`, memory of `device`, is for the plugin's process; false for
  // host memory outside the arena (which the plugin never sees).
  bool RefFor(int32_t device, const void* p, WireRef* ref) const {
    if (p == nullptr) {
      *ref = WireRef{};
      return true;
    }
    if (!HostMemory(device)) {
      *ref = DeviceRef(p);
      return true;
    }
    const auto at = reinterpret_cast<uintptr_t>(p);
    if (!InArena(at, at)) return false;
    *ref = ArenaRef(p);
    return true;
  }
  // What the host needs of a fused kernel the plugin compiled.
  struct KernelInfo {
    uint64_t plugin_handle = 0;  // What the plugin's process calls it.
    int32_t device = 0;
    int32_t num_values = 0;
    int32_t num_symbols = 0;
    absl::Duration last_run;  // For SpinFor.
  };
  // One request and its response, under call_mu_. On success `reader` is
  // past the plugin's status and at the call's outputs; else the error.
  // `what` names the call in errors, with " (launch N)" when `launch` is
  // not 0; `spin`: how long to spin before sleeping on the answer.
  MixrtError* Exchange(Call call, const MessageWriter& request,
                       absl::string_view what, absl::Duration timeout,
                       std::optional<MessageReader>* reader,
                       absl::Duration spin = kDefaultSpin, uint64_t launch = 0);
  // Writes `count`, then where each of `places` (memory of `device`) is for
  // the plugin's process; an error naming `what` and the index for host
  // memory outside the arena.
  MixrtError* PutPlaces(int32_t device, void* const* places, int32_t count,
                        const char* what, MessageWriter& w) const;
  // A call whose answer is just a status.
  template <typename Fill>
  MixrtError* Simple(Call call, const char* what, const Fill& fill) {
    return Ask(call, what, fill, [](MessageReader&) { return true; });
  }
  // A call whose answer carries outputs: `fill` writes the request, `read`
  // takes the outputs (under the call lock) and says whether they were
  // well formed; "malformed <what>" when not.
  template <typename Fill, typename Read>
  MixrtError* Ask(Call call, const char* what, const Fill& fill,
                  const Read& read) {
    std::lock_guard<std::mutex> lock(call_mu_);
    MessageWriter w(block_->payload);
    fill(w);
    std::optional<MessageReader> r;
    if (MixrtError* e = Exchange(call, w, what, options_.call_timeout, &r)) {
      return e;
    }
    if (!read(*r)) return ProtocolBreak(std::string("malformed ") + what);
    return nullptr;
  }
  MixrtError* Unavailable() const {
    return MakeError(
        MIXRT_ERROR_CODE_UNAVAILABLE,
        absl::StrCat("the plugin's process (", kHostBinaryName, ", pid ", pid_,
                     ") ", Failure(), "; the backend is unavailable"));
  }
  // Marks the backend failed (once), with the process already gone.
  void Fail(std::string why);
  // An answer that is not an answer to the request asked (out of sequence,
  // too long, malformed): kills the plugin host and fails the backend with
  // `what`; returns UNAVAILABLE. Past such an answer the channel cannot be
  // trusted to be in step.
  MixrtError* ProtocolBreak(const std::string& what);
  // SIGKILL to the plugin host's process group, then reaps the host.
  void KillHost();
  // waitpid(WNOHANG) that, when the host has exited, first kills what is
  // left of its process group.
  pid_t ReapIfExited(int* status);
  // A string that lives as long as this object (the ABI's "out" strings).
  const char* Keep(std::string text) {
    return kept_.insert(std::move(text)).first->c_str();
  }
  bool HostMemory(int32_t device) const {
    return device >= 0 && device < static_cast<int32_t>(host_memory_.size()) &&
           host_memory_[device];
  }
  bool InArena(uintptr_t lo, uintptr_t hi) const {
    const auto base = reinterpret_cast<uintptr_t>(arena_);
    return lo >= base && hi <= base + arena_bytes_ && lo <= hi;
  }
  WireRef ArenaRef(const void* p) const {
    return WireRef{
        static_cast<uint32_t>(Space::kArena), 0,
        static_cast<uint64_t>(static_cast<const unsigned char*>(p) - arena_)};
  }
  static WireRef DeviceRef(const void* p) {
    return p == nullptr ? WireRef{}
                        : WireRef{static_cast<uint32_t>(Space::kDevice), 0,
                                  reinterpret_cast<uint64_t>(p)};
  }
  MixrtError* CopyThroughStaging(MixrtMemory_Copy_Args* a);
  void ReleaseRange(uint64_t offset, uint64_t bytes);

  const std::string path_;
  const IsolationOptions options_;
  MixrtPluginApi table_{};
  std::optional<int32_t> score_;
  uint32_t table_bits_ = 0;
  int slot_ = -1;
  pid_t pid_ = -1;
  int channel_fd_ = -1;
  int arena_fd_ = -1;
  ChannelBlock* block_ = nullptr;
  unsigned char* arena_ = nullptr;
  uint64_t arena_bytes_ = 0;
  std::unique_ptr<ArenaAllocator> arena_ranges_;

  std::mutex call_mu_;             // One call in flight on the channel.
  std::string name_;               // The plugin's name, once it said it.
  std::vector<char> host_memory_;  // Per device.
  std::vector<uint32_t> alignment_;
  std::set<std::string> kept_;
  uint64_t staging_ = 0;  // Arena offset; kStagingBytes long once made.
  bool have_staging_ = false;
  uint64_t launches_ = 0;
  uint64_t sequence_ = 0;  // The last request's number.
  // The last answer, copied out of the shared block before it is read.
  std::vector<unsigned char> response_;
  // Fused kernels and kernel graphs by the handle this side gave the
  // caller (a number of its own, never the plugin's): the counts each run
  // sends come from the caller's own call that made it, so a plugin that
  // answers two compiles with one handle cannot make a run read past the
  // caller's arrays. A plugin handle already live is refused
  // (AdoptHandle).
  std::map<uint64_t, KernelInfo> kernels_;
  // Kernel graphs: the plugin's handle, device and buffer count (each run
  // sends that many base addresses), and the last run's time (for
  // SpinFor).
  struct GraphInfo {
    uint64_t plugin_handle = 0;
    int32_t device = 0;
    int32_t num_buffers = 0;
    absl::Duration last_run;
  };
  std::map<uint64_t, GraphInfo> graphs_;
  uint64_t next_handle_ = 0;  // The last handle this side gave out.
  // A new handle for the plugin's `plugin_handle`, or 0 when `live` (the
  // kernels or graphs this side holds) already has it, which is then an
  // error naming `what`.
  template <typename Info>
  uint64_t AdoptHandle(uint64_t plugin_handle,
                       const std::map<uint64_t, Info>& live, const char* what,
                       MixrtError** error);

  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string failure_;
};

}  // namespace mixrt::isolation

#endif  // MIXRT_CORE_PLUGIN_PLUGIN_HOST_PROCESS_H_
