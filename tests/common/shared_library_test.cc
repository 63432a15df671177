// The one loader of shared libraries (common/shared_library.h): a bare
// name is never searched for, the file checked is the file mapped (through
// its descriptor), links and FIFOs planted at the path are not followed or
// waited on, and a library where others can write is refused with where.
#include "common/shared_library.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_plugins.h"

namespace mixrt::files {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Dir(const std::string& name, mode_t mode) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  ::mkdir(path.c_str(), 0700);
  ::chmod(path.c_str(), mode);
  return path;
}

// The reference plugin (no $ORIGIN in its run path), copied into `dir`.
std::string CopyReference(const std::string& dir, const std::string& name) {
  std::ifstream in(
      testing::RunfilePath("plugins/reference/libmixrt_reference.so"),
      std::ios::binary);
  const std::string to = dir + "/" + name;
  std::ofstream(to, std::ios::binary) << in.rdbuf();
  ::chmod(to.c_str(), 0755);
  return to;
}

// Where the dynamic loader says the object that defines `symbol` came from.
std::string LoadedFrom(void* handle, const char* symbol) {
  Dl_info info{};
  void* address = dlsym(handle, symbol);
  if (address == nullptr || dladdr(address, &info) == 0) return "";
  return info.dli_fname != nullptr ? info.dli_fname : "";
}

TEST(SharedLibrary, ABareNameIsNeverSearchedFor) {
  const absl::StatusOr<void*> loaded =
      LoadSharedLibrary("libmixrt_reference.so", SharedLibraryOptions{});
  EXPECT_TRUE(absl::IsFailedPrecondition(loaded.status()));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("a bare file name is searched for in LD_LIBRARY_PATH"));
}

TEST(SharedLibrary, TheFileCheckedIsTheFileMapped) {
  const std::string dir = Dir("safe", 0755);
  const std::string plugin = CopyReference(dir, "libmixrt_one.so");
  const absl::StatusOr<void*> loaded =
      LoadSharedLibrary(plugin, SharedLibraryOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // Mapped through the descriptor that was checked, never by the name.
  const std::string from = LoadedFrom(*loaded, "mixrt_plugin_entry");
  EXPECT_THAT(from, StartsWith("/proc/self/fd/"));
  char target[4096] = {};
  ASSERT_GT(::readlink(from.c_str(), target, sizeof(target) - 1), 0);
  EXPECT_EQ(std::string(target), plugin);
}

TEST(SharedLibrary, ALinkIsResolvedAndItsTargetChecked) {
  const std::string open = Dir("open", 0777);
  const std::string plugin = CopyReference(open, "libmixrt_two.so");
  const std::string safe = Dir("safe_link", 0755);
  const std::string link = safe + "/libmixrt_two.so";
  ASSERT_EQ(::symlink(plugin.c_str(), link.c_str()), 0);
  const absl::StatusOr<void*> loaded =
      LoadSharedLibrary(link, SharedLibraryOptions{});
  EXPECT_TRUE(absl::IsFailedPrecondition(loaded.status()));
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("directory " + open + " is writable"));
  // Named by the user (not searched for): loaded from where it resolves.
  SharedLibraryOptions named;
  named.trusted_location = false;
  EXPECT_TRUE(LoadSharedLibrary(link, named).ok());
}

TEST(SharedLibrary, AFifoOrAMissingFileIsRefusedAtOnce) {
  const std::string dir = Dir("fifo", 0755);
  const std::string fifo = dir + "/libmixrt_fifo.so";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const absl::StatusOr<void*> loaded =
      LoadSharedLibrary(fifo, SharedLibraryOptions{});
  EXPECT_TRUE(absl::IsFailedPrecondition(loaded.status()));
  EXPECT_THAT(loaded.status().message(), HasSubstr("not a regular file"));
  const absl::StatusOr<void*> missing =
      LoadSharedLibrary(dir + "/libmixrt_none.so", SharedLibraryOptions{});
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
}

TEST(SharedLibrary, AFileThatIsNoSharedObjectIsRefusedBeforeDlopen) {
  const std::string dir = Dir("text", 0755);
  const std::string text = dir + "/libmixrt_text.so";
  std::ofstream(text) << "not an ELF file\n";
  SharedLibraryOptions options;
  options.what = "oneDNN 3.x companion";
  const absl::StatusOr<void*> loaded = LoadSharedLibrary(text, options);
  EXPECT_THAT(loaded.status().message(),
              HasSubstr("oneDNN 3.x companion " + text +
                        " refused before loading: it is not an ELF file"));
}

}  // namespace
}  // namespace mixrt::files
