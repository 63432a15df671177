#include "core/plugin/plugin_host_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/plugin/isolation/arena_size.h"
#include "core/plugin/plugin_host_table.h"
#include "mixrt/status_macros.h"

namespace mixrt::isolation {
namespace {

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
    // A process group of its own, which the host kills whole: whatever the
    // plugin forks (and that holds this process's stdout, say) dies with
    // it. Not PR_SET_PDEATHSIG: it fires when the thread that forked
    // exits, and plugins are loaded from whichever thread first asks; the
    // plugin host watches for this process's exit itself
    // (plugin_host_server.cc).
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    // What the plugin does not need: gaining privileges (setuid binaries
    // it might run), and a core file each time it crashes.
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    const struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    execv(host.c_str(), argv.data());
    _exit(127);
  }
  const int fork_errno = errno;
  // Also here, so no kill(-pid) can come before the child's own setpgid.
  if (pid > 0) setpgid(pid, pid);
  close(high_channel);
  close(high_arena);
  if (pid < 0) {
    return absl::InternalError(
        absl::StrCat("starting ", host, ": fork: ", strerror(fork_errno)));
  }
  return pid;
}

}  // namespace

PluginHostProcess::~PluginHostProcess() {
  if (pid_ > 0 && !failed_.load()) KillHost();
  if (slot_ >= 0) ReleaseSlot(slot_);
  if (block_ != nullptr) munmap(block_, sizeof(ChannelBlock));
  if (arena_ != nullptr) munmap(arena_, arena_bytes_);
  if (channel_fd_ >= 0) close(channel_fd_);
  if (arena_fd_ >= 0) close(arena_fd_);
}

absl::Status PluginHostProcess::Start(int slot) {
  slot_ = slot;
  MIXRT_ASSIGN_OR_RETURN(const std::string host,
                         FindPluginHost(options_.host_binary));
  const AddressSpace space = CurrentAddressSpace();
  MIXRT_ASSIGN_OR_RETURN(arena_bytes_,
                         ChooseArenaBytes(options_.arena_bytes, space));
  MIXRT_ASSIGN_OR_RETURN(
      channel_fd_,
      isolation::CreateSharedMemory("mixrt-channel", sizeof(ChannelBlock)));
  MIXRT_ASSIGN_OR_RETURN(
      arena_fd_, isolation::CreateSharedMemory("mixrt-arena", arena_bytes_));
  MIXRT_ASSIGN_OR_RETURN(
      void* block, isolation::MapShared(channel_fd_, sizeof(ChannelBlock)));
  block_ = static_cast<ChannelBlock*>(block);
  absl::StatusOr<void*> arena = isolation::MapShared(arena_fd_, arena_bytes_);
  if (!arena.ok()) {
    const std::string limit = DescribeAddressLimit(space);
    return absl::Status(
        arena.status().code(),
        absl::StrCat("the out-of-process plugin's shared arena: ",
                     arena.status().message(),
                     limit.empty() ? "" : absl::StrCat(" (under ", limit, ")"),
                     "; MIXRT_PLUGIN_ARENA_BYTES sets its size"));
  }
  arena_ = static_cast<unsigned char*>(*arena);
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
  table_ = ProxyTable(slot, minor, table_bits_);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// The channel.

MixrtError* PluginHostProcess::Exchange(Call call, const MessageWriter& request,
                                        absl::string_view call_name,
                                        absl::Duration timeout,
                                        std::optional<MessageReader>* reader,
                                        absl::Duration spin, uint64_t launch) {
  if (failed_.load(std::memory_order_acquire)) return Unavailable();
  // Named only when something went wrong: no string is made per launch.
  const auto named = [&] {
    return launch == 0 ? std::string(call_name)
                       : absl::StrCat(call_name, " (launch ", launch, ")");
  };
  if (request.overflowed()) {
    return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                     absl::StrCat(named(), ": the call does not fit the ",
                                  isolation::kPayloadBytes,
                                  "-byte channel to the plugin's process"));
  }
  const uint64_t sequence = ++sequence_;
  block_->call = static_cast<uint32_t>(call);
  block_->request_bytes = static_cast<uint32_t>(request.size());
  block_->request_sequence = sequence;
  isolation::Publish(block_, isolation::kRequest);
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const uint32_t state = isolation::WaitForChange(
        block_, isolation::kRequest, spin, absl::Milliseconds(10),
        /*yield_while_spinning=*/false);
    spin = absl::ZeroDuration();
    if (state == isolation::kResponse) break;
    if (state != isolation::kRequest) {
      return ProtocolBreak(absl::StrCat(named(), ": state word ", state));
    }
    int status = 0;
    const pid_t done = ReapIfExited(&status);
    if (done == pid_) {
      Fail(DescribeExit(status, named()));
      return Unavailable();
    }
    if (done < 0 && errno == ECHILD) {  // Reaped elsewhere (SIGCHLD ignored).
      Fail(absl::StrCat("exited in ", named()));
      return Unavailable();
    }
    if (absl::Now() >= deadline) {
      KillHost();
      Fail(absl::StrCat("hung: ", named(), " did not return in ",
                        absl::FormatDuration(timeout), " (killed)"));
      return Unavailable();
    }
  }
  // What is read is this process's copy: nothing the plugin writes after
  // answering can change a value between its check and its use.
  uint32_t code = 0;
  std::string message;
  size_t outputs_at = 0;
  if (const std::string wrong = isolation::TakeAnswer(
          *block_, sequence, &response_, &outputs_at, &code, &message);
      !wrong.empty()) {
    return ProtocolBreak(absl::StrCat(named(), ": ", wrong));
  }
  reader->emplace(response_.data(), response_.size());
  (*reader)->Skip(outputs_at);
  if (code == MIXRT_ERROR_CODE_OK) return nullptr;
  if (code > MIXRT_ERROR_CODE_UNAVAILABLE) code = MIXRT_ERROR_CODE_INTERNAL;
  return MakeError(static_cast<MixrtErrorCode>(code), std::move(message));
}

