#include "backends/cpu/fusion/loop_compiler.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backends/cpu/capability/cpu_info.h"
#include "common/cache_dir.h"
#include "common/elf_check.h"
#include "common/regular_file_read.h"
#include "common/run_program.h"
#include "common/trusted_path.h"

namespace mixrt::cpu {
namespace {

// -march=native: the object is built on and for this CPU (the cache key
// holds its flags). No -ffast-math, and no contraction into FMAs: each op
// rounds as the interpreter's does, so the two agree bit for bit.
// -fno-trapping-math lets GCC evaluate both arms of a select (relu's
// derivative: g * (x > 0 ? 1 : 0)) and vectorize; with it off the ReLU
// backward fused with its bias gradient stayed a scalar loop with a branch
// per element (9% of a compiled small-MLP step on AVX2). The values are
// the same: no op here reads the FP exception flags.
constexpr char kFlags[] =
    "-std=c++17 -O3 -march=native -ffp-contract=off -fno-trapping-math "
    "-fPIC -shared";

// What ends every object this builds: a magic word and the FNV-1a hash of
// the bytes before it. A truncated or bit-flipped object fails the check
// and is rebuilt, never loaded (dlopen ignores bytes past the segments).
constexpr char kTrailerMagic[8] = {'M', 'X', 'L', 'O', 'O', 'P', '0', '1'};
constexpr size_t kTrailerBytes = sizeof(kTrailerMagic) + sizeof(uint64_t);

// Objects larger than this are not ours: a generated loop builds to tens
// of KiB.
constexpr uint64_t kMaxObjectBytes = 64 << 20;

// How many objects the cache keeps; past it the least recently used go
// (MIXRT_CPU_LOOP_CACHE_MAX_OBJECTS overrides, for tests and small disks).
constexpr int kDefaultMaxObjects = 512;

// How long the compiler may run (MIXRT_CPU_CODEGEN_TIMEOUT_S overrides):
// a loop builds in 60-130 ms here; a compiler that hangs must not hang
// the program (sync mode) or pile up (async).
constexpr double kDefaultTimeoutSeconds = 120;

// FNV-1a, 64 bits: names and checks must not depend on std::hash's
// implementation (another build reads the same cache).
uint64_t Fnv(absl::string_view text, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

double EnvSeconds(const char* name, double otherwise) {
  const char* v = std::getenv(name);
  double seconds = 0;
  if (v == nullptr || !absl::SimpleAtod(v, &seconds) || !(seconds > 0))
    return otherwise;
  return seconds;
}

// Runs argv with its output to `log` (common/run_program.h); the exit
// status, or -1 when it did not start or was killed (`*timed_out`: after
// the time limit).
int Run(const std::vector<std::string>& argv, const std::string& log,
        double timeout_seconds, bool* timed_out) {
  const files::ProgramResult r = files::RunProgram(argv, timeout_seconds, log);
  *timed_out = r.timed_out;
  return r.exit_code;
}

std::string ReadLog(const std::string& path, size_t limit) {
  absl::StatusOr<std::string> text = files::ReadRegularFile(path, 1 << 20);
  if (!text.ok()) return "";
  if (text->size() > limit) return text->substr(0, limit) + "...";
  return *text;
}

// Removes `dir` and the files in it (a build's scratch directory, or this
// process's own object directory at exit).
void RemoveDirectory(const std::string& dir) {
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

// Where built objects go, and whether anything may be built there.
struct ObjectStore {
  std::string dir;
  std::string unsafe;  // Non-empty: nothing is built or loaded, and why.
};

// This process's own directory (when there is no cache directory),
// removed when it exits.
std::string* OwnDirectory() {
  static auto* dir = new std::string();
  return dir;
}

// The cache directory's cpu_loops/, when only this user can change it:
// objects there are loaded into this process, so a directory another user
// can write to (a shared or world-writable MIXRT_CACHE_DIR) is refused
// with the reason, and loops run interpreted. Without a cache directory,
// a directory of this process's own under $TMPDIR (or /tmp), removed at
// exit. Leaked, as the compiler's description is: the background builder
// may still name files from it while the process exits, after static
// destructors would have freed it.
const ObjectStore& Objects() {
  static const ObjectStore* store = new ObjectStore([] {
    ObjectStore s;
    const std::string base = files::MixrtCacheDir();
    if (!base.empty()) {
      s.dir = base + "/cpu_loops";
      if (!files::MakeCacheDirectories(s.dir)) {
        s.unsafe = absl::StrCat("cannot create the loop cache ", s.dir);
        return s;
      }
    } else {
      const char* tmp = std::getenv("TMPDIR");
      std::string pattern =
          absl::StrCat(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp",
                       "/mixrt_cpu_loops.XXXXXX");
      if (mkdtemp(pattern.data()) == nullptr) {
        s.unsafe = "no directory to build in (MIXRT_CACHE_DIR, TMPDIR)";
        return s;
      }
      s.dir = pattern;
      *OwnDirectory() = pattern;
      std::atexit([] { RemoveDirectory(*OwnDirectory()); });
    }
    if (const std::string why = files::UnsafeDirectoryReason(s.dir);
        !why.empty()) {
      s.unsafe = absl::StrCat("the loop cache is not this user's alone (", why,
                              "): nothing is built or loaded from it");
    }
    return s;
  }());
  return *store;
}

std::string ObjectPath(const std::string& source, const std::string& name) {
  const SystemCompiler& compiler = FindSystemCompiler();
  const std::string key =
      absl::StrCat(source, "\n", absl::StrJoin(compiler.argv, " "), "\n",
                   compiler.version, "\n", kFlags, "\n", GetCpuInfo().flags);
  return absl::StrFormat("%s/%s_%016x.so", Objects().dir, name, Fnv(key));
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

// Why the open object `file` must not be loaded: not this user's, not one
// of our objects (no trailer, or its hash does not match: truncated, a
// flipped bit), or not a whole ELF shared object for this machine.
std::string Unloadable(const files::RegularFile& file) {
  if (file.owner() != geteuid()) return "it is owned by another user";
  if (file.size() < kTrailerBytes || file.size() > kMaxObjectBytes)
    return "its size";
  absl::StatusOr<std::string> bytes = file.ReadAll();
  if (!bytes.ok()) return std::string(bytes.status().message());
  const absl::string_view body(bytes->data(), bytes->size() - kTrailerBytes);
  const char* trailer = bytes->data() + body.size();
  uint64_t hash = 0;
  std::memcpy(&hash, trailer + sizeof(kTrailerMagic), sizeof(hash));
  if (std::memcmp(trailer, kTrailerMagic, sizeof(kTrailerMagic)) != 0 ||
      hash != Fnv(body)) {
    return "its checksum does not match (truncated or altered)";
  }
  if (absl::Status elf = files::CheckElfSharedObject(file, "compiled loop");
      !elf.ok()) {
    return std::string(elf.message());
  }
  return "";
}

LoopEntry Open(const std::string& path, const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(LoadedMutex());
    auto it = Loaded().find(path);
    if (it != Loaded().end()) return it->second;
  }
  if (!Objects().unsafe.empty()) return nullptr;
  // The file checked is the file loaded: opened once, without following a
  // link, and mapped through this very descriptor (/proc/self/fd/N), so
  // nothing swapped in at the path between the check and dlopen is run.
  absl::StatusOr<files::RegularFile> file =
      files::RegularFile::Open(path, false);
  if (!file.ok()) {
    // A symlink, FIFO or directory planted at the path goes; a missing one
    // is simply not built yet.
    if (!absl::IsNotFound(file.status())) unlink(path.c_str());
    return nullptr;
  }
  if (const std::string why = Unloadable(*file); !why.empty()) {
    // Rebuilt, never trusted.
    std::fprintf(stderr, "mixrt cpu: cached loop %s is rebuilt: %s\n",
                 path.c_str(), why.c_str());
    unlink(path.c_str());
    return nullptr;
  }
  // Least recently used goes first when the cache is full: this use counts.
  futimens(file->fd(), nullptr);
  // A descriptor of its own, never closed: the dynamic loader knows a
  // library by the name it was opened under, and a /proc/self/fd/N reused
  // for another object would be taken for this one.
  const int held = dup(file->fd());
  if (held < 0) return nullptr;
  const std::string by_fd = absl::StrCat("/proc/self/fd/", held);
  // Never closed: a kernel may hold the entry for the process's life.
  void* lib = dlopen(by_fd.c_str(), RTLD_NOW | RTLD_LOCAL);
  void* entry = lib != nullptr ? dlsym(lib, (name + "_host").c_str()) : nullptr;
  if (entry == nullptr) {
    if (lib != nullptr) dlclose(lib);
    close(held);
    unlink(path.c_str());
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(LoadedMutex());
  return Loaded()
      .try_emplace(path, reinterpret_cast<LoopEntry>(entry))
      .first->second;
}

// Keeps the cache to its size: the least recently used objects beyond it
// are removed (a process that has them loaded keeps its mapping).
void EvictLeastRecentlyUsed(const std::string& dir) {
  int limit = kDefaultMaxObjects;
  if (const char* v = std::getenv("MIXRT_CPU_LOOP_CACHE_MAX_OBJECTS")) {
    int n = 0;
    if (absl::SimpleAtoi(v, &n) && n > 0) limit = n;
  }
  std::vector<std::pair<struct timespec, std::string>> objects;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name.size() < 4 || name.compare(name.size() - 3, 3, ".so") != 0)
        continue;
      struct stat st;
      const std::string path = dir + "/" + name;
      if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
          st.st_uid == geteuid()) {
        objects.emplace_back(st.st_mtim, path);
      }
    }
    closedir(d);
  }
  if (static_cast<int>(objects.size()) <= limit) return;
  std::sort(objects.begin(), objects.end(), [](const auto& a, const auto& b) {
    return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec < b.first.tv_sec
                                            : a.first.tv_nsec < b.first.tv_nsec;
  });
  for (size_t i = 0; i + limit < objects.size(); ++i)
    unlink(objects[i].second.c_str());
}

// Appends the trailer to the object at `path` (created in a scratch
// directory of ours).
bool AppendTrailer(const std::string& path) {
  absl::StatusOr<std::string> bytes =
      files::ReadRegularFile(path, kMaxObjectBytes);
  if (!bytes.ok()) return false;
  const uint64_t hash = Fnv(*bytes);
  const int fd =
      open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  char trailer[kTrailerBytes];
  std::memcpy(trailer, kTrailerMagic, sizeof(kTrailerMagic));
  std::memcpy(trailer + sizeof(kTrailerMagic), &hash, sizeof(hash));
  const bool ok = write(fd, trailer, sizeof(trailer)) ==
                  static_cast<ssize_t>(sizeof(trailer));
  return close(fd) == 0 && ok;
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
    // $CXX may carry arguments of its own ("g++ -O2"), as make's does.
    const char* cxx = std::getenv("CXX");
    c.argv = absl::StrSplit(cxx != nullptr ? cxx : "", absl::ByAnyChar(" \t"),
                            absl::SkipEmpty());
    if (c.argv.empty()) c.argv = {"c++"};
    c.command = absl::StrJoin(c.argv, " ");
    if (!Objects().unsafe.empty()) {
      c.missing = Objects().unsafe;
      return c;
    }
    char scratch[4096];
    const std::string pattern = Objects().dir + "/probe.XXXXXX";
    std::snprintf(scratch, sizeof(scratch), "%s", pattern.c_str());
    if (mkdtemp(scratch) == nullptr) {
      c.missing = absl::StrCat("cannot create a directory in ", Objects().dir);
      return c;
    }
    const std::string log = absl::StrCat(scratch, "/version.log");
    std::vector<std::string> argv = c.argv;
    argv.push_back("--version");
    bool timed_out = false;
    const double timeout =
        EnvSeconds("MIXRT_CPU_CODEGEN_TIMEOUT_S", kDefaultTimeoutSeconds);
    if (Run(argv, log, timeout, &timed_out) != 0) {
      c.missing =
          timed_out ? absl::StrCat("the C++ compiler '", c.command,
                                   " --version' did not finish within ",
                                   timeout, " s (MIXRT_CPU_CODEGEN_TIMEOUT_S)")
                    : absl::StrCat("no C++ compiler: '", c.command,
                                   " --version' did not run (set CXX to one)");
    } else {
      c.version = std::string(absl::StripAsciiWhitespace(
          std::vector<std::string>(absl::StrSplit(ReadLog(log, 4096), '\n'))
              .front()));
    }
    RemoveDirectory(scratch);
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
  // Source, log and object are made in a scratch directory of this build
  // alone (mkdtemp: created exclusively, mode 0700), so nothing planted
  // at a predictable name redirects a write; the object then replaces its
  // cache entry by rename.
  std::string scratch = Objects().dir + "/build.XXXXXX";
  if (mkdtemp(scratch.data()) == nullptr) {
    return absl::InternalError(
        absl::StrCat("cannot create a build directory in ", Objects().dir, ": ",
                     std::strerror(errno)));
  }
  const std::string cc = scratch + "/loop.cc", so = scratch + "/loop.so",
                    log = scratch + "/build.log";
  {
    const int fd = open(
        cc.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    const bool written = fd >= 0 && write(fd, source.data(), source.size()) ==
                                        static_cast<ssize_t>(source.size());
    if (fd >= 0) close(fd);
    if (!written) {
      RemoveDirectory(scratch);
      return absl::InternalError(absl::StrCat("cannot write ", cc));
    }
  }
  std::vector<std::string> argv = compiler.argv;
  for (absl::string_view flag : absl::StrSplit(kFlags, ' '))
    argv.emplace_back(flag);
  argv.insert(argv.end(), {"-o", so, cc});
  bool timed_out = false;
  const double timeout =
      EnvSeconds("MIXRT_CPU_CODEGEN_TIMEOUT_S", kDefaultTimeoutSeconds);
  const int status = Run(argv, log, timeout, &timed_out);
  const std::string output = ReadLog(log, 2000);
  if (status != 0 || !AppendTrailer(so) ||
      rename(so.c_str(), path.c_str()) != 0) {
    RemoveDirectory(scratch);
    if (timed_out) {
      return absl::DeadlineExceededError(
          absl::StrCat("'", compiler.command, "' did not finish within ",
                       timeout, " s (MIXRT_CPU_CODEGEN_TIMEOUT_S); killed"));
    }
    return absl::InternalError(absl::StrCat("'", compiler.command, " ", kFlags,
                                            "' failed (", status,
                                            "): ", output));
  }
  RemoveDirectory(scratch);
  EvictLeastRecentlyUsed(Objects().dir);
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
