#include "common/elf_check.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/regular_file_read.h"
#include "mixrt/status_macros.h"

namespace mixrt::files {
namespace {

#if defined(__x86_64__)
constexpr uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kMachine = EM_AARCH64;
#else
#error "add this machine's ELF e_machine"
#endif

// A plugin has a handful of segments; more is not a shared object we load.
constexpr uint16_t kMaxProgramHeaders = 256;

}  // namespace

absl::Status CheckElfSharedObject(const RegularFile& file,
                                  const std::string& what) {
  const auto refuse = [&](absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", file.path(), " refused before loading: ", why));
  };
  const uint64_t size = file.size();
  Elf64_Ehdr eh;
  std::memset(&eh, 0, sizeof(eh));
  MIXRT_RETURN_IF_ERROR(
      file.ReadAt(0, &eh, std::min<uint64_t>(size, sizeof(eh))));
  if (size < SELFMAG || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return refuse("it is not an ELF file (bad magic)");
  }
  if (size < sizeof(eh)) {
    return refuse(absl::StrCat("it is truncated: ", size,
                               " bytes, too short for an ELF header"));
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_ident[EI_DATA] != ELFDATA2LSB) {
    return refuse("it is not a 64-bit little-endian ELF file");
  }
  if (eh.e_type != ET_DYN) {
    return refuse(absl::StrCat("its ELF type is ", eh.e_type,
                               ", not a shared object (ET_DYN)"));
  }
  if (eh.e_machine != kMachine) {
    return refuse(absl::StrCat("it is built for ELF machine ", eh.e_machine,
                               ", not this one (", kMachine, ")"));
  }
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
      eh.e_phnum > kMaxProgramHeaders) {
    return refuse("its program header table is malformed");
  }
  const uint64_t table_bytes = uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (eh.e_phoff > size || table_bytes > size - eh.e_phoff) {
    return refuse(absl::StrCat("it is truncated: ", size,
                               " bytes, but its program headers end at byte ",
                               eh.e_phoff + table_bytes));
  }
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  MIXRT_RETURN_IF_ERROR(file.ReadAt(eh.e_phoff, ph.data(), table_bytes));
  for (const Elf64_Phdr& p : ph) {
    if (p.p_offset > size || p.p_filesz > size - p.p_offset) {
      return refuse(absl::StrCat(
          "it is truncated: ", size, " bytes, but a segment (type ", p.p_type,
          ") spans bytes ", p.p_offset, " to ", p.p_offset + p.p_filesz));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckElfSharedObject(const std::string& path,
                                  const std::string& what) {
  absl::StatusOr<RegularFile> file = RegularFile::Open(path);
  if (!file.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, " ", path, " refused before loading: ", file.status().message()));
  }
  return CheckElfSharedObject(*file, what);
}

}  // namespace mixrt::files
