#include "backends/cpu/onednn/onednn3_companion.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "backends/cpu/capability/cpu_info.h"
#include "backends/cpu/onednn/companion_check.h"
#include "backends/cpu/onednn3/companion_abi.h"
#include "backends/cpu/onednn3/companion_product.h"
#include "common/shared_library.h"

namespace mixrt::cpu {
namespace {

constexpr char kRuleEnv[] = "MIXRT_CPU_ONEDNN";
constexpr char kLibraryEnv[] = "MIXRT_CPU_ONEDNN3_LIBRARY";
constexpr char kLibraryName[] = "libmixrt_cpu_onednn3.so";
// Timed runs of each side per new shape, after one untimed run each (which
// builds the primitive). The fastest counts.
constexpr int kTimedRuns = 3;
// The companion must be this much faster to be chosen: below it, the two
// are a tie within timing noise and the plugin's own oneDNN (the tested
// default) keeps the shape.
constexpr double kCompanionMargin = 0.97;
// Shapes remembered before starting over (a model has a few dozen).
constexpr size_t kMaxRoutes = 4096;

enum class Rule { kOwnOnly, kMeasuredHere, kMeasured, kCompanionFirst };

struct Companion {
  void* handle = nullptr;
  MixrtOneDnn3RunFn* run = nullptr;
  MixrtOneDnn3ImplementationFn* implementation = nullptr;
  std::string version;  // "3.2.0"
  std::string path;
};

struct Loaded {
  Rule rule = Rule::kOwnOnly;
  std::unique_ptr<Companion> companion;  // Null: not used, for `why`.
  std::string why;
};

Rule RuleFromEnv() {
  const char* env = std::getenv(kRuleEnv);
  if (env == nullptr || std::strcmp(env, "auto") == 0 || *env == '\0')
    return Rule::kMeasuredHere;
  if (std::strcmp(env, "measure") == 0) return Rule::kMeasured;
  if (std::strcmp(env, "3") == 0) return Rule::kCompanionFirst;
  return Rule::kOwnOnly;  // "2", and anything else (said by the summary).
}

// The directory of the object this code is in: the plugin, or a program
// the plugin's code is linked into.
std::string OwnDirectory() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&RuleFromEnv), &info) == 0 ||
      info.dli_fname == nullptr) {
    return "";
  }
  std::string path = info.dli_fname;
  // Loaded through its descriptor (common/shared_library.h): the file the
  // descriptor, held open, names.
  if (absl::StartsWith(path, "/proc/self/fd/")) {
    char target[4096];
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0) return "";
    path.assign(target, n);
  }
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// Without the companion's own symbols looked up first, a process that has
// oneDNN 2 in its global scope (a program linked with the plugin's code)
// would bind the companion's dnnl_* calls to it. AddressSanitizer refuses
// RTLD_DEEPBIND; there the version check below refuses that case instead.
int OpenFlags() {
#if defined(__SANITIZE_ADDRESS__)
  return RTLD_NOW | RTLD_LOCAL;
#else
  return RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND;
#endif
}

template <typename Fn>
Fn* Symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn*>(dlsym(handle, name));
}

