#include "core/plugin/isolated_plugin.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/trusted_path.h"
#include "core/plugin/isolation/arena_allocator.h"
#include "core/plugin/isolation/fusion_graph_codec.h"
#include "core/plugin/isolation/kernel_graph_codec.h"
#include "core/plugin/isolation/shared_channel.h"
#include "core/plugin/isolation/wire_format.h"
#include "core/plugin/plugin_loader.h"
#include "core/plugin/plugin_search_path.h"
#include "mixrt/op_names.h"
#include "mixrt/status_macros.h"

namespace mixrt {
namespace {

using isolation::ArenaAllocator;
using isolation::Call;
using isolation::ChannelBlock;
using isolation::MessageReader;
using isolation::MessageWriter;
using isolation::Space;
using isolation::WireRef;
using isolation::WireTensorDesc;

constexpr char kHostBinaryName[] = "mixrt-plugin-host";
// Arena ranges start on this; a device asking for more gets its alignment.
constexpr uint64_t kArenaGranule = 256;
// Freed ranges at least this large go back to the kernel.
constexpr uint64_t kReleaseBytes = uint64_t{1} << 20;
// Device-memory copies go through the arena in pieces of this size.
constexpr uint64_t kStagingBytes = uint64_t{8} << 20;
// As many out-of-process plugins as one process loads (each gets a table of
// functions of its own: the ABI's functions carry no context pointer).
constexpr int kMaxIsolatedPlugins = 16;
// Spinning for an answer before sleeping on it: a calls' usual round trip.
constexpr absl::Duration kDefaultSpin = absl::Microseconds(20);
// Launches that took longer than this last time are slept on at once.
constexpr absl::Duration kLongLaunch = absl::Microseconds(50);

// The error objects this side makes (never a plugin's: those stay in the
// plugin's process and arrive as code and text).
struct ProxyError {
  MixrtErrorCode code;
  std::string message;
};

MixrtError* MakeError(MixrtErrorCode code, std::string message) {
  return reinterpret_cast<MixrtError*>(
      new ProxyError{code, std::move(message)});
}

void ErrorDestroy(MixrtError_Destroy_Args* a) {
  delete reinterpret_cast<ProxyError*>(a->error);
}
void ErrorMessage(MixrtError_Message_Args* a) {
  const auto* e = reinterpret_cast<const ProxyError*>(a->error);
  a->message = e->message.c_str();
  a->message_size = e->message.size();
}
void ErrorGetCode(MixrtError_GetCode_Args* a) {
  a->code = reinterpret_cast<const ProxyError*>(a->error)->code;
}

size_t DtypeBytes(uint32_t dtype) {
  switch (dtype) {
    case MIXRT_DTYPE_F16:
    case MIXRT_DTYPE_BF16:
      return 2;
    case MIXRT_DTYPE_I64:
      return 8;
    case MIXRT_DTYPE_BOOL:
      return 1;
    default:
      return 4;
  }
}

// The bytes a descriptor reaches, [lo, hi); false when it has no elements.
bool TensorExtent(const MixrtTensorDesc& d, uintptr_t* lo, uintptr_t* hi) {
  if (d.data == nullptr) return false;
  int64_t last = 0;
  for (int i = 0; i < d.ndim; ++i) {
    if (d.shape[i] <= 0) return false;
    last += (d.shape[i] - 1) * d.strides[i];
  }
  *lo = reinterpret_cast<uintptr_t>(d.data);
  *hi = *lo + static_cast<uintptr_t>(last + 1) * DtypeBytes(d.dtype);
  return true;
}

std::string DescribeExit(int status, const std::string& what) {
  if (WIFSIGNALED(status)) {
    const char* abbrev = sigabbrev_np(WTERMSIG(status));
    return absl::StrCat("crashed: ",
                        abbrev != nullptr
                            ? absl::StrCat("SIG", abbrev)
                            : absl::StrCat("signal ", WTERMSIG(status)),
                        " in ", what);
  }
  if (WIFEXITED(status)) {
    return absl::StrCat("exited with status ", WEXITSTATUS(status), " in ",
                        what);
  }
  return absl::StrCat("stopped serving in ", what);
}

class IsolatedPlugin;
std::atomic<IsolatedPlugin*> g_slots[kMaxIsolatedPlugins];
std::mutex g_slots_mu;

class IsolatedPlugin : public PluginProcess {
 public:
  IsolatedPlugin(std::string path, IsolationOptions options)
      : path_(std::move(path)), options_(std::move(options)) {}
  ~IsolatedPlugin() override {
    if (pid_ > 0 && !failed_.load()) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (slot_ >= 0) {
      std::lock_guard<std::mutex> lock(g_slots_mu);
      g_slots[slot_].store(nullptr);
    }
    if (block_ != nullptr) munmap(block_, sizeof(ChannelBlock));
    if (arena_ != nullptr) munmap(arena_, arena_bytes_);
    if (channel_fd_ >= 0) close(channel_fd_);
    if (arena_fd_ >= 0) close(arena_fd_);
  }

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
    int32_t device = 0;
    int32_t num_values = 0;
    int32_t num_symbols = 0;
    absl::Duration last_run;  // As last_launch_.
  };
  // One request and its response, under call_mu_. On success `reader` is
  // past the plugin's status and at the call's outputs; else the error.
  // `spin`: how long to spin before sleeping on the answer.
  MixrtError* Exchange(Call call, const MessageWriter& request,
                       const std::string& what, absl::Duration timeout,
                       std::optional<MessageReader>* reader,
                       absl::Duration spin = kDefaultSpin);
  // How long to spin for a launch of `op`, from its last launch's time.
  absl::Duration LaunchSpin(uint32_t op) const;
  // A call whose answer is just a status.
  template <typename Fill>
  MixrtError* Simple(Call call, const char* what, const Fill& fill) {
    std::lock_guard<std::mutex> lock(call_mu_);
    MessageWriter w(block_->payload);
    fill(w);
    std::optional<MessageReader> reader;
    return Exchange(call, w, what, options_.call_timeout, &reader);
  }
  MixrtError* Unavailable() const {
    return MakeError(
        MIXRT_ERROR_CODE_UNAVAILABLE,
        absl::StrCat("the plugin's process (", kHostBinaryName, ", pid ", pid_,
                     ") ", Failure(), "; the backend is unavailable"));
  }
  // Marks the backend failed (once), with the process already gone.
  void Fail(std::string why);
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
  // Per op, how long its last launch took: a short one is worth spinning
  // for; during a long one the spin would only take a core from the
  // plugin's workers. (This side never yields while spinning: measured on
  // 2 cores, sched_yield here, even in short launches only, made the
  // recipe's long GEMMs 35% slower for the rest of the run.)
  std::array<absl::Duration, MIXRT_OP_COUNT> last_launch_{};
  std::map<uint64_t, KernelInfo> kernels_;  // By the plugin's handle.
  // Kernel graphs by the plugin's handle: device and buffer count (each run
  // sends that many base addresses), and the last run's time (as
  // last_launch_).
  struct GraphInfo {
    int32_t device = 0;
    int32_t num_buffers = 0;
    absl::Duration last_run;
  };
  std::map<uint64_t, GraphInfo> graphs_;

