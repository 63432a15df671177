#include "tools/bench/bench_peers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/atomic_write.h"
#include "core/plugin/plugin_search_path.h"
#include "mixrt/status_macros.h"
#include "tools/cpp/runfiles/runfiles.h"

namespace mixrt::bench {
namespace {

std::string g_argv0;

bool IsFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Script(const std::string& name) {
  using bazel::tools::cpp::runfiles::Runfiles;
  std::string error;
  std::unique_ptr<Runfiles> runfiles(Runfiles::Create(g_argv0, &error));
  if (runfiles != nullptr) {
    const std::string path = runfiles->Rlocation("mixrt/tools/bench/" + name);
    if (IsFile(path)) return path;
  }
  const std::string beside = CoreObjectDirectory() + "/" + name;
  return IsFile(beside) ? beside : "";
}

// Runs `argv`; its stderr goes to ours unless `quiet`.
absl::Status RunProgram(const std::vector<std::string>& argv,
                        bool quiet = false) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    if (quiet) {
      const int null = open("/dev/null", O_WRONLY);
      if (null >= 0) dup2(null, STDERR_FILENO);
    }
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(absl::StrCat(
        argv[0], " ", argv.size() > 1 ? argv[1] : "", " failed (status ",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1, ")"));
  }
  return absl::OkStatus();
}

bool Imports(const std::string& python, const std::string& module) {
  return RunProgram({python, "-c", "import " + module}, /*quiet=*/true).ok();
}

std::string PythonWith(const std::string& module) {
  std::vector<std::string> candidates;
  if (const char* p = std::getenv("PYTHON")) candidates.push_back(p);
  if (const char* home = std::getenv("HOME")) {
    candidates.push_back(std::string(home) + "/torchvenv/bin/python");
  }
  candidates.push_back("/usr/bin/python3");
  candidates.push_back("python3");
  for (const std::string& c : candidates) {
    if ((c.find('/') == std::string::npos || IsFile(c)) && Imports(c, module)) {
      return c;
    }
  }
  return "";
}

int Threads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(omp);
    if (n > 0) return n;
  }
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

void SetScriptLocator(const char* argv0) { g_argv0 = argv0 != nullptr ? argv0 : ""; }

absl::StatusOr<nlohmann::json> RunPeer(const std::string& peer,
                                       const std::vector<SuiteCase>& cases,
                                       const RunOptions& options) {
  if (peer != "pytorch") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown peer '", peer, "' (known: pytorch)"));
  }
  const std::string script = Script("pytorch_peer.py");
  if (script.empty()) {
    return absl::NotFoundError("pytorch_peer.py is not beside mixrt bench");
  }
  const std::string python = PythonWith("torch");
  if (python.empty()) {
    return absl::NotFoundError(
        "PyTorch is not installed for any Python tried ($PYTHON, "
        "~/torchvenv/bin/python, python3): python3 -m venv ~/torchvenv && "
        "~/torchvenv/bin/pip install torch; no peer results");
  }
  nlohmann::json spec;
  for (const SuiteCase& c : cases) {
    spec["cases"].push_back(
        {{"case", c.name}, {"kind", c.kind}, {"params", c.params}});
  }
  spec["precisions"] = options.precisions;
  spec["modes"] = options.modes;
  spec["threads"] = Threads();
  spec["timing"] = {{"warmup_s", options.timing.warmup_s},
                    {"min_samples", options.timing.min_samples},
                    {"min_time_s", options.timing.min_time_s},
                    {"max_noise", options.timing.max_noise},
                    {"timeout_s", options.timing.timeout_s},
                    {"min_sample_ms", options.timing.min_sample_ms}};
  char dir_template[] = "/tmp/mixrt_bench_peer.XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return absl::InternalError("mkdtemp failed");
  const std::string in = std::string(dir) + "/cases.json";
  const std::string out = std::string(dir) + "/results.json";
  MIXRT_RETURN_IF_ERROR(files::WriteFileAtomically(in, spec.dump()));
  MIXRT_RETURN_IF_ERROR(RunProgram({python, script, in, out}));
  std::ifstream results(out);
  nlohmann::json j =
      nlohmann::json::parse(results, nullptr, /*allow_exceptions=*/false);
  std::remove(in.c_str());
  std::remove(out.c_str());
  rmdir(dir);
  if (j.is_discarded() || !j.is_array()) {
    return absl::InternalError("the PyTorch peer wrote no results");
  }
  return j;
}

absl::Status Plot(const std::string& results_json, const std::string& dir) {
  const std::string script = Script("plot_bench.py");
  if (script.empty()) {
    return absl::NotFoundError("plot_bench.py is not beside mixrt bench");
  }
  const std::string python = PythonWith("matplotlib");
  if (python.empty()) {
    return absl::NotFoundError(
        "no Python with matplotlib (Debian: python3-matplotlib)");
  }
  return RunProgram({python, script, results_json, dir});
}

}  // namespace mixrt::bench
