#include "backends/cpu/capability/load_aware_threads.h"

#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"

namespace mixrt::cpu {
namespace {

// Past this many threads of our own the per-thread reads cost more than a
// refresh should (~1 us each); such a process keeps its count.
constexpr int kMaxTasksRead = 256;

std::atomic<bool> g_enabled{false};
std::atomic<int> g_configured{1};
std::atomic<int> g_threads{1};
std::atomic<int64_t> g_next_refresh_ns{0};
std::atomic<int> g_last_others{0};

// Reads a small /proc file into `buffer`; false if it cannot.
bool ReadSmallFile(const char* path, char* buffer, size_t size,
                   std::string_view* text) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = read(fd, buffer, size);
  close(fd);
  if (n <= 0) return false;
  *text = std::string_view(buffer, static_cast<size_t>(n));
  return true;
}

std::optional<int> SystemRunnable() {
  char buffer[256];
  std::string_view text;
  if (!ReadSmallFile("/proc/loadavg", buffer, sizeof(buffer), &text)) {
    return std::nullopt;
  }
  return ParseRunnableFromLoadavg(text);
}

std::optional<int> OwnRunnable() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return std::nullopt;
  int runnable = 0;
  int tasks = 0;
  bool ok = true;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    if (++tasks > kMaxTasksRead) {
      ok = false;
      break;
    }
    const std::string path =
        std::string("/proc/self/task/") + entry->d_name + "/stat";
    char buffer[512];
    std::string_view text;
    // A thread that ended meanwhile is not runnable.
    if (ReadSmallFile(path.c_str(), buffer, sizeof(buffer), &text) &&
        IsRunnableTaskStat(text)) {
      ++runnable;
    }
  }
  closedir(dir);
  if (!ok) return std::nullopt;
  return runnable;
}

int OnlineCpus() {
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Refresh() {
  const int configured = g_configured.load(std::memory_order_relaxed);
  const std::optional<int> system = SystemRunnable();
  const std::optional<int> own = OwnRunnable();
  // Unreadable (no /proc, a huge process): the configured count, as before.
  if (!system || !own) {
    g_threads.store(configured, std::memory_order_relaxed);
    return;
  }
  const int others = OtherProcessesRunnable(*system, *own);
  // Seen in two readings a refresh apart: a kernel worker or a short
  // command caught runnable in one reading halved the threads of whatever
  // GEMM started in the next 20 ms (the seed recipe's f32 step ran 5-8%
  // slower on an idle machine).
  const int persistent = std::min(others, g_last_others.exchange(others));
  g_threads.store(ThreadsLeftFree(configured, OnlineCpus(), persistent),
                  std::memory_order_relaxed);
}

class ThreadsLeftFreeKernel : public sdk::FusedKernel {
 public:
  explicit ThreadsLeftFreeKernel(std::unique_ptr<sdk::FusedKernel> kernel)
      : kernel_(std::move(kernel)) {}

  sdk::Status Run(sdk::Span<void* const> value_data,
                  sdk::Span<const int64_t> symbols) override {
    UseThreadsLeftFree();
    return kernel_->Run(value_data, symbols);
  }
  std::string Description() const override { return kernel_->Description(); }
  void SetWeightVersion(int value, uint64_t version) override {
    kernel_->SetWeightVersion(value, version);
  }
  bool KeepsCopyOf(int value) const override {
    return kernel_->KeepsCopyOf(value);
  }

 private:
  std::unique_ptr<sdk::FusedKernel> kernel_;
};

}  // namespace

std::unique_ptr<sdk::FusedKernel> RunOnThreadsLeftFree(
    std::unique_ptr<sdk::FusedKernel> kernel) {
  return std::make_unique<ThreadsLeftFreeKernel>(std::move(kernel));
}

int OtherProcessesRunnable(int system_runnable, int own_runnable) {
  return std::max(0, system_runnable - own_runnable);
}

int ThreadsLeftFree(int configured, int online_cpus, int others) {
  return std::max(1, std::min(configured, online_cpus - others));
}

std::optional<int> ParseRunnableFromLoadavg(std::string_view text) {
  // Fields: three load averages, then "runnable/total", then the last pid.
  size_t pos = 0;
  for (int field = 0; field < 3; ++field) {
    pos = text.find(' ', pos);
    if (pos == std::string_view::npos) return std::nullopt;
    ++pos;
  }
  const size_t slash = text.find('/', pos);
  if (slash == std::string_view::npos) return std::nullopt;
  int runnable = 0;
  if (!absl::SimpleAtoi(absl::string_view(text.data() + pos, slash - pos),
                        &runnable) ||
      runnable < 0) {
    return std::nullopt;
  }
  return runnable;
}

bool IsRunnableTaskStat(std::string_view stat) {
  const size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) {
    return false;
  }
  return stat[close + 1] == ' ' && stat[close + 2] == 'R';
}

void ConfigureLoadAwareThreads(int configured) {
  const char* env = std::getenv(kLoadAwareThreadsEnv);
  const bool off = env != nullptr && std::strcmp(env, "0") == 0;
  g_configured.store(std::max(1, configured));
  g_threads.store(std::max(1, configured));
  g_next_refresh_ns.store(0);
  g_last_others.store(0);
  g_enabled.store(!off && configured > 1);
}

void UseThreadsLeftFree() {
  const int64_t now = NowNs();
  int64_t due = g_next_refresh_ns.load(std::memory_order_relaxed);
  // One caller refreshes; the others use the count it last found. Turned
  // off, every host thread still gets the configured count (OpenMP's
  // omp_set_num_threads at initialization set only that thread's).
  if (g_enabled.load(std::memory_order_relaxed) && now >= due &&
      g_next_refresh_ns.compare_exchange_strong(
          due, now + std::chrono::nanoseconds(kRefreshInterval).count())) {
    Refresh();
  }
  const int threads = g_threads.load(std::memory_order_relaxed);
  if (omp_get_max_threads() != threads) omp_set_num_threads(threads);
}

}  // namespace mixrt::cpu