  std::atomic<bool> failed_{false};
  mutable std::mutex failure_mu_;
  std::string failure_;
};

// ---------------------------------------------------------------------------
// The tables: per slot, functions that find their plugin by the slot.

template <int S>
struct Slot {
  static IsolatedPlugin* P() {
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

// ---------------------------------------------------------------------------
// Starting the plugin host.

// fork + exec of `host` with the channel and arena at fds 3 and 4.
absl::StatusOr<pid_t> SpawnHost(const std::string& host,
                                const std::string& plugin, int channel_fd,
                                int arena_fd, uint64_t arena_bytes) {
  const std::string arena_arg = absl::StrCat(arena_bytes);
  std::vector<char*> argv = {const_cast<char*>(host.c_str()),
                             const_cast<char*>(plugin.c_str()),
                             const_cast<char*>(arena_arg.c_str()), nullptr};
  // Above the numbers they go to, so the dup2s below cannot clobber one
  // another.
  const int high_channel = fcntl(channel_fd, F_DUPFD_CLOEXEC, 10);
  const int high_arena = fcntl(arena_fd, F_DUPFD_CLOEXEC, 10);
  if (high_channel < 0 || high_arena < 0) {
    if (high_channel >= 0) close(high_channel);
    if (high_arena >= 0) close(high_arena);
    return absl::InternalError(
        absl::StrCat("starting ", host, ": dup: ", strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls until exec.
    if (dup2(high_channel, isolation::kChannelFd) < 0 ||
        dup2(high_arena, isolation::kArenaFd) < 0) {
      _exit(126);
    }
    syscall(SYS_close_range, isolation::kArenaFd + 1, ~0U, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execv(host.c_str(), argv.data());
    _exit(127);
  }
  const int fork_errno = errno;
  close(high_channel);
  close(high_arena);
  if (pid < 0) {
    return absl::InternalError(
        absl::StrCat("starting ", host, ": fork: ", strerror(fork_errno)));
  }
  return pid;
}

absl::Status IsolatedPlugin::Start(int slot) {
  slot_ = slot;
  MIXRT_ASSIGN_OR_RETURN(const std::string host,
                         FindPluginHost(options_.host_binary));
  arena_bytes_ = options_.arena_bytes;
  if (arena_bytes_ == 0) {
    arena_bytes_ = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                   static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  }
  MIXRT_ASSIGN_OR_RETURN(
      channel_fd_,
      isolation::CreateSharedMemory("mixrt-channel", sizeof(ChannelBlock)));
  MIXRT_ASSIGN_OR_RETURN(
      arena_fd_, isolation::CreateSharedMemory("mixrt-arena", arena_bytes_));
  MIXRT_ASSIGN_OR_RETURN(
      void* block, isolation::MapShared(channel_fd_, sizeof(ChannelBlock)));
  block_ = static_cast<ChannelBlock*>(block);
  MIXRT_ASSIGN_OR_RETURN(void* arena,
                         isolation::MapShared(arena_fd_, arena_bytes_));
  arena_ = static_cast<unsigned char*>(arena);
  arena_ranges_ = std::make_unique<ArenaAllocator>(arena_bytes_, kArenaGranule);
  block_->magic = isolation::kChannelMagic;
  block_->version = isolation::kWireVersion;
  block_->state.store(isolation::kIdle);
  MIXRT_ASSIGN_OR_RETURN(
      pid_, SpawnHost(host, path_, channel_fd_, arena_fd_, arena_bytes_));

  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  std::optional<MessageReader> reader;
  MixrtError* error =
      Exchange(Call::kHello, w, "loading", options_.start_timeout, &reader);
  if (error != nullptr) {
    auto* e = reinterpret_cast<ProxyError*>(error);
    absl::Status status = StatusFromErrorCode(
        e->code,
        absl::StrCat("plugin ", path_, " (out of process): ", e->message));
    delete e;
    return status;
  }
  uint32_t major = 0, minor = 0, has_score = 0;
  int32_t score = 1;
  if (!reader->Get(&major) || !reader->Get(&minor) ||
      !reader->Get(&table_bits_) || !reader->Get(&has_score) ||
      !reader->Get(&score)) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin ", path_, ": ", kHostBinaryName,
                     " answered loading with a malformed message"));
  }
  if (has_score != 0) score_ = score;
  if (major != MIXRT_PLUGIN_API_MAJOR) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin ", path_, " refused: it was built for mixrt plugin ABI ", major,
        ".", minor, " but this host implements ABI ", MIXRT_PLUGIN_API_MAJOR,
        ".", MIXRT_PLUGIN_API_MINOR));
  }
  table_ = TableForSlot(slot, minor, table_bits_,
                        std::make_index_sequence<kMaxIsolatedPlugins>());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The channel.

MixrtError* IsolatedPlugin::Exchange(Call call, const MessageWriter& request,
                                     const std::string& what,
                                     absl::Duration timeout,
                                     std::optional<MessageReader>* reader,
                                     absl::Duration spin) {
  if (failed_.load(std::memory_order_acquire)) return Unavailable();
  if (request.overflowed()) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     absl::StrCat(what, ": the call does not fit the ",
                                  isolation::kPayloadBytes,
                                  "-byte channel to the plugin's process"));
  }
  block_->call = static_cast<uint32_t>(call);
  block_->request_bytes = static_cast<uint32_t>(request.size());
  isolation::Publish(block_, isolation::kRequest);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const uint32_t state = isolation::WaitForChange(
        block_, isolation::kRequest, spin, absl::Milliseconds(10),
        /*yield_while_spinning=*/false);
    spin = absl::ZeroDuration();
    if (state == isolation::kResponse) break;
    if (state != isolation::kRequest) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      Fail(absl::StrCat("broke the channel's protocol in ", what, " (killed)"));
      return Unavailable();
    }
    int status = 0;
    const pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      Fail(DescribeExit(status, what));
      return Unavailable();
    }
    if (done < 0 && errno == ECHILD) {  // Reaped elsewhere (SIGCHLD ignored).
      Fail(absl::StrCat("exited in ", what));
      return Unavailable();
    }
    if (absl::Now() >= deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
      Fail(absl::StrCat("hung: ", what, " did not return in ",
                        absl::FormatDuration(timeout), " (killed)"));
      return Unavailable();
    }
  }
  reader->emplace(block_->payload, block_->response_bytes);
  uint32_t code = 0;
  std::string message;
  if (!(*reader)->Get(&code) || !(*reader)->GetString(&message)) {
    return MakeError(
        MIXRT_ERROR_CODE_INTERNAL,
        absl::StrCat(what, ": malformed answer from ", kHostBinaryName));
  }
  if (code == MIXRT_ERROR_CODE_OK) return nullptr;
  if (code > MIXRT_ERROR_CODE_UNAVAILABLE) code = MIXRT_ERROR_CODE_INTERNAL;
  return MakeError(static_cast<MixrtErrorCode>(code), std::move(message));
}

