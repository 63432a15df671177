// mixrt bench: one benchmark run over backends, precisions and modes, with
// the machine recorded, correctness checked before timing, peers in the same
// run, and results as JSON, Markdown, CSV and plots.
//
//   mixrt bench [--suite=FILE ...] [--quick] [--backend=a,b] [--plugin=PATH]
//               [--dtype=f32,bf16,f16,auto] [--mode=eager,default,...]
//               [--cases=name,...] [--json=out.json] [--md] [--csv=out.csv]
//               [--plot=DIR] [--peers=pytorch] [--rounds=N] [--isolate]
//   mixrt bench compare A.json B.json [...] [--fail_above=0.05]
//               [--any_backend]
//
// Every usable backend runs except the reference plugin (the oracle the
// checks compare against; name it with --backend to time it too).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/atomic_write.h"
#include "common/out_of_memory.h"
#include "common/regular_file_read.h"
#include "core/bundled/bundled_plugins.h"
#include "core/plugin/isolated_plugin.h"
#include "core/plugin/registry.h"
#include "mixrt/status_macros.h"
#include "tools/bench/bench_compare.h"
#include "tools/bench/bench_machine.h"
#include "tools/bench/bench_peers.h"
#include "tools/bench/bench_report.h"
#include "tools/bench/bench_run.h"
#include "tools/bench/embedded_suites.h"
#include "tools/bench/peer_ratios.h"

ABSL_FLAG(std::vector<std::string>, suite, {},
          "Suite files (default: the built-in default suite).");
ABSL_FLAG(bool, quick, false, "Run the built-in quick suite (seconds).");
ABSL_FLAG(std::vector<std::string>, cases, {},
          "Only these case names (default: all in the suites).");
ABSL_FLAG(std::vector<std::string>, backend, {},
          "Backends to run (default: every usable one but the reference).");
ABSL_FLAG(std::vector<std::string>, plugin, {},
          "Plugin files or directories to load first.");
ABSL_FLAG(std::vector<std::string>, dtype,
          std::vector<std::string>({"f32", "bf16", "f16"}),
          "Precisions: f32, bf16, f16, auto (autocast's choice; models).");
ABSL_FLAG(std::vector<std::string>, mode, std::vector<std::string>({"eager"}),
          "Modes: eager and, for model cases, mixrt::compile's modes "
          "(default, reduce-overhead, max-autotune).");
ABSL_FLAG(std::string, json, "", "Write the results as JSON to this file.");
ABSL_FLAG(bool, md, false, "Print a Markdown table.");
ABSL_FLAG(std::string, csv, "", "Write the results as CSV to this file.");
ABSL_FLAG(std::string, plot, "",
          "Write PNG plots (matplotlib) into this directory.");
ABSL_FLAG(std::vector<std::string>, peers, {},
          "Peers to run the same cases in: pytorch.");
ABSL_FLAG(bool, interleave_peers, true,
          "With --peers: run each case in the peers right after mixrt (each "
          "ratio's two sides minutes apart at most, on a machine whose speed "
          "drifts); false: every mixrt case first, then each peer once.");
ABSL_FLAG(int, rounds, 1,
          "Run the cases (and their peers) this many times, each round "
          "after the last: with --peers, each row's ratio is the median of "
          "its rounds', with their range (on a machine whose speed drifts, "
          "one round cannot tell a tie from a win).");
ABSL_FLAG(double, min_time, 0.5, "Seconds of samples at least, per case.");
ABSL_FLAG(int, min_samples, 10, "Samples at least, per case.");
ABSL_FLAG(double, max_noise, 0.02,
          "Stop sampling once the median's 95% confidence interval is "
          "within +-this fraction of it.");
ABSL_FLAG(double, timeout, 5, "Seconds at most per case (noisy or not).");
ABSL_FLAG(double, peer_case_limit, 0,
          "Seconds a peer may spend on one case (one precision and mode; "
          "torch.compile gets 120 more) before it is cut off and reported "
          "'peer slower than N s'; 0: --timeout plus 15.");
ABSL_FLAG(double, fail_above, -1,
          "compare: exit 3 when a run is significantly slower than the "
          "baseline by more than this fraction (0.05 = 5%).");
ABSL_FLAG(bool, isolate, false,
          "Also run each backend's plugin out of process (mixrt-plugin-host), "
          "as '<name>_isolated', to compare: what isolation costs per case.");
ABSL_FLAG(bool, any_backend, false,
          "compare: match cases across backends (the fastest per case), for "
          "machines with different backends.");

