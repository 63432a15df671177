#include "core/compiler/artifact_cache.h"

#include <cpuid.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/atomic_write.h"
#include "common/cache_dir.h"
#include "common/on_off.h"
#include "common/regular_file_read.h"

namespace mixrt::compiler {
namespace {

// Bump when what an entry means changes (its payload's layout, or how a
// graph's structure is written into keys).
constexpr int kFormat = 2;  // 2: random nodes and their offsets.
constexpr char kMagic[] = "mixrt-compile-cache";
constexpr uint64_t kMaxEntryBytes = 64 << 20;

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(v));
  return buf;
}

// "<magic> <format>\n<key bytes> <payload bytes> <checksum>\n<key><payload>"
// with the checksum over key and payload.
std::string Encode(const std::string& key, const std::string& payload) {
  return absl::StrCat(kMagic, " ", kFormat, "\n", key.size(), " ",
                      payload.size(), " ", Hex(StableHash(key + payload)), "\n",
                      key, payload);
}

// The payload, or the reason the file is not an entry for `key`.
std::optional<std::string> Decode(const std::string& file,
                                  const std::string& key, std::string* why) {
  const size_t line1 = file.find('\n');
  const size_t line2 =
      line1 == std::string::npos ? line1 : file.find('\n', line1 + 1);
  if (line2 == std::string::npos ||
      file.substr(0, line1) != absl::StrCat(kMagic, " ", kFormat)) {
    *why = absl::StrCat("not a format ", kFormat, " entry");
    return std::nullopt;
  }
  const std::vector<std::string> sizes =
      absl::StrSplit(file.substr(line1 + 1, line2 - line1 - 1), ' ');
  uint64_t key_bytes = 0, payload_bytes = 0;
  if (sizes.size() != 3 || !absl::SimpleAtoi(sizes[0], &key_bytes) ||
      !absl::SimpleAtoi(sizes[1], &payload_bytes) ||
      file.size() - line2 - 1 != key_bytes + payload_bytes) {
    *why = "truncated or damaged (its sizes do not add up)";
    return std::nullopt;
  }
  const std::string body = file.substr(line2 + 1);
  if (Hex(StableHash(body)) != sizes[2]) {
    *why = "damaged (checksum mismatch)";
    return std::nullopt;
  }
  if (body.compare(0, key_bytes, key) != 0 || key_bytes != key.size()) {
    *why = "written for another key (another build, backend or CPU)";
    return std::nullopt;
  }
  return body.substr(key_bytes);
}

// Read from CPUID, not __builtin_cpu_supports: clang 14 knows no
// avx512fp16. Identity only (whether the OS enables a feature is the
// plugins' business; the backend's build string carries what they chose).
std::vector<std::pair<const char*, bool>> IsaFeatures() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    b7 = b;
    c7 = c;
    d7 = d;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) a71 = a;
  unsigned c1 = 0;
  if (__get_cpuid(1, &a, &b, &c, &d)) c1 = c;
  auto bit = [](unsigned v, int i) { return ((v >> i) & 1u) != 0; };
  return {{"fma", bit(c1, 12)},         {"avx2", bit(b7, 5)},
          {"avx512f", bit(b7, 16)},     {"avx512bw", bit(b7, 30)},
          {"avx512vl", bit(b7, 31)},    {"avx512_vnni", bit(c7, 11)},
          {"avx512_bf16", bit(a71, 5)}, {"avx512_fp16", bit(d7, 23)},
          {"amx_bf16", bit(d7, 22)},    {"amx_tile", bit(d7, 24)}};
}

ArtifactCache*& GlobalSlot() {
  static ArtifactCache* cache = nullptr;
  return cache;
}

std::mutex& GlobalMutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}

}  // namespace

uint64_t StableHash(absl::string_view bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string CacheKeyPrefix() {
  std::string key = absl::StrCat("mixrt compile cache ", kFormat, "; isa");
  for (const auto& [name, has] : IsaFeatures()) {
    if (has) absl::StrAppend(&key, " ", name);
  }
  return key + "\n";
}

ArtifactCache::ArtifactCache(const std::string& base_dir) {
  const char* env = std::getenv("MIXRT_COMPILE_CACHE");
  if (base_dir.empty() && env != nullptr && !ParseOnOff(env).value_or(true)) {
    memory_only_reason_ = "MIXRT_COMPILE_CACHE=0";
    warned_ = true;  // Asked for: nothing to warn about.
    return;
  }
  const std::string base = base_dir.empty() ? files::MixrtCacheDir() : base_dir;
  if (base.empty()) {
    memory_only_reason_ =
        "no cache directory (set MIXRT_CACHE_DIR, XDG_CACHE_HOME or HOME)";
    return;
  }
  const std::string dir = base + "/compile";
  if (!files::MakeCacheDirectories(dir)) {
    memory_only_reason_ = absl::StrCat("cannot create ", dir);
    return;
  }
  if (absl::Status can = files::CheckCanCreate(dir + "/probe"); !can.ok()) {
    memory_only_reason_ = std::string(can.message());
    return;
  }
  dir_ = dir;
}

ArtifactCache& ArtifactCache::Global() {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  ArtifactCache*& cache = GlobalSlot();
  if (cache == nullptr) cache = new ArtifactCache();
  return *cache;
}

void ArtifactCache::ResetForTest() {
  std::lock_guard<std::mutex> lock(GlobalMutex());
  // The old one stays alive: callers may still hold a reference to it.
  static auto* retired = new std::vector<std::unique_ptr<ArtifactCache>>();
  if (GlobalSlot() != nullptr) retired->emplace_back(GlobalSlot());
  GlobalSlot() = new ArtifactCache();
}

std::string ArtifactCache::directory() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dir_;
}

std::string ArtifactCache::memory_only_reason() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return memory_only_reason_;
}

std::string ArtifactCache::PathFor(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (dir_.empty()) return "";
  return absl::StrCat(dir_, "/", Hex(StableHash(key)), ".entry");
}

std::optional<std::string> ArtifactCache::Load(const std::string& key,
                                               std::string* why) {
  why->clear();
  const std::string path = PathFor(key);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = memory_.find(key); it != memory_.end()) return it->second;
  }
  if (path.empty()) return std::nullopt;
  absl::StatusOr<std::string> file =
      files::ReadRegularFile(path, kMaxEntryBytes);
  if (!file.ok()) {
    if (!absl::IsNotFound(file.status())) {
      *why = absl::StrCat(path, ": ", file.status().message());
    }
    return std::nullopt;
  }
  std::optional<std::string> payload = Decode(*file, key, why);
  if (!payload.has_value()) {
    *why = absl::StrCat(path, ": ", *why);
    return std::nullopt;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  memory_[key] = *payload;
  return payload;
}

void ArtifactCache::Store(const std::string& key, const std::string& payload) {
  const std::string path = PathFor(key);
  absl::Status written;
  if (!path.empty())
    written = files::WriteFileAtomically(path, Encode(key, payload));
  std::string warning;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    memory_[key] = payload;
    if (!written.ok()) {
      memory_only_reason_ =
          absl::StrCat("writing ", path, " failed: ", written.message());
      dir_.clear();
    }
    if (dir_.empty() && !warned_) {
      warned_ = true;
      warning = absl::StrCat("the compile cache keeps entries in memory only: ",
                             memory_only_reason_);
    }
  }
  if (!warning.empty()) {
    std::fprintf(stderr, "mixrt::compile: warning: %s\n", warning.c_str());
  }
}

}  // namespace mixrt::compiler