absl::Duration IsolatedPlugin::LaunchSpin(uint32_t op) const {
  if (op >= MIXRT_OP_COUNT || last_launch_[op] == absl::ZeroDuration()) {
    return kDefaultSpin;
  }
  const absl::Duration last = last_launch_[op];
  if (last > kLongLaunch) return absl::ZeroDuration();
  return std::min(2 * last + absl::Microseconds(5), kLongLaunch);
}

void IsolatedPlugin::Fail(std::string why) {
  {
    std::lock_guard<std::mutex> lock(failure_mu_);
    if (failed_.load()) return;
    failure_ = std::move(why);
    failed_.store(true, std::memory_order_release);
  }
  std::fprintf(stderr,
               "mixrt: backend '%s' (out of process, pid %d) failed: %s; its "
               "calls now return UNAVAILABLE\n",
               name_.empty() ? path_.c_str() : name_.c_str(),
               static_cast<int>(pid_), Failure().c_str());
}

// ---------------------------------------------------------------------------
// Identity and capabilities.

MixrtError* IsolatedPlugin::GetInfo(MixrtPlugin_GetInfo_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGetInfo, w, "plugin_get_info",
                               options_.call_timeout, &r)) {
    return e;
  }
  std::string name, version, build_info, device_type;
  if (!r->GetString(&name) || !r->GetString(&version) ||
      !r->GetString(&build_info) || !r->GetString(&device_type)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed plugin_get_info");
  }
  name_ = name + options_.name_suffix;
  a->name = Keep(name_);
  a->version = Keep(std::move(version));
  a->build_info = Keep(absl::StrCat(build_info, " [out of process]"));
  a->device_type = Keep(std::move(device_type));
  return nullptr;
}

MixrtError* IsolatedPlugin::DeviceCount(MixrtDevice_Count_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kDeviceCount, w, "device_count",
                               options_.call_timeout, &r)) {
    return e;
  }
  std::string reason;
  if (!r->Get(&a->count) || !r->GetString(&reason)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed device_count");
  }
  a->no_device_reason = reason.empty() ? nullptr : Keep(std::move(reason));
  if (a->count > 0 && a->count <= 1024) {
    host_memory_.assign(a->count, 0);
    alignment_.assign(a->count, 64);
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::GetProperties(MixrtDevice_GetProperties_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGetProperties, w, "device_get_properties",
                               options_.call_timeout, &r)) {
    return e;
  }
  std::string name;
  if (!r->GetString(&name) || !r->Get(&a->total_memory) || !r->Get(&a->flags) ||
      !r->Get(&a->alignment)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed device_get_properties");
  }
  a->name = Keep(std::move(name));
  if (a->device >= 0 && a->device < static_cast<int32_t>(host_memory_.size())) {
    host_memory_[a->device] = (a->flags & MIXRT_DEVICE_FLAG_HOST_MEMORY) != 0;
    alignment_[a->device] = a->alignment;
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::GetCapability(MixrtDevice_GetCapability_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  w.Put(a->op_class);
  w.Put(a->dtype);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGetCapability, w, "device_get_capability",
                               options_.call_timeout, &r)) {
    return e;
  }
  std::string reason;
  if (!r->Get(&a->level) || !r->GetString(&reason) ||
      !r->Get(&a->speed_vs_f32)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed device_get_capability");
  }
  a->reason = Keep(std::move(reason));
  return nullptr;
}