namespace mixrt::bench {
namespace {

constexpr char kUsage[] =
    "mixrt bench [--suite=FILE] [--quick] [--backend=a,b] [--dtype=...] "
    "[--mode=...] [--json=F] [--md] [--csv=F] [--plot=DIR] "
    "[--peers=pytorch] [--rounds=N]\n"
    "mixrt bench compare BASELINE.json OTHER.json [...] [--fail_above=0.05]";

absl::StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  // A regular file only (a FIFO is refused, not waited on), of bounded size.
  absl::StatusOr<std::string> text = files::ReadRegularFile(path, 256 << 20);
  if (!text.ok()) return text.status();
  nlohmann::json j =
      nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  }
  return j;
}

int RunCompare(const std::vector<std::string>& files) {
  std::vector<nlohmann::json> runs;
  for (const std::string& f : files) {
    absl::StatusOr<nlohmann::json> j = ReadJson(f);
    if (!j.ok()) {
      std::fprintf(stderr, "mixrt bench compare: %s\n",
                   std::string(j.status().message()).c_str());
      return 2;
    }
    runs.push_back(*std::move(j));
  }
  CompareOptions options;
  options.any_backend = absl::GetFlag(FLAGS_any_backend);
  absl::StatusOr<Comparison> c = Compare(runs, files, options);
  if (!c.ok()) {
    std::fprintf(stderr, "mixrt bench compare: %s\n",
                 std::string(c.status().message()).c_str());
    return 2;
  }
  std::printf("%s", ComparisonMarkdown(*c).c_str());
  const double threshold = absl::GetFlag(FLAGS_fail_above);
  if (threshold >= 0) {
    const std::vector<std::string> slower = Regressions(*c, threshold);
    for (const std::string& s : slower) {
      std::printf("regression: %s\n", s.c_str());
    }
    if (!slower.empty()) return 3;
  }
  return 0;
}

absl::StatusOr<std::vector<SuiteCase>> Cases() {
  std::vector<SuiteCase> cases;
  const std::vector<std::string> paths = absl::GetFlag(FLAGS_suite);
  if (paths.empty()) {
    const bool quick = absl::GetFlag(FLAGS_quick);
    MIXRT_ASSIGN_OR_RETURN(cases,
                           ParseSuite(quick ? kQuickSuite : kDefaultSuite,
                                      quick ? "quick.suite (built in)"
                                            : "default.suite (built in)",
                                      "."));
  }
  for (const std::string& path : paths) {
    MIXRT_ASSIGN_OR_RETURN(std::vector<SuiteCase> more, LoadSuite(path));
    cases.insert(cases.end(), more.begin(), more.end());
  }
  const std::vector<std::string> only = absl::GetFlag(FLAGS_cases);
  if (!only.empty()) {
    std::vector<SuiteCase> kept;
    for (const SuiteCase& c : cases) {
      if (std::find(only.begin(), only.end(), c.name) != only.end()) {
        kept.push_back(c);
      }
    }
    if (kept.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "no case named ", absl::StrJoin(only, " or "), " in the suite"));
    }
    cases = kept;
  }
  return cases;
}

absl::StatusOr<std::vector<Device>> Devices(const Registry& registry) {
  std::vector<Device> devices;
  const std::vector<std::string> names = absl::GetFlag(FLAGS_backend);
  if (names.empty()) {
    for (const Backend* b : registry.UsableBackends()) {
      if (b->name() != "reference") devices.emplace_back(b, 0);
    }
  }
  for (const std::string& name : names) {
    MIXRT_ASSIGN_OR_RETURN(const Backend* b, registry.FindBackend(name));
    devices.emplace_back(b, 0);
  }
  if (devices.empty()) {
    return absl::NotFoundError("no usable backend to benchmark");
  }
  return devices;
}

// Each device's plugin again, out of process, named "<name>_isolated": the
// cost of isolation, measured beside the same plugin in process.
absl::StatusOr<std::vector<Device>> WithIsolatedCopies(
    const std::vector<Device>& devices) {
  static auto* kept = new std::vector<std::unique_ptr<Backend>>();
  std::vector<Device> out = devices;
  for (const Device& d : devices) {
    if (d.backend()->process() != nullptr) continue;  // Already isolated.
    MIXRT_ASSIGN_OR_RETURN(IsolationOptions options,
                           IsolationOptionsFromEnvironment());
    options.name_suffix = "_isolated";
    MIXRT_ASSIGN_OR_RETURN(
        std::unique_ptr<Backend> copy,
        LoadPluginOutOfProcess(d.backend()->identity().path, options));
    kept->push_back(std::move(copy));
    out.emplace_back(kept->back().get(), 0);
  }
  return out;
}

