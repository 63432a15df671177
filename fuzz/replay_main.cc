// Runs a fuzz target over files (its seed corpus and the crashes it once
// found) without libFuzzer, so every build, with any compiler, keeps them as
// regression tests. Arguments: files or directories; "--plugin=PATH" is
// passed to the target as MIXRT_FUZZ_PLUGIN, "--plugins=PATH:PATH..." as
// MIXRT_FUZZ_PLUGINS.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int RunOne(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()),
                         bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int ran = 0, errors = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--plugin=", 0) == 0) {
      setenv("MIXRT_FUZZ_PLUGIN", arg.c_str() + 9, 1);
      continue;
    }
    if (arg.rfind("--plugins=", 0) == 0) {
      setenv("MIXRT_FUZZ_PLUGINS", arg.c_str() + 10, 1);
      continue;
    }
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::directory_iterator(arg)) {
        errors += RunOne(e.path());
        ++ran;
      }
    } else {
      errors += RunOne(arg);
      ++ran;
    }
  }
  std::printf("replayed %d inputs, %d unreadable\n", ran, errors);
  // A corpus that is missing or empty is a broken test, not a pass.
  return ran == 0 || errors != 0 ? 1 : 0;
}