// The companion at `path`, or why not.
std::unique_ptr<Companion> Open(const std::string& path, std::string* why) {
  if (path.empty() || path[0] != '/') {
    // A relative name would be checked in one place and, bare, searched
    // for by the dynamic loader in others (LD_LIBRARY_PATH).
    *why = absl::StrCat(kLibraryEnv, "='", path,
                        "' is not an absolute path; give one");
    return nullptr;
  }
  files::SharedLibraryOptions load;
  load.what = "oneDNN 3.x companion";
  load.flags = OpenFlags();
  absl::StatusOr<void*> loaded = files::LoadSharedLibrary(path, load);
  if (absl::IsNotFound(loaded.status())) {
    *why = absl::StrCat("no ", kLibraryName, " beside the plugin (", path,
                        "); scripts/setup_onednn3.sh, then bazel build "
                        "//backends/cpu:libmixrt_cpu_onednn3.so");
    return nullptr;
  }
  if (!loaded.ok()) {
    *why = std::string(loaded.status().message());
    return nullptr;
  }
  void* handle = *loaded;
  auto c = std::make_unique<Companion>();
  c->handle = handle;
  c->path = path;
  auto* abi = Symbol<MixrtOneDnn3AbiVersionFn>(
      handle, MIXRT_ONEDNN3_ABI_VERSION_SYMBOL);
  auto* version =
      Symbol<MixrtOneDnn3VersionFn>(handle, MIXRT_ONEDNN3_VERSION_SYMBOL);
  c->run = Symbol<MixrtOneDnn3RunFn>(handle, MIXRT_ONEDNN3_RUN_SYMBOL);
  c->implementation = Symbol<MixrtOneDnn3ImplementationFn>(
      handle, MIXRT_ONEDNN3_IMPLEMENTATION_SYMBOL);
  if (abi == nullptr || version == nullptr || c->run == nullptr ||
      c->implementation == nullptr) {
    *why = absl::StrCat(path, " lacks the companion's entry points");
  } else if (abi() != MIXRT_CPU_ONEDNN3_ABI_VERSION) {
    *why = absl::StrCat(path, " speaks companion ABI ", abi(), ", this plugin ",
                        MIXRT_CPU_ONEDNN3_ABI_VERSION);
  } else if (const int32_t v = version(); v / 10000 != 3) {
    *why = absl::StrCat(
        path, "'s calls reach oneDNN ", v / 10000, ".", v / 100 % 100,
        " instead of 3.x (this process has another oneDNN in its global "
        "symbol scope)");
  } else if (const std::string wrong = KnownProductsDisagreement(c->run);
             !wrong.empty()) {
    *why = absl::StrCat(path, " dropped: ", wrong);
  } else {
    c->version = absl::StrCat(v / 10000, ".", v / 100 % 100, ".", v % 100);
    return c;
  }
  dlclose(handle);
  return nullptr;
}

Loaded Load() {
  Loaded l;
  l.rule = RuleFromEnv();
  const char* env = std::getenv(kRuleEnv);
  if (l.rule == Rule::kOwnOnly) {
    l.why = absl::StrCat(kRuleEnv, "=", env,
                         " (\"auto\", \"measure\", \"2\" or \"3\")");
    return l;
  }
  const CpuInfo& cpu = GetCpuInfo();
  if (l.rule == Rule::kMeasuredHere &&
      !((cpu.amx || cpu.avx512_fp16) && cpu.onednn_avx512)) {
    l.why =
        "this CPU (or ONEDNN_MAX_CPU_ISA) has neither AMX nor avx512_fp16, "
        "where oneDNN 3.x has kernels 2.6.3 lacks; elsewhere it measured "
        "the same (MIXRT_CPU_ONEDNN=measure or 3 uses it anyway)";
    return l;
  }
  const char* path = std::getenv(kLibraryEnv);
  l.companion = Open(path != nullptr && *path != '\0'
                         ? std::string(path)
                         : OwnDirectory() + "/" + kLibraryName,
                     &l.why);
  if (l.rule == Rule::kMeasuredHere) l.rule = Rule::kMeasured;
  return l;
}

const Loaded& Get() {
  static const Loaded* loaded = new Loaded(Load());  // Never unloaded.
  return *loaded;
}

std::atomic<int64_t> g_on_own{0}, g_on_companion{0}, g_shapes_timed{0};

enum class Route : uint8_t { kOwn, kCompanion };

struct Routes {
  std::mutex mu;
  absl::flat_hash_map<MatmulKey, Route> by_shape;
};
Routes& RoutesByShape() {
  static Routes* routes = new Routes;
  return *routes;
}

// Bytes from c's first element to one past its last (0 when c is empty).
size_t Extent(const MatmulOperand& c) {
  int64_t last = 0;
  for (size_t i = 0; i < c.dims.size(); ++i) {
    if (c.dims[i] <= 0) return 0;
    last += (c.dims[i] - 1) * c.strides[i];
  }
  const size_t element = c.dtype == MIXRT_DTYPE_F32 ? 4 : 2;
  return static_cast<size_t>(last + 1) * element;
}

// Set once a product shape's first answer disagreed with the plugin's own
// oneDNN (companion_check.h): from then on the companion takes nothing.
std::atomic<bool> g_dropped{false};
std::mutex g_dropped_mu;
std::string g_dropped_why;