void Progress(int done, int total, const CaseResult& r) {
  const bool tty = isatty(fileno(stderr));
  std::string what =
      r.status == "ok"
          ? absl::StrFormat(
                "%.3f ms (cv %.1f%%)%s%s", r.stats.median, 100 * r.stats.cv,
                r.timing.noise_met ? "" : ", noisy",
                r.fallback_launches_per_step == 0
                    ? ""
                    : absl::StrFormat(", fallback: %d launches and %.2f "
                                      "MiB copied per step",
                                      r.fallback_launches_per_step,
                                      r.fallback_bytes_per_step / 1048576.0))
          : absl::StrCat(r.status, ": ", r.reason);
  std::fprintf(stderr, "%s[%d/%d] %s %s %s %s: %s%s", tty ? "\r\033[K" : "",
               done, total, r.case_name.c_str(), r.backend.c_str(),
               r.precision.c_str(), r.mode.c_str(), what.c_str(),
               tty && done < total ? "" : "\n");
  if (!tty || done == total) {
    std::fprintf(stderr, "    rerun: %s\n", r.reproduce.c_str());
  }
  std::fflush(stderr);
}

absl::Status Write(const std::string& path, const std::string& text) {
  return files::WriteFileAtomically(path, text);
}

int RunBench(const char* argv0) {
  absl::StatusOr<std::vector<SuiteCase>> cases = Cases();
  if (!cases.ok()) {
    std::fprintf(stderr, "mixrt bench: %s\n",
                 std::string(cases.status().message()).c_str());
    return 2;
  }
  Registry& registry = Registry::Global();
  std::vector<std::string> paths = absl::GetFlag(FLAGS_plugin);
  for (const std::string& p : BundledPluginPaths(argv0)) paths.push_back(p);
  registry.LoadAll(paths);
  absl::StatusOr<const Backend*> reference = registry.FindBackend("reference");
  if (!reference.ok()) {
    std::fprintf(stderr,
                 "mixrt bench: the reference plugin, which every case is "
                 "checked against, is not loaded: %s (name it with "
                 "--plugin=PATH/libmixrt_reference.so)\n",
                 std::string(reference.status().message()).c_str());
    return 2;
  }
  absl::StatusOr<std::vector<Device>> devices = Devices(registry);
  if (devices.ok() && absl::GetFlag(FLAGS_isolate)) {
    devices = WithIsolatedCopies(*devices);
  }
  if (!devices.ok()) {
    std::fprintf(stderr, "mixrt bench: %s\n",
                 std::string(devices.status().message()).c_str());
    return 2;
  }
  RunOptions options;
  options.precisions = absl::GetFlag(FLAGS_dtype);
  options.modes = absl::GetFlag(FLAGS_mode);
  options.timing.min_time_s = absl::GetFlag(FLAGS_min_time);
  options.timing.min_samples = absl::GetFlag(FLAGS_min_samples);
  options.timing.max_noise = absl::GetFlag(FLAGS_max_noise);
  options.timing.timeout_s = absl::GetFlag(FLAGS_timeout);
  options.peer_case_limit_s = absl::GetFlag(FLAGS_peer_case_limit);
  if (absl::GetFlag(FLAGS_quick)) {
    // Seconds in all: a few samples each, whatever their noise.
    options.timing.warmup_s = 0.01;
    options.timing.min_time_s = std::min(options.timing.min_time_s, 0.05);
    options.timing.min_samples = std::min(options.timing.min_samples, 3);
    options.timing.timeout_s = std::min(options.timing.timeout_s, 0.5);
  }
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (rounds < 1 || rounds > 100) {
    std::fprintf(stderr, "mixrt bench: --rounds=%d; expected 1 to 100\n",
                 rounds);
    return 2;
  }
  options.suite_paths = absl::GetFlag(FLAGS_suite);
  if (absl::GetFlag(FLAGS_quick) && options.suite_paths.empty()) {
    options.command = "mixrt bench --quick";
  }
  for (const std::string& p : options.precisions) {
    if (p != "f32" && p != "bf16" && p != "f16" && p != "auto") {
      std::fprintf(stderr,
                   "mixrt bench: --dtype=%s; expected f32, bf16, f16 or auto\n",
                   p.c_str());
      return 2;
    }
  }
  nlohmann::json peers = nlohmann::json::array();
  std::vector<std::string> live_peers = absl::GetFlag(FLAGS_peers);
  // Runs the live peers on `some` cases; a peer that fails says why once
  // and is dropped (not installed: every later case would fail alike).
  auto run_peers = [&](const std::vector<SuiteCase>& some) {
    for (auto it = live_peers.begin(); it != live_peers.end();) {
      absl::StatusOr<nlohmann::json> ran = RunPeer(*it, some, options);
      if (!ran.ok()) {
        std::fprintf(stderr, "mixrt bench: peer %s: %s\n", it->c_str(),
                     std::string(ran.status().message()).c_str());
        it = live_peers.erase(it);
        continue;
      }
      for (const nlohmann::json& r : *ran) peers.push_back(r);
      ++it;
    }
  };
  const bool interleave =
      absl::GetFlag(FLAGS_interleave_peers) && !live_peers.empty();
  std::vector<CaseResult> results;
  for (int round = 1; round <= rounds; ++round) {
    if (rounds > 1) std::fprintf(stderr, "round %d of %d\n", round, rounds);
    const size_t peers_before = peers.size();
    std::vector<CaseResult> ran =
        RunSuite(*cases, *devices, Device(*reference, 0), options, Progress,
                 interleave ? std::function<void(const SuiteCase&)>(
                                  [&](const SuiteCase& c) { run_peers({c}); })
                            : nullptr);
    if (!interleave) run_peers(*cases);
    if (rounds > 1) {
      for (CaseResult& r : ran) r.round = round;
      for (size_t i = peers_before; i < peers.size(); ++i) {
        peers[i]["round"] = round;
      }
    }
    for (CaseResult& r : ran) results.push_back(std::move(r));
  }
  std::string command = "mixrt bench";
  const nlohmann::json run =
      RunJson(results, MachineRecord(registry), command, peers);
  std::string json_path = absl::GetFlag(FLAGS_json);
  const std::string plot_dir = absl::GetFlag(FLAGS_plot);
  if (json_path.empty() && !plot_dir.empty()) {
    json_path = plot_dir + "/results.json";
  }
  if (!json_path.empty()) {
    absl::Status s = Write(
        json_path,
        run.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (!s.ok()) {
      std::fprintf(stderr, "mixrt bench: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
    std::fprintf(stderr, "mixrt bench: results in %s\n", json_path.c_str());
  }
  if (!absl::GetFlag(FLAGS_csv).empty()) {
    absl::Status s = Write(absl::GetFlag(FLAGS_csv), CsvTable(run));
    if (!s.ok()) {
      std::fprintf(stderr, "mixrt bench: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
  }
  if (absl::GetFlag(FLAGS_md) || json_path.empty()) {
    std::printf("%s", MarkdownTable(run).c_str());
  }
  if (const std::string ratios = PeerRatioMarkdown(PeerRatios(run));
      !ratios.empty()) {
    // To stdout beside the table, else to stderr: the ratios are the
    // answer a run with peers is for.
    std::fprintf(absl::GetFlag(FLAGS_md) || json_path.empty() ? stdout : stderr,
                 "\n%s", ratios.c_str());
  }
  if (!plot_dir.empty()) {
    std::fflush(stdout);  // The table before the plot script's own lines.
    absl::Status s = Plot(json_path, plot_dir);
    if (!s.ok()) {
      std::fprintf(stderr, "mixrt bench: plots: %s\n",
                   std::string(s.message()).c_str());
      return 1;
    }
  }
  int wrong = 0;
  for (const CaseResult& r : results) wrong += r.status == "wrong";
  return wrong > 0 ? 4 : 0;
}

}  // namespace
}  // namespace mixrt::bench

int main(int argc, char** argv) {
  mixrt::ReportOutOfMemoryAtExit("mixrt bench");
  absl::SetProgramUsageMessage(mixrt::bench::kUsage);
  // --help lists the flags of files named like the program (mixrt_bench.cc)
  // by default: "No flags matched" for this one's.
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "tools/bench/");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  mixrt::bench::SetScriptLocator(argv[0]);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  // Called as `mixrt bench ...` (argv[1] == "bench") or directly.
  size_t first = 1;
  if (args.size() > first && std::string(args[first]) == "bench") ++first;
  if (args.size() > first && std::string(args[first]) == "compare") {
    std::vector<std::string> files(args.begin() + first + 1, args.end());
    return mixrt::bench::RunCompare(files);
  }
  if (args.size() > first) {
    std::fprintf(stderr, "mixrt bench: unexpected argument '%s'\n%s\n",
                 args[first], mixrt::bench::kUsage);
    return 2;
  }
  return mixrt::bench::RunBench(argv[0]);
}
