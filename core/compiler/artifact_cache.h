// The compiler's cache of what it learned, on disk so that a second
// process skips it: MIXRT_CACHE_DIR (else $XDG_CACHE_HOME/mixrt, else
// ~/.cache/mixrt), under compile/. An entry is keyed by everything its
// meaning depends on (the graph's structure, the masked input signature,
// the backend and its version and build, the CPU's ISA, the mode and this
// cache's format); the file name is a hash of that key, and the file holds
// the whole key, so a collision or a file from another build is told apart.
// Entries are written atomically (temporary, fsync, rename), so two
// processes writing one entry leave one of them whole; a corrupt, short or
// foreign entry is ignored (the caller learns it anew and writes it back).
// A directory that cannot be made or written degrades to memory only, with
// one warning. MIXRT_COMPILE_CACHE=0 keeps nothing on disk.
#ifndef MIXRT_CORE_COMPILER_ARTIFACT_CACHE_H_
#define MIXRT_CORE_COMPILER_ARTIFACT_CACHE_H_

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace mixrt::compiler {

// 64-bit FNV-1a: stable across processes and builds (absl::Hash is not).
uint64_t StableHash(absl::string_view bytes);

// What every key starts with: this cache's format, the CPU's ISA features.
std::string CacheKeyPrefix();

class ArtifactCache {
 public:
  // The process's cache, on the directory the environment names (read at
  // first use; ResetForTest reads it again).
  static ArtifactCache& Global();
  static void ResetForTest();
  // A cache on `base_dir`/compile ("": from the environment, as Global).
  explicit ArtifactCache(const std::string& base_dir = "");

  // The payload stored under `key`; nullopt when absent, or ignored with
  // the reason in *why (corrupt, foreign, unreadable).
  std::optional<std::string> Load(const std::string& key, std::string* why);
  // Stores it in memory and, when there is a usable directory, on disk.
  void Store(const std::string& key, const std::string& payload);

  // The directory entries go to; "" when memory only.
  std::string directory() const;
  // Why there is no directory ("" when there is one).
  std::string memory_only_reason() const;
  // The file an entry for `key` lives in ("" when memory only).
  std::string PathFor(const std::string& key) const;

 private:
  mutable std::mutex mutex_;
  std::string dir_;
  std::string memory_only_reason_;
  bool warned_ = false;
  absl::flat_hash_map<std::string, std::string> memory_;
};

}  // namespace mixrt::compiler

#endif  // MIXRT_CORE_COMPILER_ARTIFACT_CACHE_H_