bool Dropped() { return g_dropped.load(std::memory_order_acquire); }

// Whether the companion's first answer for this shape is the plugin's own
// oneDNN's (run into copies of c: the real c is left for the chosen side).
// A shape the companion cannot build, or the own oneDNN cannot (f16 on
// 2.6.3: the known products checked at load stand for it), passes.
bool FirstAnswerAgrees(const Companion& companion, const MatmulShape& shape,
                       const MixrtOneDnn3Product& product, const void* a,
                       const void* b, const void* c, const void* bias,
                       const void* const* post_op_data) {
  const size_t bytes = Extent(shape.c);
  if (bytes == 0) return true;
  std::unique_ptr<char[]> theirs(new char[bytes]), ours(new char[bytes]);
  std::memcpy(theirs.get(), c, bytes);
  std::memcpy(ours.get(), c, bytes);
  char message[256];
  if (companion.run(&product, a, b, theirs.get(), bias, message,
                    sizeof(message)) != 0) {
    return true;
  }
  try {
    RunPreparedMatmul(shape, a, b, ours.get(), bias, post_op_data);
  } catch (const dnnl::error&) {
    return true;
  }
  // The copies start at c's first element: Extent counts from there.
  const std::string wrong =
      ProductDisagreement(shape.c, ours.get(), theirs.get());
  if (wrong.empty()) return true;
  std::lock_guard<std::mutex> lock(g_dropped_mu);
  if (!g_dropped.load()) {
    g_dropped_why = absl::StrCat(
        "dropped: its first answer for a ",
        shape.a.dims.size() >= 2
            ? absl::StrCat(shape.a.dims[shape.a.dims.size() - 2], "x",
                           shape.a.dims.back(), " by ", shape.b.dims.back())
            : std::string("new"),
        " product disagreed with the plugin's own oneDNN (", wrong, ")");
    g_dropped.store(true, std::memory_order_release);
    std::fprintf(stderr, "mixrt cpu: oneDNN 3.x companion %s\n",
                 g_dropped_why.c_str());
  }
  return false;
}

template <typename Fn>
double FastestSeconds(Fn&& run) {
  double best = 1e30;
  for (int i = 0; i < kTimedRuns; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - start)
                              .count());
  }
  return best;
}

// Runs the product on both sides into a copy of c (the real c is left for
// the chosen side: a sum reads it) and says which was faster.
Route Measure(const Companion& companion, const MatmulShape& shape,
              const MixrtOneDnn3Product& product, const void* a, const void* b,
              const void* c, const void* bias,
              const void* const* post_op_data) {
  const size_t bytes = Extent(shape.c);
  if (bytes == 0) return Route::kOwn;
  std::unique_ptr<char[]> scratch(new char[bytes]);
  std::memcpy(scratch.get(), c, bytes);
  char message[256];
  if (companion.run(&product, a, b, scratch.get(), bias, message,
                    sizeof(message)) != 0) {
    return Route::kOwn;  // oneDNN 3.x cannot build it.
  }
  try {
    RunPreparedMatmul(shape, a, b, scratch.get(), bias, post_op_data);
  } catch (const dnnl::error&) {
    return Route::kCompanion;  // 2.6.3 cannot (f16 products).
  }
  const double own = FastestSeconds([&] {
    RunPreparedMatmul(shape, a, b, scratch.get(), bias, post_op_data);
  });
  const double third = FastestSeconds([&] {
    companion.run(&product, a, b, scratch.get(), bias, message,
                  sizeof(message));
  });
  g_shapes_timed.fetch_add(1, std::memory_order_relaxed);
  return third < own * kCompanionMargin ? Route::kCompanion : Route::kOwn;
}