absl::Duration SpinFor(absl::Duration last) {
  if (last == absl::ZeroDuration()) return kDefaultSpin;  // Never ran.
  if (last > kLongLaunch) return absl::ZeroDuration();
  return std::min(2 * last + absl::Microseconds(5), kLongLaunch);
}

MixrtError* PluginHostProcess::PutPlaces(int32_t device, void* const* places,
                                         int32_t count, const char* what,
                                         MessageWriter& w) const {
  w.Put(count);
  for (int32_t i = 0; i < count; ++i) {
    WireRef ref;
    if (!RefFor(device, places[i], &ref)) {
      return MakeError(MIXRT_ERROR_CODE_INVALID_ARGUMENT,
                       absl::StrCat(what, " ", i,
                                    " is host memory outside the shared "
                                    "arena (not this device's)"));
    }
    w.Put(ref);
  }
  return nullptr;
}

MixrtError* PluginHostProcess::ProtocolBreak(const std::string& what) {
  KillHost();
  Fail(absl::StrCat("broke the channel's protocol (", what, "); killed"));
  return Unavailable();
}

pid_t PluginHostProcess::ReapIfExited(int* status) {
  siginfo_t info{};
  if (waitid(P_PID, pid_, &info, WEXITED | WNOHANG | WNOWAIT) != 0) return -1;
  if (info.si_pid != pid_) return 0;
  // While the host is a zombie its pid is still its group's id, never
  // another process's: what the plugin forked is killed with certainty.
  kill(-pid_, SIGKILL);
  return waitpid(pid_, status, 0);
}

void PluginHostProcess::KillHost() {
  // The whole group: what the plugin forked goes with it (SpawnHost).
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
}

