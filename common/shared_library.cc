#include "common/shared_library.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/elf_check.h"
#include "common/regular_file_read.h"
#include "common/trusted_path.h"
#include "mixrt/status_macros.h"

namespace mixrt::files {
namespace {

// Whether the object's run path (DT_RPATH or DT_RUNPATH) uses $ORIGIN,
// which resolves against the name it is opened under. The file passed
// CheckElfSharedObject (its program headers and segments lie inside it);
// a dynamic section that cannot be read answers true: the checked path.
bool RunPathUsesOrigin(const RegularFile& file) {
  Elf64_Ehdr eh;
  if (!file.ReadAt(0, &eh, sizeof(eh)).ok()) return true;
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!file.ReadAt(eh.e_phoff, ph.data(), ph.size() * sizeof(Elf64_Phdr))
           .ok()) {
    return true;
  }
  const auto dynamic = std::find_if(ph.begin(), ph.end(), [](const auto& p) {
    return p.p_type == PT_DYNAMIC;
  });
  if (dynamic == ph.end()) return false;  // Nothing to resolve.
  std::vector<Elf64_Dyn> entries(
      std::min<uint64_t>(dynamic->p_filesz / sizeof(Elf64_Dyn), 4096));
  if (!file.ReadAt(dynamic->p_offset, entries.data(),
                   entries.size() * sizeof(Elf64_Dyn))
           .ok()) {
    return true;
  }
  uint64_t strtab = 0;
  std::vector<uint64_t> paths;
  for (const Elf64_Dyn& d : entries) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_RPATH || d.d_tag == DT_RUNPATH) {
      paths.push_back(d.d_un.d_val);
    }
  }
  if (paths.empty()) return false;
  // The string table's address, as a file offset.
  std::optional<uint64_t> strtab_offset;
  for (const Elf64_Phdr& p : ph) {
    if (p.p_type == PT_LOAD && strtab >= p.p_vaddr &&
        strtab - p.p_vaddr < p.p_filesz) {
      strtab_offset = strtab - p.p_vaddr + p.p_offset;
    }
  }
  if (!strtab_offset.has_value()) return true;
  for (uint64_t at : paths) {
    char text[4096] = {};
    const uint64_t offset = *strtab_offset + at;
    if (offset >= file.size()) return true;
    const uint64_t bytes =
        std::min<uint64_t>(sizeof(text) - 1, file.size() - offset);
    if (!file.ReadAt(offset, text, bytes).ok()) return true;
    const absl::string_view path(text, strnlen(text, bytes));
    if (absl::StrContains(path, "$ORIGIN") ||
        absl::StrContains(path, "${ORIGIN}")) {
      return true;
    }
  }
  return false;
}

absl::Status Refuse(const SharedLibraryOptions& options,
                    const std::string& path, const std::string& why) {
  return absl::FailedPreconditionError(
      absl::StrCat(options.what, " ", path, " not loaded: ", why));
}

}  // namespace

absl::StatusOr<void*> LoadSharedLibrary(const std::string& path,
                                        const SharedLibraryOptions& options) {
  if (path.find('/') == std::string::npos) {
    return Refuse(options, path,
                  "a bare file name is searched for in LD_LIBRARY_PATH and "
                  "the system's directories, not where it would be checked; "
                  "give its path");
  }
  char resolved_chars[PATH_MAX];
  if (::realpath(path.c_str(), resolved_chars) == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat(
          options.what, " ", path, " not found: ", std::strerror(errno)));
    }
    return Refuse(options, path, std::strerror(errno));
  }
  const std::string resolved = resolved_chars;
  if (options.trusted_location) {
    if (const std::string why = UntrustedReason(path); !why.empty()) {
      return Refuse(options, path, why);
    }
  }
  // The resolved path, opened without following a link: one swapped in
  // since it was resolved is refused, not followed.
  absl::StatusOr<RegularFile> file = RegularFile::Open(resolved, false);
  if (!file.ok()) {
    return Refuse(options, path,
                  absl::StrCat(file.status().message(),
                               resolved == path
                                   ? ""
                                   : absl::StrCat(" (", path, " resolves to ",
                                                  resolved, ")")));
  }
  MIXRT_RETURN_IF_ERROR(CheckElfSharedObject(*file, options.what));
  // Held open for the process's life: the dynamic loader knows an object by
  // the name it was opened under, and a /proc/self/fd/N reused for another
  // library would be taken for this one.
  const int held = ::fcntl(file->fd(), F_DUPFD_CLOEXEC, 0);
  if (held < 0) return Refuse(options, path, std::strerror(errno));
  const bool by_path = RunPathUsesOrigin(*file);
  const std::string name =
      by_path ? resolved : absl::StrCat("/proc/self/fd/", held);
  dlerror();
  void* handle = dlopen(
      name.c_str(), options.flags != 0 ? options.flags : RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr || by_path) ::close(held);
  if (handle == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        options.what, " ", path, " could not be loaded as a shared object: ",
        why != nullptr ? why : "unknown dlopen error"));
  }
  return handle;
}

}  // namespace mixrt::files