MixrtError* IsolatedPlugin::GetOpSupport(MixrtDevice_GetOpSupport_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  w.Put(a->op);
  w.Put(a->variant);
  w.Put(a->dtype);
  w.Put(a->out_dtype);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGetOpSupport, w, "device_get_op_support",
                               options_.call_timeout, &r)) {
    return e;
  }
  std::string reason;
  if (!r->Get(&a->level) || !r->GetString(&reason)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed device_get_op_support");
  }
  a->reason = Keep(std::move(reason));
  return nullptr;
}

MixrtError* IsolatedPlugin::GetMemoryInfo(MixrtDevice_GetMemoryInfo_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  std::optional<MessageReader> r;
  if (MixrtError* e =
          Exchange(Call::kGetMemoryInfo, w, "device_get_memory_info",
                   options_.call_timeout, &r)) {
    return e;
  }
  if (!r->Get(&a->free_bytes) || !r->Get(&a->total_bytes)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed device_get_memory_info");
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::GetPrecisionSupport(
    MixrtDevice_GetPrecisionSupport_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  w.Put(a->op_class);
  w.Put(a->precision);
  std::optional<MessageReader> r;
  if (MixrtError* e =
          Exchange(Call::kGetPrecisionSupport, w,
                   "device_get_precision_support", options_.call_timeout, &r)) {
    return e;
  }
  std::string reason;
  if (!r->Get(&a->level) || !r->GetString(&reason) ||
      !r->Get(&a->speed_vs_f32)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed device_get_precision_support");
  }
  a->reason = Keep(std::move(reason));
  return nullptr;
}

// ---------------------------------------------------------------------------
// Memory.

MixrtError* IsolatedPlugin::Allocate(MixrtMemory_Allocate_Args* a) {
  if (failed_.load(std::memory_order_acquire)) return Unavailable();
  a->ptr = nullptr;
  if (a->bytes == 0) return nullptr;
  if (HostMemory(a->device)) {
    std::optional<uint64_t> offset =
        arena_ranges_->Allocate(a->bytes, alignment_[a->device]);
    if (!offset.has_value()) {
      return MakeError(
          MIXRT_ERROR_CODE_OUT_OF_MEMORY,
          absl::StrCat("the shared arena (", arena_bytes_, " bytes, ",
                       arena_ranges_->bytes_in_use(),
                       " in use) has no free range of ", a->bytes, " bytes"));
    }
    a->ptr = arena_ + *offset;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  w.Put(a->bytes);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kAllocate, w, "memory_allocate",
                               options_.call_timeout, &r)) {
    return e;
  }
  uint64_t handle = 0;
  if (!r->Get(&handle)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed memory_allocate");
  }
  a->ptr = reinterpret_cast<void*>(handle);
  return nullptr;
}

void IsolatedPlugin::ReleaseRange(uint64_t offset, uint64_t bytes) {
  if (bytes >= kReleaseBytes) {
    fallocate(arena_fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              static_cast<off_t>(offset), static_cast<off_t>(bytes));
  }
}

MixrtError* IsolatedPlugin::Free(MixrtMemory_Free_Args* a) {
  if (a->ptr == nullptr) return nullptr;
  const auto p = reinterpret_cast<uintptr_t>(a->ptr);
  if (HostMemory(a->device)) {
    if (!InArena(p, p)) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       "memory_free: the pointer is not from memory_allocate");
    }
    const uint64_t offset = p - reinterpret_cast<uintptr_t>(arena_);
    ReleaseRange(offset, arena_ranges_->Free(offset));
    return nullptr;
  }
  // A failed process took its device memory with it: nothing to free.
  if (failed_.load(std::memory_order_acquire)) return nullptr;
  const int32_t device = a->device;
  const WireRef ref = DeviceRef(a->ptr);
  return Simple(Call::kFree, "memory_free", [&](MessageWriter& w) {
    w.Put(device);
    w.Put(ref);
  });
}

MixrtError* IsolatedPlugin::Copy(MixrtMemory_Copy_Args* a) {
  if (a->bytes == 0) return nullptr;
  if (!HostMemory(a->device)) return CopyThroughStaging(a);
  const auto dst = reinterpret_cast<uintptr_t>(a->dst);
  const auto src = reinterpret_cast<uintptr_t>(a->src);
  if (InArena(dst, dst + a->bytes) && InArena(src, src + a->bytes)) {
    const int32_t device = a->device;
    const uint32_t kind = a->kind;
    const WireRef d = ArenaRef(a->dst), s = ArenaRef(a->src);
    const uint64_t bytes = a->bytes;
    return Simple(Call::kCopy, "memory_copy", [&](MessageWriter& w) {
      w.Put(device);
      w.Put(kind);
      w.Put(d);
      w.Put(s);
      w.Put(bytes);
    });
  }
  // One side is this process's memory: once the plugin has finished what
  // it was asked before (issue order), the copy is this side's to make.
  MixrtDevice_Synchronize_Args sync{};
  sync.struct_size = sizeof(sync);
  sync.device = a->device;
  if (MixrtError* e = Synchronize(&sync)) return e;
  std::memmove(a->dst, a->src, a->bytes);
  return nullptr;
}

