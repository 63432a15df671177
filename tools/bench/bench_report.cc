#include "tools/bench/bench_report.h"

#include <ctime>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "tools/bench/peer_ratios.h"

namespace mixrt::bench {
namespace {

std::string Now() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Rows pair within a round (--rounds): each round's "vs f32" and "vs peer"
// are of that round's medians.
std::string Key(const nlohmann::json& r, const std::string& precision) {
  return absl::StrCat(r["case"].get<std::string>(), "|",
                      r["backend"].get<std::string>(), "|", precision, "|",
                      r["mode"].get<std::string>(), "|", ResultRound(r));
}

double Median(const nlohmann::json& r) {
  return r.contains("timing") ? r["timing"]["median_ms"].get<double>() : 0;
}

}  // namespace

nlohmann::json ResultJson(const CaseResult& r) {
  nlohmann::json j = {{"case", r.case_name},      {"kind", r.kind},
                      {"defined_at", r.where},    {"params", r.params},
                      {"backend", r.backend},     {"device", r.device},
                      {"precision", r.precision}, {"mode", r.mode},
                      {"status", r.status},       {"support", r.support},
                      {"reason", r.reason},       {"reproduce", r.reproduce}};
  if (r.round > 0) j["round"] = r.round;
  if (r.check_tolerance > 0) {
    j["check"] = {{"error", r.check_error}, {"tolerance", r.check_tolerance}};
  }
  if (r.status == "ok") {
    const SampleStats& s = r.stats;
    j["timing"] = {{"unit", "ms"},
                   {"samples", r.timing.samples_ms},
                   {"steps_per_sample", r.timing.steps_per_sample},
                   {"count", s.count},
                   {"median_ms", s.median},
                   {"min_ms", s.min},
                   {"max_ms", s.max},
                   {"mean_ms", s.mean},
                   {"stddev_ms", s.stddev},
                   {"cv", s.cv},
                   {"p90_ms", s.p90},
                   {"median_ci95_ms", {s.median_ci_low, s.median_ci_high}},
                   {"noise_met", r.timing.noise_met},
                   {"seconds", r.timing.seconds}};
    j["flops_per_step"] = r.flops;
    j["gflops"] = r.gflops;
    j["peak_mib"] = r.peak_mib;
    j["fallback_launches"] = r.fallback_launches;
    j["fallback_launches_per_step"] = r.fallback_launches_per_step;
    j["fallback_bytes_per_step"] = r.fallback_bytes_per_step;
  }
  return j;
}

nlohmann::json RunJson(const std::vector<CaseResult>& results,
                       const nlohmann::json& machine,
                       const std::string& command,
                       const nlohmann::json& peers) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CaseResult& r : results) rows.push_back(ResultJson(r));
  return {{"format", kResultFormatName},
          {"version", kResultFormatVersion},
          {"created", Now()},
          {"command", command},
          {"machine", machine},
          {"results", rows},
          {"peers", peers}};
}