Route RouteFor(const Companion& companion, Rule rule, const MatmulShape& shape,
               const MixrtOneDnn3Product& product, const void* a, const void* b,
               const void* c, const void* bias,
               const void* const* post_op_data) {
  Routes& routes = RoutesByShape();
  MatmulKey key = PreparedMatmulKey(shape);
  {
    std::lock_guard<std::mutex> lock(routes.mu);
    auto it = routes.by_shape.find(key);
    if (it != routes.by_shape.end()) return it->second;
  }
  // Checked and timed outside the lock: another thread doing the same
  // shape at once only repeats the work, and the first answer stays.
  if (!FirstAnswerAgrees(companion, shape, product, a, b, c, bias,
                         post_op_data)) {
    return Route::kOwn;
  }
  const Route route =
      rule == Rule::kCompanionFirst
          ? Route::kCompanion
          : Measure(companion, shape, product, a, b, c, bias, post_op_data);
  std::lock_guard<std::mutex> lock(routes.mu);
  if (routes.by_shape.size() >= kMaxRoutes) routes.by_shape.clear();
  return routes.by_shape.emplace(std::move(key), route).first->second;
}

}  // namespace

std::string OneDnn3CompanionRefusal(const std::string& path) {
  std::string why;
  std::unique_ptr<Companion> companion = Open(path, &why);
  if (companion != nullptr) dlclose(companion->handle);
  return why;
}

void RunProductOnChosenOneDnn(const MatmulShape& shape, const void* a,
                              const void* b, void* c, const void* bias,
                              const void* const* post_op_data) {
  const Loaded& loaded = Get();
  MixrtOneDnn3Product product;
  if (loaded.companion != nullptr && !Dropped() &&
      ToCompanionProduct(shape, &product) &&
      RouteFor(*loaded.companion, loaded.rule, shape, product, a, b, c, bias,
               post_op_data) == Route::kCompanion) {
    char message[256];
    if (loaded.companion->run(&product, a, b, c, bias, message,
                              sizeof(message)) == 0) {
      g_on_companion.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    // oneDNN 3.x could not build it (its message is not needed: the
    // plugin's own oneDNN takes the product, and says so if it cannot).
  }
  g_on_own.fetch_add(1, std::memory_order_relaxed);
  RunPreparedMatmul(shape, a, b, c, bias, post_op_data);
}

std::string OneDnn3CompanionSummary() {
  const Loaded& loaded = Get();
  if (loaded.companion == nullptr) {
    return absl::StrCat("oneDNN 3.x companion not used: ", loaded.why);
  }
  if (Dropped()) {
    std::lock_guard<std::mutex> lock(g_dropped_mu);
    return absl::StrCat("oneDNN 3.x companion not used: ",
                        loaded.companion->path, " ", g_dropped_why);
  }
  return absl::StrCat(
      "oneDNN ", loaded.companion->version, " companion (",
      loaded.companion->path, ") ",
      loaded.rule == Rule::kCompanionFirst
          ? "runs every product it can take (MIXRT_CPU_ONEDNN=3)"
          : "runs the product shapes where it timed faster");
}

bool OneDnn3CompanionLoaded() {
  return Get().companion != nullptr && !Dropped();
}

const std::string& OneDnn3CompanionImplementation(MixrtDtype dtype) {
  // Asked per product (RunMatmul's widening), and oneDNN builds a
  // primitive descriptor to answer: once per float dtype, then kept (the
  // companion is never unloaded).
  static const std::array<std::string, 3>* implementations = [] {
    auto* all = new std::array<std::string, 3>;
    const Loaded& loaded = Get();
    if (loaded.companion == nullptr) return all;
    for (MixrtDtype d : {MIXRT_DTYPE_F32, MIXRT_DTYPE_F16, MIXRT_DTYPE_BF16}) {
      MatmulShape shape;
      shape.a = {d, {64, 64}, {64, 1}};
      shape.b = shape.a;
      shape.c = {MIXRT_DTYPE_F32, {64, 64}, {64, 1}};
      MixrtOneDnn3Product product;
      if (!ToCompanionProduct(shape, &product)) continue;
      char implementation[128];
      loaded.companion->implementation(&product, implementation,
                                       sizeof(implementation));
      (*all)[d] = implementation;
    }
    return all;
  }();
  static const std::string none;
  return dtype <= MIXRT_DTYPE_BF16 && !Dropped() ? (*implementations)[dtype]
                                                 : none;
}

std::string OneDnn3CompanionVersion() {
  const Loaded& loaded = Get();
  return loaded.companion != nullptr ? loaded.companion->version : "";
}

ProductOneDnnCounts ProductOneDnnCountsSoFar() {
  return {g_on_own.load(), g_on_companion.load(), g_shapes_timed.load()};
}

}  // namespace mixrt::cpu