MixrtError* IsolatedPlugin::CopyThroughStaging(MixrtMemory_Copy_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  if (failed_.load(std::memory_order_acquire)) return Unavailable();
  if (a->kind == MIXRT_COPY_DEVICE_TO_DEVICE) {
    MessageWriter w(block_->payload);
    w.Put(a->device);
    w.Put(a->kind);
    w.Put(DeviceRef(a->dst));
    w.Put(DeviceRef(a->src));
    w.Put(a->bytes);
    std::optional<MessageReader> r;
    return Exchange(Call::kCopy, w, "memory_copy", options_.call_timeout, &r);
  }
  if (!have_staging_) {
    std::optional<uint64_t> offset =
        arena_ranges_->Allocate(kStagingBytes, kArenaGranule);
    if (!offset.has_value()) {
      return MakeError(MIXRT_ERROR_CODE_OUT_OF_MEMORY,
                       "no arena range left to stage copies through");
    }
    staging_ = *offset;
    have_staging_ = true;
  }
  const bool to_device = a->kind == MIXRT_COPY_HOST_TO_DEVICE;
  for (uint64_t done = 0; done < a->bytes; done += kStagingBytes) {
    const uint64_t piece = std::min(kStagingBytes, a->bytes - done);
    unsigned char* stage = arena_ + staging_;
    if (to_device) {
      std::memcpy(stage, static_cast<const unsigned char*>(a->src) + done,
                  piece);
    }
    MessageWriter w(block_->payload);
    w.Put(a->device);
    w.Put(a->kind);
    w.Put(to_device ? DeviceRef(static_cast<unsigned char*>(a->dst) + done)
                    : ArenaRef(stage));
    w.Put(to_device
              ? ArenaRef(stage)
              : DeviceRef(static_cast<const unsigned char*>(a->src) + done));
    w.Put(piece);
    std::optional<MessageReader> r;
    if (MixrtError* e = Exchange(Call::kCopy, w, "memory_copy",
                                 options_.call_timeout, &r)) {
      return e;
    }
    if (!to_device) {
      std::memcpy(static_cast<unsigned char*>(a->dst) + done, stage, piece);
    }
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::Set(MixrtMemory_Set_Args* a) {
  if (a->bytes == 0) return nullptr;
  const auto dst = reinterpret_cast<uintptr_t>(a->dst);
  const bool host = HostMemory(a->device);
  if (host && !InArena(dst, dst + a->bytes)) {
    MixrtDevice_Synchronize_Args sync{};
    sync.struct_size = sizeof(sync);
    sync.device = a->device;
    if (MixrtError* e = Synchronize(&sync)) return e;
    std::memset(a->dst, a->value, a->bytes);
    return nullptr;
  }
  if ((table_bits_ & isolation::kHasMemorySet) == 0) {
    if (host) {
      MixrtDevice_Synchronize_Args sync{};
      sync.struct_size = sizeof(sync);
      sync.device = a->device;
      if (MixrtError* e = Synchronize(&sync)) return e;
      std::memset(a->dst, a->value, a->bytes);
      return nullptr;
    }
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "the plugin has no memory_set");
  }
  const int32_t device = a->device;
  const WireRef ref = host ? ArenaRef(a->dst) : DeviceRef(a->dst);
  const uint8_t value = a->value;
  const uint64_t bytes = a->bytes;
  return Simple(Call::kSet, "memory_set", [&](MessageWriter& w) {
    w.Put(device);
    w.Put(ref);
    w.Put(value);
    w.Put(bytes);
  });
}

// ---------------------------------------------------------------------------
// Launches.

MixrtError* IsolatedPlugin::Launch(MixrtKernel_Launch_Args* a) {
  const int32_t count = a->num_inputs + a->num_outputs;
  if (a->num_inputs < 0 || a->num_outputs < 0 ||
      count > isolation::kMaxLaunchTensors) {
    return MakeError(
        MIXRT_ERROR_CODE_INVALID_ARGUMENT,
        absl::StrCat("kernel_launch: ", count, " tensors (at most ",
                     isolation::kMaxLaunchTensors, ")"));
  }
  const bool host = HostMemory(a->device);
  const auto desc = [a](int32_t i) -> const MixrtTensorDesc& {
    return i < a->num_inputs ? a->inputs[i] : a->outputs[i - a->num_inputs];
  };
  // Host memory outside the arena (another host device's tensors) is copied
  // into it for the launch: merged ranges, so aliasing views stay aliased.
  struct Staged {
    uintptr_t lo, hi;
    uint64_t offset;
    bool written;
  };
  std::vector<Staged> staged;
  if (host) {
    for (int32_t i = 0; i < count; ++i) {
      uintptr_t lo, hi;
      if (!TensorExtent(desc(i), &lo, &hi) || InArena(lo, hi)) continue;
      staged.push_back({lo, hi, 0, i >= a->num_inputs});
    }
    std::sort(staged.begin(), staged.end(),
              [](const Staged& x, const Staged& y) { return x.lo < y.lo; });
    std::vector<Staged> merged;
    for (const Staged& s : staged) {
      if (!merged.empty() && s.lo < merged.back().hi) {
        merged.back().hi = std::max(merged.back().hi, s.hi);
        merged.back().written |= s.written;
      } else {
        merged.push_back(s);
      }
    }
    staged = std::move(merged);
    for (Staged& s : staged) {
      std::optional<uint64_t> offset =
          arena_ranges_->Allocate(s.hi - s.lo, kArenaGranule);
      if (!offset.has_value()) {
        for (const Staged& done : staged) {
          if (&done == &s) break;
          arena_ranges_->Free(done.offset);
        }
        return MakeError(MIXRT_ERROR_CODE_OUT_OF_MEMORY,
                         "no arena range left to stage a launch's operands");
      }
      s.offset = *offset;
      std::memcpy(arena_ + s.offset, reinterpret_cast<const void*>(s.lo),
                  s.hi - s.lo);
    }
  }
  const auto where = [&](const MixrtTensorDesc& d) -> WireRef {
    if (d.data == nullptr) return WireRef{};
    if (!host) return DeviceRef(d.data);
    const auto p = reinterpret_cast<uintptr_t>(d.data);
    for (const Staged& s : staged) {
      if (p >= s.lo && p < s.hi) {
        return WireRef{static_cast<uint32_t>(Space::kArena), 0,
                       s.offset + (p - s.lo)};
      }
    }
    if (!InArena(p, p)) return WireRef{};  // No elements: never read.
    return ArenaRef(d.data);
  };
  MixrtError* error = nullptr;
  {
    std::lock_guard<std::mutex> lock(call_mu_);
    MessageWriter w(block_->payload);
    w.Put(a->device);
    w.Put(a->op);
    w.Put(a->num_inputs);
    w.Put(a->num_outputs);
    for (int32_t i = 0; i < count; ++i) {
      const MixrtTensorDesc& d = desc(i);
      WireTensorDesc wd;
      wd.data = where(d);
      wd.dtype = d.dtype;
      wd.ndim = std::max(0, std::min<int32_t>(d.ndim, MIXRT_MAX_DIMS));
      for (int k = 0; k < wd.ndim; ++k) {
        wd.shape[k] = d.shape[k];
        wd.strides[k] = d.strides[k];
      }
      w.Put(wd);
    }
    uint32_t attr_bytes = 0;
    if (a->attrs != nullptr) {
      size_t size = 0;
      std::memcpy(&size, a->attrs, sizeof(size));
      attr_bytes = static_cast<uint32_t>(
          std::min<size_t>(size, isolation::kMaxAttrBytes));
    }
    w.Put(attr_bytes);
    w.PutBytes(a->attrs, attr_bytes);
    ++launches_;
    std::optional<MessageReader> r;
    error = Exchange(Call::kLaunch, w,
                     absl::StrCat(MixrtOpName(static_cast<MixrtOp>(a->op)),
                                  " (launch ", launches_, ")"),
                     options_.call_timeout, &r);
  }
  if (!staged.empty()) {
    if (error == nullptr) {
      MixrtDevice_Synchronize_Args sync{};
      sync.struct_size = sizeof(sync);
      sync.device = a->device;
      error = Synchronize(&sync);
    }
    for (const Staged& s : staged) {
      if (error == nullptr && s.written) {
        std::memcpy(reinterpret_cast<void*>(s.lo), arena_ + s.offset,
                    s.hi - s.lo);
      }
      arena_ranges_->Free(s.offset);
    }
  }
  return error;
}

// ---------------------------------------------------------------------------
// Fusion: the graph travels to the plugin for claim and compile; a kernel is
// the plugin's handle, run with the values' places.

MixrtError* IsolatedPlugin::FusionClaim(MixrtFusion_Claim_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  if (!isolation::WriteFusionGraph(*a->graph, w)) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "fusion_claim: the graph does not fit the channel to the "
                     "plugin's process");
  }
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusionClaim, w, "fusion_claim",
                               options_.call_timeout, &r)) {
    return e;
  }
  if (!r->Get(&a->num_groups) ||
      !r->GetBytes(a->group_of_node,
                   sizeof(int32_t) * std::max(0, a->graph->num_nodes))) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed fusion_claim");
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::FusionCompile(MixrtFusion_Compile_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  if (!isolation::WriteFusionGraph(*a->graph, w) ||
      !w.PutBytes(a->group_of_node,
                  sizeof(int32_t) * std::max(0, a->graph->num_nodes)) ||
      !w.Put(a->group)) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "fusion_compile: the graph does not fit the channel to "
                     "the plugin's process");
  }
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusionCompile, w, "fusion_compile",
                               options_.call_timeout, &r)) {
    return e;
  }
  uint64_t kernel = 0, scratch_bytes = 0;
  std::string description;
  if (!r->Get(&kernel) || !r->GetString(&description) ||
      !r->Get(&scratch_bytes)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL, "malformed fusion_compile");
  }
  a->kernel = reinterpret_cast<MixrtFusedKernel*>(kernel);
  a->description = Keep(std::move(description));
  if (MIXRT_STRUCT_HAS(a, MixrtFusion_Compile_Args, scratch_bytes)) {
    a->scratch_bytes = scratch_bytes;
  }
  if (kernel != 0) {
    kernels_[kernel] = KernelInfo{a->device, a->graph->num_values,
                                  a->graph->num_symbols, absl::ZeroDuration()};
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::FusedRun(MixrtFusedKernel_Run_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->kernel);
  auto it = kernels_.find(handle);
  if (it == kernels_.end()) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     "fused_kernel_run: not a kernel this plugin compiled");
  }
  KernelInfo& kernel = it->second;
  MessageWriter w(block_->payload);
  w.Put(handle);
  w.Put(kernel.num_values);
  for (int32_t v = 0; v < kernel.num_values; ++v) {
    WireRef ref;
    if (!RefFor(kernel.device, a->value_data[v], &ref)) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       absl::StrCat("fused_kernel_run: value ", v,
                                    " is host memory outside the shared "
                                    "arena (not this device's)"));
    }
    w.Put(ref);
  }
  w.Put(kernel.num_symbols);
  if (kernel.num_symbols > 0) {
    w.PutBytes(a->symbol_sizes, sizeof(int64_t) * kernel.num_symbols);
  }
  const absl::Duration spin =
      kernel.last_run == absl::ZeroDuration() ? kDefaultSpin
      : kernel.last_run > kLongLaunch
          ? absl::ZeroDuration()
          : std::min(2 * kernel.last_run + absl::Microseconds(5), kLongLaunch);
  ++launches_;
  std::optional<MessageReader> r;
  const absl::Time start = absl::Now();
  MixrtError* error =
      Exchange(Call::kFusedRun, w,
               absl::StrCat("a fused kernel (launch ", launches_, ")"),
               options_.call_timeout, &r, spin);
  kernel.last_run = absl::Now() - start;
  return error;
}

