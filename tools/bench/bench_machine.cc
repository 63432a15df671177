#include "tools/bench/bench_machine.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/cpu_info_field.h"
#include "tools/bench/build_commit.h"
#include "tools/info/info_report.h"

extern char** environ;

namespace mixrt::bench {
namespace {

uint64_t MemTotalBytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (in >> key) {
    if (key == "MemTotal:") {
      in >> kib;
      return kib * 1024;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return 0;
}

}  // namespace

std::string GitCommit() {
  if (const char* env = std::getenv("MIXRT_GIT_COMMIT")) return env;
  return kBuildCommit;
}

nlohmann::json MachineRecord(const Registry& registry) {
  nlohmann::json m;
  m["cpu"] = CpuInfoField("model name");
  m["logical_cpus"] = std::thread::hardware_concurrency();
  // The threads the backends' kernels use: OMP_NUM_THREADS, else all.
  const char* omp = std::getenv("OMP_NUM_THREADS");
  m["threads"] = omp != nullptr && std::atoi(omp) > 0
                     ? std::atoi(omp)
                     : static_cast<int>(std::thread::hardware_concurrency());
  const std::set<std::string> flags = CpuFlags();
  nlohmann::json isa = nlohmann::json::object();
  for (const char* f : {"avx2", "fma", "f16c", "avx512f", "avx512_bf16",
                        "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"}) {
    isa[f] = flags.count(f) > 0;
  }
  m["isa"] = isa;
  m["memory_bytes"] = MemTotalBytes();
  struct utsname u;
  if (uname(&u) == 0) {
    m["os"] = absl::StrCat(u.sysname, " ", u.release, " ", u.machine);
  }
  m["hostname"] = u.nodename;
  m["compiler"] = __VERSION__;
#ifdef NDEBUG
  m["build"] = "opt";
#else
  m["build"] = "debug";
#endif
  m["mixrt_commit"] = GitCommit();
  nlohmann::json env = nlohmann::json::object();
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const std::string key = entry.substr(0, entry.find('='));
    for (const char* prefix :
         {"MIXRT_", "ONEDNN_", "DNNL_", "OMP_", "KMP_", "CUDA_", "HIP_"}) {
      if (absl::StartsWith(key, prefix)) {
        env[key] = entry.substr(key.size() + 1);
      }
    }
  }
  m["environment"] = env;
  // Plugins, devices and capability matrices, as `mixrt info --json`.
  m["plugins"] = tools::InfoJson(registry)["plugins"];
  return m;
}

}  // namespace mixrt::bench
