#include "backends/cpu/capability/load_aware_threads.h"

#include <dirent.h>
#include <fcntl.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

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

// The CPUs this process may run on; empty if the kernel does not say (more
// CPUs than a cpu_set_t holds).
std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

int64_t ProcessCpuNs() {
  timespec t;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return 0;
  return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec;
}

std::optional<std::vector<CpuTicks>> ReadCpuTicks() {
  // The per-CPU lines come first; 64 KiB holds them for ~500 CPUs (a
  // machine with more reads a truncated list: its last CPUs count idle).
  std::string buffer(64 << 10, '\0');
  std::string_view text;
  if (!ReadSmallFile("/proc/stat", buffer.data(), buffer.size(), &text)) {
    return std::nullopt;
  }
  return ParseCpuTicks(text);
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Where a confined process's CPUs stand: the last reading of /proc/stat and
// of this process's CPU time, and what the window before it found. Touched
// only by the one caller that refreshes (UseThreadsLeftFree's exchange).
struct CpuShareWindow {
  std::vector<CpuTicks> ticks;
  int64_t own_ns = 0;
  int64_t wall_ns = 0;
  std::optional<int> others;
};
CpuShareWindow g_window;

// The CPUs' worth of `cpus` that other processes used over the last
// window, rounded; `runnable_others` (as if they all ran on ours) until a
// window has passed or where /proc/stat cannot be read.
int OthersOnCpus(const std::vector<int>& cpus, int runnable_others) {
  const int64_t now = NowNs();
  const int64_t window = std::chrono::nanoseconds(kCpuShareWindow).count();
  if (g_window.ticks.empty() || now - g_window.wall_ns >= window) {
    std::optional<std::vector<CpuTicks>> ticks = ReadCpuTicks();
    if (!ticks) return runnable_others;
    const int64_t own = ProcessCpuNs();
    std::optional<int> others;
    if (!g_window.ticks.empty()) {
      const double own_cpus = static_cast<double>(own - g_window.own_ns) /
                              static_cast<double>(now - g_window.wall_ns);
      others = static_cast<int>(
          std::lround(OthersBusyCpus(g_window.ticks, *ticks, cpus, own_cpus)));
    }
    g_window = {std::move(*ticks), own, now, others};
  }
  return g_window.others.value_or(runnable_others);
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
  int others = OtherProcessesRunnable(*system, *own);
  const std::vector<int> allowed = AllowedCpus();
  const int online = OnlineCpus();
  // Unknown (more CPUs than a cpu_set_t holds): the machine's.
  const int cpus = allowed.empty()
                       ? online
                       : std::min(online, static_cast<int>(allowed.size()));
  if (cpus < online) others = std::min(others, OthersOnCpus(allowed, others));
  // Seen in two readings a refresh apart: a kernel worker or a short
  // command caught runnable in one reading halved the threads of whatever
  // GEMM started in the next 20 ms (the seed recipe's f32 step ran 5-8%
  // slower on an idle machine).
  const int persistent = std::min(others, g_last_others.exchange(others));
  g_threads.store(ThreadsLeftFree(configured, cpus, persistent),
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

int ThreadsLeftFree(int configured, int cpus, int others) {
  return std::max(1, std::min(configured, cpus - others));
}

std::optional<std::vector<CpuTicks>> ParseCpuTicks(std::string_view proc_stat) {
  std::vector<CpuTicks> cpus;
  bool any = false;
  for (absl::string_view line : absl::StrSplit(
           absl::string_view(proc_stat.data(), proc_stat.size()), '\n')) {
    // "cpu " is the sum of all; "cpuN" one CPU.
    if (!absl::StartsWith(line, "cpu") || line.size() < 4 || line[3] < '0' ||
        line[3] > '9') {
      continue;
    }
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int cpu = 0;
    uint64_t v[8];
    if (fields.size() < 9 || !absl::SimpleAtoi(fields[0].substr(3), &cpu) ||
        cpu < 0 || cpu >= CPU_SETSIZE) {
      continue;
    }
    bool ok = true;
    for (int i = 0; i < 8; ++i)
      ok = ok && absl::SimpleAtoi(fields[1 + i], &v[i]);
    if (!ok) continue;
    // user nice system idle iowait irq softirq steal
    CpuTicks ticks;
    ticks.busy = v[0] + v[1] + v[2] + v[5] + v[6];
    ticks.total = ticks.busy + v[3] + v[4] + v[7];
    if (static_cast<size_t>(cpu) >= cpus.size()) cpus.resize(cpu + 1);
    cpus[cpu] = ticks;
    any = true;
  }
  if (!any) return std::nullopt;
  return cpus;
}

double OthersBusyCpus(const std::vector<CpuTicks>& before,
                      const std::vector<CpuTicks>& after,
                      const std::vector<int>& cpus, double own_cpus) {
  double busy = 0;
  for (int cpu : cpus) {
    if (cpu < 0 || static_cast<size_t>(cpu) >= before.size() ||
        static_cast<size_t>(cpu) >= after.size()) {
      continue;
    }
    const CpuTicks& a = before[cpu];
    const CpuTicks& b = after[cpu];
    // Counters only grow; a CPU that went offline and came back restarts.
    if (b.total <= a.total || b.busy < a.busy) continue;
    busy += static_cast<double>(b.busy - a.busy) /
            static_cast<double>(b.total - a.total);
  }
  return std::max(0.0, busy - own_cpus);
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

namespace {

// In a child of fork(), GNU OpenMP's pool is gone (its threads were not
// forked) but libgomp still believes in it: the first parallel region
// with more than one thread waits forever for them (a DataLoader worker's
// first matmul hung). The child runs single-threaded instead, as PyTorch
// tells forked DataLoader workers to (torch.set_num_threads(1)); an exec
// starts afresh with every thread. Async-signal-safe: atomics and
// omp_set_num_threads, which only sets this thread's count.
void RunSingleThreadedAfterFork() {
  g_configured.store(1, std::memory_order_relaxed);
  g_threads.store(1, std::memory_order_relaxed);
  g_enabled.store(false, std::memory_order_relaxed);
  omp_set_num_threads(1);
}

}  // namespace

void ConfigureLoadAwareThreads(int configured) {
  static const bool fork_handler_set = [] {
    return pthread_atfork(nullptr, nullptr, &RunSingleThreadedAfterFork) == 0;
  }();
  (void)fork_handler_set;
  const char* env = std::getenv(kLoadAwareThreadsEnv);
  const bool off = env != nullptr && std::strcmp(env, "0") == 0;
  g_configured.store(std::max(1, configured));
  g_threads.store(std::max(1, configured));
  g_next_refresh_ns.store(0);
  g_last_others.store(0);
  g_window = CpuShareWindow();
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