void IsolatedPlugin::FusedDestroy(MixrtFusedKernel_Destroy_Args* a) {
  if (a->kernel == nullptr) return;
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->kernel);
  kernels_.erase(handle);
  if (failed_.load(std::memory_order_acquire)) return;
  MessageWriter w(block_->payload);
  w.Put(handle);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusedDestroy, w, "fused_kernel_destroy",
                               options_.call_timeout, &r)) {
    delete reinterpret_cast<ProxyError*>(e);
  }
}

MixrtError* IsolatedPlugin::FusedSetWeightVersion(
    MixrtFusedKernel_SetWeightVersion_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(reinterpret_cast<uint64_t>(a->kernel));
  w.Put(a->value);
  w.Put(a->version);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kFusedSetWeightVersion, w,
                               "fused_kernel_set_weight_version",
                               options_.call_timeout, &r)) {
    return e;
  }
  uint32_t keeps_copy = 0;
  if (!r->Get(&keeps_copy)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed fused_kernel_set_weight_version");
  }
  if (MIXRT_STRUCT_HAS(a, MixrtFusedKernel_SetWeightVersion_Args, keeps_copy)) {
    a->keeps_copy = keeps_copy;
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::FusedSetScratch(
    MixrtFusedKernel_SetScratch_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->kernel);
  auto it = kernels_.find(handle);
  WireRef scratch;
  if (it == kernels_.end() ||
      !RefFor(it->second.device, a->scratch, &scratch)) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     "fused_kernel_set_scratch: unknown kernel, or scratch "
                     "memory not from this device");
  }
  MessageWriter w(block_->payload);
  w.Put(handle);
  w.Put(scratch);
  w.Put(a->bytes);
  std::optional<MessageReader> r;
  return Exchange(Call::kFusedSetScratch, w, "fused_kernel_set_scratch",
                  options_.call_timeout, &r);
}