void PluginHostProcess::Fail(std::string why) {
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

MixrtError* PluginHostProcess::GetInfo(MixrtPlugin_GetInfo_Args* a) {
  return Ask(
      Call::kGetInfo, "plugin_get_info", [](MessageWriter&) {},
      [&](MessageReader& r) {
        std::string name, version, build_info, device_type;
        if (!r.GetString(&name) || !r.GetString(&version) ||
            !r.GetString(&build_info) || !r.GetString(&device_type)) {
          return false;
        }
        name_ = name + options_.name_suffix;
        a->name = Keep(name_);
        a->version = Keep(std::move(version));
        a->build_info = Keep(absl::StrCat(build_info, " [out of process]"));
        a->device_type = Keep(std::move(device_type));
        return true;
      });
}

MixrtError* PluginHostProcess::DeviceCount(MixrtDevice_Count_Args* a) {
  return Ask(
      Call::kDeviceCount, "device_count", [](MessageWriter&) {},
      [&](MessageReader& r) {
        std::string reason;
        if (!r.Get(&a->count) || !r.GetString(&reason)) return false;
        a->no_device_reason =
            reason.empty() ? nullptr : Keep(std::move(reason));
        if (a->count > 0 && a->count <= 1024) {
          host_memory_.assign(a->count, 0);
          alignment_.assign(a->count, 64);
        }
        return true;
      });
}

MixrtError* PluginHostProcess::GetProperties(
    MixrtDevice_GetProperties_Args* a) {
  return Ask(
      Call::kGetProperties, "device_get_properties",
      [&](MessageWriter& w) { w.Put(a->device); },
      [&](MessageReader& r) {
        std::string name;
        if (!r.GetString(&name) || !r.Get(&a->total_memory) ||
            !r.Get(&a->flags) || !r.Get(&a->alignment)) {
          return false;
        }
        a->name = Keep(std::move(name));
        if (a->device >= 0 &&
            a->device < static_cast<int32_t>(host_memory_.size())) {
          host_memory_[a->device] =
              (a->flags & MIXRT_DEVICE_FLAG_HOST_MEMORY) != 0;
          alignment_[a->device] = a->alignment;
        }
        return true;
      });
}

MixrtError* PluginHostProcess::GetCapability(
    MixrtDevice_GetCapability_Args* a) {
  return Ask(
      Call::kGetCapability, "device_get_capability",
      [&](MessageWriter& w) {
        w.Put(a->device);
        w.Put(a->op_class);
        w.Put(a->dtype);
      },
      [&](MessageReader& r) {
        std::string reason;
        if (!r.Get(&a->level) || !r.GetString(&reason) ||
            !r.Get(&a->speed_vs_f32)) {
          return false;
        }
        a->reason = Keep(std::move(reason));
        return true;
      });
}

MixrtError* PluginHostProcess::GetOpSupport(MixrtDevice_GetOpSupport_Args* a) {
  return Ask(
      Call::kGetOpSupport, "device_get_op_support",
      [&](MessageWriter& w) {
        w.Put(a->device);
        w.Put(a->op);
        w.Put(a->variant);
        w.Put(a->dtype);
        w.Put(a->out_dtype);
      },
      [&](MessageReader& r) {
        std::string reason;
        if (!r.Get(&a->level) || !r.GetString(&reason)) return false;
        a->reason = Keep(std::move(reason));
        return true;
      });
}

MixrtError* PluginHostProcess::GetMemoryInfo(
    MixrtDevice_GetMemoryInfo_Args* a) {
  return Ask(
      Call::kGetMemoryInfo, "device_get_memory_info",
      [&](MessageWriter& w) { w.Put(a->device); },
      [&](MessageReader& r) {
        return r.Get(&a->free_bytes) && r.Get(&a->total_bytes);
      });
}

MixrtError* PluginHostProcess::GetPrecisionSupport(
    MixrtDevice_GetPrecisionSupport_Args* a) {
  return Ask(
      Call::kGetPrecisionSupport, "device_get_precision_support",
      [&](MessageWriter& w) {
        w.Put(a->device);
        w.Put(a->op_class);
        w.Put(a->precision);
      },
      [&](MessageReader& r) {
        std::string reason;
        if (!r.Get(&a->level) || !r.GetString(&reason) ||
            !r.Get(&a->speed_vs_f32)) {
          return false;
        }
        a->reason = Keep(std::move(reason));
        return true;
      });
}

}  // namespace mixrt::isolation