std::string MarkdownTable(const nlohmann::json& run) {
  std::map<std::string, double> medians;  // Key(result) -> median.
  for (const nlohmann::json& r : run["results"]) {
    if (r["status"] == "ok") medians[Key(r, r["precision"])] = Median(r);
  }
  std::map<std::string, double> peer;  // PeerPairKey -> median.
  // PeerPairKey -> the least a step of a peer cut off takes.
  std::map<std::string, double> peer_cut_off;
  for (const nlohmann::json& p : run["peers"]) {
    const std::string key = PeerPairKey(p);
    if (p["status"] == "ok") peer[key] = Median(p);
    if (p["status"] == "cut_off" && p.contains("cut_off_min_step_ms") &&
        p["cut_off_min_step_ms"].is_number() &&
        p["cut_off_min_step_ms"].get<double>() > 0) {
      peer_cut_off[key] = p["cut_off_min_step_ms"].get<double>();
    }
  }
  std::string out =
      "| case | backend | precision | mode | median ms | 95% CI | GFLOP/s | "
      "vs f32 | vs peer | peak MiB | status |\n"
      "|---|---|---|---|---:|---|---:|---:|---:|---:|---|\n";
  auto row = [&](const nlohmann::json& r, bool is_peer) {
    const std::string status = r["status"];
    std::string time = "", ci = "", gflops = "", vs_f32 = "", vs_peer = "",
                peak = "";
    if (status == "ok") {
      const nlohmann::json& t = r["timing"];
      time = absl::StrFormat("%.3f", t["median_ms"].get<double>());
      ci = absl::StrFormat("%.3f-%.3f", t["median_ci95_ms"][0].get<double>(),
                           t["median_ci95_ms"][1].get<double>());
      if (r.value("gflops", 0.0) > 0) {
        gflops = absl::StrFormat("%.1f", r["gflops"].get<double>());
      }
      if (!is_peer) {
        auto f32 = medians.find(Key(r, "f32"));
        if (f32 != medians.end() && r["precision"] != "f32") {
          vs_f32 = absl::StrFormat("%.2fx", f32->second / Median(r));
        }
        const std::string key = PeerPairKey(r);
        if (auto p = peer.find(key); p != peer.end()) {
          vs_peer = absl::StrFormat("%.2fx", p->second / Median(r));
        } else if (auto cut = peer_cut_off.find(key);
                   cut != peer_cut_off.end()) {
          // The peer was cut off: its steps take at least this long.
          vs_peer = absl::StrFormat(">%.0fx", cut->second / Median(r));
        }
      }
      if (r.contains("peak_mib")) {
        peak = absl::StrFormat("%.1f", r["peak_mib"].get<double>());
      }
    }
    std::string note = status;
    if (r.value("support", "") == "fallback") note = "ok, fallback";
    const std::string reason = r.value("reason", "");
    const std::string support = r.value("support", "");
    if (status != "ok" || support == "slow" || support == "fallback") {
      if (!reason.empty()) {
        note += ": " + absl::StrReplaceAll(reason, {{"|", "/"}, {"\n", " "}});
      }
    }
    const std::string name = r.contains("round")
                                 ? absl::StrCat(r["case"].get<std::string>(),
                                                " (round ", ResultRound(r), ")")
                                 : r["case"].get<std::string>();
    absl::StrAppend(&out, "| ", name, " | ", r["backend"].get<std::string>(),
                    " | ", r["precision"].get<std::string>(), " | ",
                    r["mode"].get<std::string>(), " | ", time, " | ", ci, " | ",
                    gflops, " | ", vs_f32, " | ", vs_peer, " | ", peak, " | ",
                    note, " |\n");
  };
  for (const nlohmann::json& r : run["results"]) row(r, false);
  for (const nlohmann::json& p : run["peers"]) row(p, true);
  return out;
}

std::string CsvTable(const nlohmann::json& run) {
  std::string out =
      "case,backend,precision,mode,status,median_ms,ci_low_ms,ci_high_ms,"
      "cv,gflops,peak_mib,reason\n";
  auto quote = [](std::string s) {
    return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\"");
  };
  for (const auto* list : {&run["results"], &run["peers"]}) {
    for (const nlohmann::json& r : *list) {
      const bool ok = r["status"] == "ok";
      const nlohmann::json none = nlohmann::json::object();
      const nlohmann::json& t = ok ? r["timing"] : none;
      absl::StrAppend(
          &out, quote(r["case"]), ",", quote(r["backend"]), ",",
          quote(r["precision"]), ",", quote(r["mode"]), ",", quote(r["status"]),
          ",", ok ? absl::StrCat(t["median_ms"].get<double>()) : "", ",",
          ok ? absl::StrCat(t["median_ci95_ms"][0].get<double>()) : "", ",",
          ok ? absl::StrCat(t["median_ci95_ms"][1].get<double>()) : "", ",",
          ok ? absl::StrCat(t["cv"].get<double>()) : "", ",",
          ok ? absl::StrCat(r.value("gflops", 0.0)) : "", ",",
          ok ? absl::StrCat(r.value("peak_mib", 0.0)) : "", ",",
          quote(r.value("reason", "")), "\n");
    }
  }
  return out;
}

}  // namespace mixrt::bench