// ---------------------------------------------------------------------------
// Kernel graphs: the steps travel once; a run sends the buffers' places.

MixrtError* IsolatedPlugin::GraphCreate(MixrtKernelGraph_Create_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  MessageWriter w(block_->payload);
  w.Put(a->device);
  w.Put(a->num_buffers);
  if (!isolation::WriteKernelGraphSteps(a->steps, a->num_steps, w)) {
    return MakeError(MIXRT_ERROR_CODE_UNIMPLEMENTED,
                     "kernel_graph_create: the steps do not fit the channel "
                     "to the plugin's process");
  }
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGraphCreate, w, "kernel_graph_create",
                               options_.call_timeout, &r)) {
    return e;
  }
  uint64_t graph = 0;
  if (!r->Get(&graph)) {
    return MakeError(MIXRT_ERROR_CODE_INTERNAL,
                     "malformed kernel_graph_create");
  }
  a->graph = reinterpret_cast<MixrtKernelGraph*>(graph);
  if (graph != 0) {
    graphs_[graph] = GraphInfo{a->device, a->num_buffers, absl::ZeroDuration()};
  }
  return nullptr;
}

MixrtError* IsolatedPlugin::GraphRun(MixrtKernelGraph_Run_Args* a) {
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->graph);
  auto it = graphs_.find(handle);
  if (it == graphs_.end()) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     "kernel_graph_run: not a graph this plugin made");
  }
  GraphInfo& graph = it->second;
  MessageWriter w(block_->payload);
  w.Put(handle);
  w.Put(graph.num_buffers);
  for (int32_t b = 0; b < graph.num_buffers; ++b) {
    WireRef ref;
    if (!RefFor(graph.device, a->buffers[b], &ref)) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       absl::StrCat("kernel_graph_run: buffer ", b,
                                    " is host memory outside the shared "
                                    "arena (not this device's)"));
    }
    w.Put(ref);
  }
  const absl::Duration spin =
      graph.last_run == absl::ZeroDuration() ? kDefaultSpin
      : graph.last_run > kLongLaunch
          ? absl::ZeroDuration()
          : std::min(2 * graph.last_run + absl::Microseconds(5), kLongLaunch);
  ++launches_;
  std::optional<MessageReader> r;
  const absl::Time start = absl::Now();
  MixrtError* error =
      Exchange(Call::kGraphRun, w,
               absl::StrCat("a kernel graph (launch ", launches_, ")"),
               options_.call_timeout, &r, spin);
  graph.last_run = absl::Now() - start;
  int32_t failed_step = -1;
  if (r.has_value() && r->Get(&failed_step) &&
      MIXRT_STRUCT_HAS(a, MixrtKernelGraph_Run_Args, failed_step)) {
    a->failed_step = failed_step;
  }
  return error;
}

