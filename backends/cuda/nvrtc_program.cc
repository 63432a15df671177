#include "backends/cuda/nvrtc_program.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace mixrt::cuda {
namespace {

struct Nvrtc {
  decltype(&nvrtcCreateProgram) create = nullptr;
  decltype(&nvrtcCompileProgram) compile = nullptr;
  decltype(&nvrtcGetPTXSize) ptx_size = nullptr;
  decltype(&nvrtcGetPTX) ptx = nullptr;
  decltype(&nvrtcGetProgramLogSize) log_size = nullptr;
  decltype(&nvrtcGetProgramLog) log = nullptr;
  decltype(&nvrtcDestroyProgram) destroy = nullptr;
  decltype(&nvrtcGetErrorString) error = nullptr;
  std::string missing;  // Why it is unusable, or "".
};

const Nvrtc& Library() {
  static const Nvrtc* lib = [] {
    auto* n = new Nvrtc();
    void* h = nullptr;
    for (const char* name :
         {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}) {
      h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h != nullptr) break;
    }
    if (h == nullptr) {
      n->missing = absl::StrCat("NVRTC not found (", dlerror(), ")");
      return n;
    }
    auto load = [&](auto* fn, const char* symbol) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(
          dlsym(h, symbol));
      if (*fn == nullptr && n->missing.empty()) {
        n->missing = absl::StrCat("NVRTC lacks ", symbol);
      }
    };
    load(&n->create, "nvrtcCreateProgram");
    load(&n->compile, "nvrtcCompileProgram");
    load(&n->ptx_size, "nvrtcGetPTXSize");
    load(&n->ptx, "nvrtcGetPTX");
    load(&n->log_size, "nvrtcGetProgramLogSize");
    load(&n->log, "nvrtcGetProgramLog");
    load(&n->destroy, "nvrtcDestroyProgram");
    load(&n->error, "nvrtcGetErrorString");
    return n;
  }();
  return *lib;
}

}  // namespace

absl::StatusOr<std::string> CompileToPtx(const std::string& source,
                                         const std::string& name,
                                         const std::string& arch) {
  const Nvrtc& n = Library();
  if (!n.missing.empty()) return absl::UnavailableError(n.missing);
  nvrtcProgram program = nullptr;
  nvrtcResult r =
      n.create(&program, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) {
    return absl::InternalError(
        absl::StrCat("nvrtcCreateProgram: ", n.error(r)));
  }
  const std::string arch_flag = absl::StrCat("--gpu-architecture=", arch);
  const char* options[] = {arch_flag.c_str(), "--std=c++17", "-default-device"};
  r = n.compile(program, 3, options);
  std::string log;
  size_t log_bytes = 0;
  if (n.log_size(program, &log_bytes) == NVRTC_SUCCESS && log_bytes > 1) {
    log.resize(log_bytes);
    n.log(program, log.data());
    log.resize(log_bytes - 1);
  }
  std::string ptx;
  if (r == NVRTC_SUCCESS) {
    size_t bytes = 0;
    n.ptx_size(program, &bytes);
    ptx.resize(bytes);
    n.ptx(program, ptx.data());
    if (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
  }
  n.destroy(&program);
  if (r != NVRTC_SUCCESS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NVRTC could not compile ", name, " (", n.error(r), "): ", log));
  }
  return ptx;
}

}  // namespace mixrt::cuda
