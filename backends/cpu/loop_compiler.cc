#include "backends/cpu/loop_compiler.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "backends/cpu/cpu_info.h"
#include "common/cache_dir.h"

extern char** environ;

namespace mixrt::cpu {
namespace {

// -march=native: the object is built on and for this CPU (the cache key
// names it). No -ffast-math, and no contraction into FMAs: each op rounds
// as the interpreter's does, so the two agree bit for bit.
constexpr char kFlags[] =
    "-std=c++17 -O3 -march=native -ffp-contract=off -fPIC -shared";

// Runs argv with stdout and stderr to `log`; the exit status, or -1.
int Run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid;
  const int spawned =
      posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ReadFile(const std::string& path, size_t limit) {
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)),
                   std::istreambuf_iterator<char>());
  if (text.size() > limit) text = text.substr(0, limit) + "...";
  return text;
}

// Where built objects go: the cache directory's cpu_loops/, else a
// directory of this process's own (kept until it exits). Leaked, as the
// system compiler's description is: the background builder may still be
// naming files from them while the process exits, after static
// destructors would have freed them (files with garbage names were
// written into the working directory so).
const std::string& ObjectDirectory() {
  static const std::string* dir = new std::string([] {
    const std::string base = files::MixrtCacheDir();
    if (!base.empty()) {
      const std::string d = base + "/cpu_loops";
      if (files::MakeCacheDirectories(d) && access(d.c_str(), W_OK) == 0)
        return d;
    }
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        absl::StrCat(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp",
                     "/mixrt_cpu_loops.XXXXXX");
    return mkdtemp(pattern.data()) != nullptr ? pattern : std::string();
  }());
  return *dir;
}

// FNV-1a, 64 bits: the object's name must not depend on std::hash's
// implementation (another build reads the same cache).
uint64_t Fnv(const std::string& text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string ObjectPath(const std::string& source, const std::string& name) {
  const SystemCompiler& compiler = FindSystemCompiler();
  const std::string key =
      absl::StrCat(source, "\n", compiler.command, "\n", compiler.version, "\n",
                   kFlags, "\n", GetCpuInfo().model);
  return absl::StrFormat("%s/%s_%016x.so", ObjectDirectory(), name, Fnv(key));
}

// Loaded objects by path: dlopen once per process.
std::mutex& LoadedMutex() {
  static auto* mu = new std::mutex;
  return *mu;
}
absl::flat_hash_map<std::string, LoopEntry>& Loaded() {
  static auto* loaded = new absl::flat_hash_map<std::string, LoopEntry>;
  return *loaded;
}

LoopEntry Open(const std::string& path, const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(LoadedMutex());
    auto it = Loaded().find(path);
    if (it != Loaded().end()) return it->second;
  }
  // Only a regular file of this user: a planted symlink or someone else's
  // object is never loaded (and not removed either).
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      st.st_uid != getuid()) {
    return nullptr;
  }
  // Never closed: a kernel may hold the entry for the process's life.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  void* entry = lib != nullptr ? dlsym(lib, (name + "_host").c_str()) : nullptr;
  if (entry == nullptr) {
    // Corrupt, truncated by hand, or built by a compiler that no longer
    // runs here: rebuilt, never trusted.
    if (lib != nullptr) dlclose(lib);
    unlink(path.c_str());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(LoadedMutex());
  return Loaded()
      .try_emplace(path, reinterpret_cast<LoopEntry>(entry))
      .first->second;
}

// The background builder: one thread, builds in the order asked.
class Builder {
 public:
  static Builder& Get() {
    static auto* builder = new Builder;  // Leaked: its thread never ends.
    return *builder;
  }
  void Add(std::function<void()> job) {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back(std::move(job));
    if (!started_) {
      started_ = true;
      std::thread([this] { Loop(); }).detach();
    }
    cv_.notify_one();
  }

 private:
  void Loop() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !jobs_.empty(); });
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool started_ = false;
};

}  // namespace

