#include "tools/bench/bench_peers.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_write.h"
#include "common/regular_file_read.h"
#include "common/run_program.h"
#include "core/plugin/plugin_search_path.h"
#include "mixrt/status_macros.h"
#include "tools/bench/bench_stats.h"
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

// Runs `argv` under a time limit (common/run_program.h: no shell, killed
// with what it started); its output goes to ours unless `quiet`.
absl::Status RunProgram(const std::vector<std::string>& argv,
                        double timeout_seconds, bool quiet = false) {
  const files::ProgramResult r = files::RunProgram(
      argv, timeout_seconds, quiet ? files::kDiscardOutput : "");
  const std::string what =
      absl::StrCat(argv[0], " ", argv.size() > 1 ? argv[1] : "");
  if (r.timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(
        what, " did not finish within ", timeout_seconds, " s; killed"));
  }
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat(
        what, r.started ? absl::StrCat(" failed (status ", r.exit_code, ")")
                        : " did not start"));
  }
  return absl::OkStatus();
}

bool Imports(const std::string& python, const std::string& module) {
  return RunProgram({python, "-c", "import " + module}, 60, /*quiet=*/true)
      .ok();
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

// pytorch_peer.py's exit status after it cut a case off (CUT_OFF_EXIT).
constexpr int kPeerCutOffExit = 75;

int Threads() {
  if (const char* omp = std::getenv("OMP_NUM_THREADS")) {
    const int n = std::atoi(omp);
    if (n > 0) return n;
  }
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

void SetScriptLocator(const char* argv0) {
  g_argv0 = argv0 != nullptr ? argv0 : "";
}

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
                    {"min_sample_ms", options.timing.min_sample_ms},
                    {"min_comparable_samples", kMinComparableSamples}};
  const double case_limit = options.peer_case_limit_s > 0
                                ? options.peer_case_limit_s
                                : options.timing.timeout_s + 15;
  spec["case_limit_s"] = case_limit;
  spec["compile_limit_s"] = options.peer_compile_limit_s;
  const char* tmp = std::getenv("TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr && tmp[0] == '/' ? tmp : "/tmp",
                                 "/mixrt_bench_peer.XXXXXX");
  if (mkdtemp(dir.data()) == nullptr)
    return absl::InternalError("mkdtemp failed");
  const std::string in = dir + "/cases.json";
  const std::string out = dir + "/results.json";
  // Gone on every way out, a peer that failed or was killed included.
  struct RemoveOnExit {
    const std::string &dir, &in, &out;
    ~RemoveOnExit() {
      std::remove(in.c_str());
      std::remove(out.c_str());
      rmdir(dir.c_str());
    }
  } remove_on_exit{dir, in, out};
  // Each case, precision and mode may take its limit, and Python and torch
  // a minute to start: a peer that never returns is killed then.
  // MIXRT_BENCH_PEER_TIMEOUT_S sets each run's whole limit instead.
  const bool compiled =
      std::any_of(options.modes.begin(), options.modes.end(),
                  [](const std::string& m) { return m != "eager"; });
  const size_t jobs = cases.size() *
                      std::max<size_t>(1, options.precisions.size()) *
                      std::max<size_t>(1, options.modes.size());
  double limit =
      60 + (case_limit + (compiled ? options.peer_compile_limit_s : 0)) *
               static_cast<double>(jobs);
  if (const char* v = std::getenv("MIXRT_BENCH_PEER_TIMEOUT_S")) {
    double seconds = 0;
    if (absl::SimpleAtod(v, &seconds) && seconds > 0) limit = seconds;
  }
  // A run that cut a case off exits with kPeerCutOffExit after writing what
  // it finished; the next run skips those ("done").
  nlohmann::json all = nlohmann::json::array();
  spec["done"] = nlohmann::json::array();
  // Each run but the last finishes at least one more job: a peer that does
  // not is not run again.
  for (size_t run = 0; run <= jobs; ++run) {
    MIXRT_RETURN_IF_ERROR(files::WriteFileAtomically(in, spec.dump()));
    std::remove(out.c_str());
    const files::ProgramResult ran =
        files::RunProgram({python, script, in, out}, limit);
    absl::StatusOr<std::string> text = files::ReadRegularFile(out, 64 << 20);
    nlohmann::json j = text.ok()
                           ? nlohmann::json::parse(*text, nullptr,
                                                   /*allow_exceptions=*/false)
                           : nlohmann::json();
    size_t added = 0;
    const bool wrote = !j.is_discarded() && j.is_array();
    if (wrote) {
      for (const nlohmann::json& r : j) {
        // What the report reads as strings must be strings.
        auto is_string = [&r](const char* key) {
          return r.contains(key) && r[key].is_string();
        };
        if (!r.is_object() || !is_string("case") || !is_string("precision") ||
            !is_string("mode") || !is_string("status") ||
            !is_string("backend")) {
          continue;
        }
        spec["done"].push_back({r["case"], r["precision"], r["mode"]});
        all.push_back(r);
        ++added;
      }
    }
    if (ran.exit_code == 0 && !wrote && all.empty()) {
      return absl::InternalError("the PyTorch peer wrote no results");
    }
    if (ran.exit_code == 0) break;
    const std::string why =
        ran.timed_out
            ? absl::StrCat("did not finish within ", limit, " s; killed")
        : ran.started ? absl::StrCat("failed (status ", ran.exit_code, ")")
                      : "did not start";
    if (ran.exit_code == kPeerCutOffExit && added > 0 && run < jobs) continue;
    if (all.empty()) {
      return absl::InternalError(absl::StrCat("the PyTorch peer ", why));
    }
    std::fprintf(stderr, "mixrt bench: the PyTorch peer %s; %zu results kept\n",
                 why.c_str(), all.size());
    break;
  }
  return all;
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
  return RunProgram({python, script, results_json, dir}, 300);
}

}  // namespace mixrt::bench