void IsolatedPlugin::GraphDestroy(MixrtKernelGraph_Destroy_Args* a) {
  if (a->graph == nullptr) return;
  std::lock_guard<std::mutex> lock(call_mu_);
  const uint64_t handle = reinterpret_cast<uint64_t>(a->graph);
  graphs_.erase(handle);
  if (failed_.load(std::memory_order_acquire)) return;
  MessageWriter w(block_->payload);
  w.Put(handle);
  std::optional<MessageReader> r;
  if (MixrtError* e = Exchange(Call::kGraphDestroy, w, "kernel_graph_destroy",
                               options_.call_timeout, &r)) {
    delete reinterpret_cast<ProxyError*>(e);
  }
}

}  // namespace

// ---------------------------------------------------------------------------

absl::StatusOr<IsolationOptions> IsolationOptionsFromEnvironment() {
  IsolationOptions options;
  if (const char* env = std::getenv(kPluginTimeoutEnv)) {
    double seconds = 0;
    if (!absl::SimpleAtod(env, &seconds) || !(seconds > 0) || seconds > 86400) {
      return absl::InvalidArgumentError(
          absl::StrCat(kPluginTimeoutEnv, "='", env,
                       "': expected seconds, a number in (0, 86400]"));
    }
    options.call_timeout = absl::Seconds(seconds);
  }
  if (const char* env = std::getenv(kPluginHostEnv)) {
    options.host_binary = env;
  }
  return options;
}

bool IsolationPolicy::Wants(const std::string& plugin_path) const {
  if (all) return true;
  if (names.empty()) return false;
  const size_t slash = plugin_path.rfind('/');
  std::string file =
      slash == std::string::npos ? plugin_path : plugin_path.substr(slash + 1);
  constexpr absl::string_view kPrefix = "libmixrt_";
  constexpr absl::string_view kSuffix = ".so";
  if (!absl::StartsWith(file, kPrefix) || !absl::EndsWith(file, kSuffix)) {
    return false;
  }
  const std::string name = file.substr(
      kPrefix.size(), file.size() - kPrefix.size() - kSuffix.size());
  return std::find(names.begin(), names.end(), name) != names.end();
}

IsolationPolicy ParseIsolationPolicy(const std::string& text) {
  IsolationPolicy policy;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    part = absl::StripAsciiWhitespace(part);
    if (part.empty()) continue;
    if (part == "all") {
      policy.all = true;
    } else {
      policy.names.emplace_back(part);
    }
  }
  return policy;
}

IsolationPolicy IsolationPolicyFromEnvironment() {
  const char* env = std::getenv(kPluginIsolationEnv);
  return env == nullptr ? IsolationPolicy{} : ParseIsolationPolicy(env);
}

std::mutex g_default_host_mu;
std::string& DefaultPluginHost() {
  static std::string* path = new std::string();
  return *path;
}

void SetDefaultPluginHost(const std::string& path) {
  std::lock_guard<std::mutex> lock(g_default_host_mu);
  DefaultPluginHost() = path;
}

absl::StatusOr<std::string> FindPluginHost(const std::string& explicit_path) {
  std::vector<std::string> candidates;
  if (!explicit_path.empty()) {
    candidates.push_back(explicit_path);
  } else {
    {
      std::lock_guard<std::mutex> lock(g_default_host_mu);
      if (!DefaultPluginHost().empty()) {
        candidates.push_back(DefaultPluginHost());
      }
    }
    const std::string core_dir = CoreObjectDirectory();
    if (!core_dir.empty()) {
      candidates.push_back(absl::StrCat(core_dir, "/", kHostBinaryName));
    }
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
      std::string self(exe, n);
      const size_t slash = self.rfind('/');
      if (slash != std::string::npos) {
        candidates.push_back(
            absl::StrCat(self.substr(0, slash), "/", kHostBinaryName));
      }
    }
  }
  for (const std::string& path : candidates) {
    if (access(path.c_str(), X_OK) != 0) continue;
    if (path[0] != '/') {
      return absl::FailedPreconditionError(
          absl::StrCat(kPluginHostEnv, "='", path,
                       "' is a relative path; give an absolute one"));
    }
    const std::string unsafe = files::UntrustedReason(path);
    if (!unsafe.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to run ", path, " for an out-of-process plugin: ", unsafe));
    }
    return path;
  }
  return absl::NotFoundError(absl::StrCat(
      "no ", kHostBinaryName, " to run an out-of-process plugin in (looked: ",
      candidates.empty() ? std::string("nowhere")
                         : absl::StrJoin(candidates, ", "),
      "); set ", kPluginHostEnv, " to its absolute path"));
}

absl::StatusOr<std::unique_ptr<Backend>> LoadPluginOutOfProcess(
    const std::string& path, const IsolationOptions& options) {
  auto plugin = std::make_shared<IsolatedPlugin>(path, options);
  int slot = -1;
  {
    std::lock_guard<std::mutex> lock(g_slots_mu);
    for (int i = 0; i < kMaxIsolatedPlugins; ++i) {
      if (g_slots[i].load() == nullptr) {
        slot = i;
        g_slots[i].store(plugin.get(), std::memory_order_release);
        break;
      }
    }
  }
  if (slot < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("plugin ", path, ": already ", kMaxIsolatedPlugins,
                     " plugins out of process (the most one process runs)"));
  }
  MIXRT_RETURN_IF_ERROR(plugin->Start(slot));
  MIXRT_ASSIGN_OR_RETURN(
      std::unique_ptr<Backend> backend,
      BackendFromApiTable(path, nullptr, plugin->table(), plugin->score()));
  backend->AdoptProcess(std::move(plugin));
  return backend;
}

}  // namespace mixrt