absl::StatusOr<CodegenMode> CodegenModeFromEnv() {
  const char* env = std::getenv("MIXRT_CPU_CODEGEN");
  const std::string v = env != nullptr ? absl::AsciiStrToLower(env) : "";
  if (v.empty() || v == "sync") return CodegenMode::kSync;
  if (v == "async") return CodegenMode::kAsync;
  if (v == "off" || v == "0") return CodegenMode::kOff;
  return absl::InvalidArgumentError(
      absl::StrCat("MIXRT_CPU_CODEGEN=", env,
                   ": expected sync (the default), async or off"));
}

const SystemCompiler& FindSystemCompiler() {
  static const SystemCompiler* compiler = new SystemCompiler([] {
    SystemCompiler c;
    const char* cxx = std::getenv("CXX");
    c.command = cxx != nullptr && cxx[0] != '\0' ? cxx : "c++";
    if (ObjectDirectory().empty()) {
      c.missing = "no directory to build in (MIXRT_CACHE_DIR, TMPDIR)";
      return c;
    }
    const std::string log =
        absl::StrCat(ObjectDirectory(), "/version.", getpid(), ".log");
    if (Run({c.command, "--version"}, log) != 0) {
      c.missing = absl::StrCat("no C++ compiler: '", c.command,
                               " --version' did not run (set CXX to one)");
    } else {
      c.version = std::string(absl::StripAsciiWhitespace(
          std::vector<std::string>(absl::StrSplit(ReadFile(log, 4096), '\n'))
              .front()));
    }
    unlink(log.c_str());
    return c;
  }());
  return *compiler;
}

std::string CachedLoopPath(const std::string& source, const std::string& name) {
  return ObjectPath(source, name);
}

LoopEntry LoadCachedLoop(const std::string& source, const std::string& name) {
  if (!FindSystemCompiler().missing.empty()) return nullptr;
  return Open(ObjectPath(source, name), name);
}

absl::StatusOr<LoopEntry> BuildLoop(const std::string& source,
                                    const std::string& name) {
  const SystemCompiler& compiler = FindSystemCompiler();
  if (!compiler.missing.empty())
    return absl::FailedPreconditionError(compiler.missing);
  const std::string path = ObjectPath(source, name);
  if (LoopEntry entry = Open(path, name)) return entry;
  static std::atomic<int> counter{0};
  const std::string stem =
      absl::StrCat(path, ".tmp.", getpid(), ".", counter++);
  const std::string cc = stem + ".cc", so = stem + ".so", log = stem + ".log";
  {
    std::ofstream out(cc);
    out << source;
    if (!out.good())
      return absl::InternalError(absl::StrCat("cannot write ", cc));
  }
  std::vector<std::string> argv = {compiler.command};
  for (absl::string_view flag : absl::StrSplit(kFlags, ' '))
    argv.emplace_back(flag);
  argv.insert(argv.end(), {"-o", so, cc});
  const int status = Run(argv, log);
  const std::string output = ReadFile(log, 2000);
  unlink(cc.c_str());
  unlink(log.c_str());
  if (status != 0) {
    unlink(so.c_str());
    return absl::InternalError(absl::StrCat("'", compiler.command, " ", kFlags,
                                            "' failed (", status,
                                            "): ", output));
  }
  // Atomic: a reader finds the whole object or none.
  if (rename(so.c_str(), path.c_str()) != 0) {
    unlink(so.c_str());
    return absl::InternalError(
        absl::StrCat("cannot rename the built loop to ", path));
  }
  if (LoopEntry entry = Open(path, name)) return entry;
  return absl::InternalError(
      absl::StrCat(path, " was built but does not load: ", dlerror()));
}

void BuildLoopInBackground(
    std::string source, std::string name,
    std::function<void(absl::StatusOr<LoopEntry>)> done) {
  Builder::Get().Add(
      [source = std::move(source), name = std::move(name),
       done = std::move(done)] { done(BuildLoop(source, name)); });
}

}  // namespace mixrt::cpu
