#include "tools/bench/bench_compare.h"

#include <cmath>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/bench_format.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/json_fields.h"

namespace mixrt::bench {
namespace {

struct Entry {
  double median = 0;
  std::vector<double> samples;
};

absl::StatusOr<std::map<std::string, Entry>> Entries(const nlohmann::json& run,
                                                     const std::string& name,
                                                     bool any_backend) {
  if (StringOr(run, "format", "") != kResultFormatName) {
    return absl::InvalidArgumentError(
        absl::StrCat(name,
                     ": not a mixrt bench result (no format "
                     "\"mixrt-bench-result\")"));
  }
  const nlohmann::json version =
      run.contains("version") ? run["version"] : nlohmann::json();
  if (!version.is_number_integer() ||
      version.get<int64_t>() != kResultFormatVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": result format version ", version.dump(),
                     "; this mixrt reads version ", kResultFormatVersion));
  }
  std::map<std::string, Entry> entries;
  if (!run.contains("results") || !run["results"].is_array()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": \"results\" is not a list of results"));
  }
  for (size_t i = 0; i < run["results"].size(); ++i) {
    const nlohmann::json& r = run["results"][i];
    if (!r.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": result ", i, " is not an object"));
    }
    if (r.value("status", nlohmann::json()) != "ok") continue;
    // Every field a comparison reads, of the type it reads it as: a
    // malformed file is an error naming the field, never an abort.
    for (const char* field : {"case", "backend", "precision", "mode"}) {
      if (!r.contains(field) || !r[field].is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": result ", i, " has no string \"", field, "\""));
      }
    }
    const std::string key = absl::StrCat(
        r["case"].get<std::string>(), " ",
        any_backend ? std::string("*") : r["backend"].get<std::string>(), " ",
        r["precision"].get<std::string>(), " ", r["mode"].get<std::string>());
    const nlohmann::json& t = r.value("timing", nlohmann::json());
    if (!t.is_object() || !t.contains("median_ms") ||
        !t["median_ms"].is_number() || !t.contains("samples") ||
        !t["samples"].is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": result ", i, " (", key,
                       ") has no \"timing\" with a number \"median_ms\" and a "
                       "list \"samples\""));
    }
    Entry e;
    e.median = t["median_ms"].get<double>();
    for (const nlohmann::json& x : t["samples"]) {
      if (!x.is_number() || !(x.get<double>() > 0) ||
          !std::isfinite(x.get<double>())) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": result ", i, " (", key,
                         ") has a sample that is not a positive time"));
      }
      e.samples.push_back(x.get<double>());
    }
    // A median of 0 would print "infx"; a result without the samples it
    // summarizes cannot be tested (an empty list made a 5x slowdown "n.s.").
    if (!(e.median > 0) || !std::isfinite(e.median)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": result ", i, " (", key, ") has median_ms ",
                       e.median, "; expected a positive time"));
    }
    if (e.samples.size() < static_cast<size_t>(kMinComparableSamples)) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": result ", i, " (", key, ") has ", e.samples.size(),
          " samples; a comparison needs at least ", kMinComparableSamples));
    }
    auto it = entries.find(key);
    if (it == entries.end() || e.median < it->second.median) {
      entries[key] = std::move(e);
    }
  }
  return entries;
}

std::string Label(const nlohmann::json& run, const std::string& name) {
  const nlohmann::json machine =
      run.contains("machine") ? run["machine"] : nlohmann::json::object();
  std::string commit = StringOr(machine, "mixrt_commit", "unknown");
  if (commit.size() > 10) commit = commit.substr(0, 10);
  return absl::StrCat(name, " (", StringOr(machine, "cpu", "?"), ", ", commit,
                      ")");
}

}  // namespace

absl::StatusOr<Comparison> Compare(const std::vector<nlohmann::json>& runs,
                                   const std::vector<std::string>& names,
                                   const CompareOptions& options) {
  if (runs.size() < 2) {
    return absl::InvalidArgumentError(
        "compare needs at least two result files (the first is the baseline)");
  }
  Comparison c;
  c.alpha = options.alpha;
  std::vector<std::map<std::string, Entry>> entries;
  for (size_t i = 0; i < runs.size(); ++i) {
    absl::StatusOr<std::map<std::string, Entry>> e =
        Entries(runs[i], names[i], options.any_backend);
    if (!e.ok()) return e.status();
    entries.push_back(*std::move(e));
    c.labels.push_back(Label(runs[i], names[i]));
  }
  std::vector<double> log_sum(runs.size(), 0);
  std::vector<int> log_count(runs.size(), 0);
  for (const auto& [key, base] : entries[0]) {
    CompareRow row;
    row.key = key;
    for (size_t i = 0; i < runs.size(); ++i) {
      CompareCell cell;
      auto it = entries[i].find(key);
      if (it != entries[i].end()) {
        cell.present = true;
        cell.median_ms = it->second.median;
        cell.speedup = base.median / it->second.median;
        if (i > 0) {
          cell.p_value = MannWhitneyU(base.samples, it->second.samples).p_value;
          cell.significant = cell.p_value < options.alpha;
          log_sum[i] += std::log(cell.speedup);
          ++log_count[i];
        }
      }
      row.cells.push_back(cell);
    }
    c.rows.push_back(std::move(row));
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    c.geomean_speedup.push_back(
        i == 0 ? 1.0
               : (log_count[i] > 0 ? std::exp(log_sum[i] / log_count[i]) : 0));
  }
  return c;
}

std::string ComparisonMarkdown(const Comparison& c) {
  std::string out;
  for (size_t i = 0; i < c.labels.size(); ++i) {
    absl::StrAppend(&out, i == 0 ? "baseline" : absl::StrCat("run ", i), ": ",
                    c.labels[i], "\n");
  }
  absl::StrAppend(&out, "\n| case backend precision mode | baseline ms |");
  for (size_t i = 1; i < c.labels.size(); ++i) {
    absl::StrAppend(&out, " run ", i, " ms | speedup | p |");
  }
  absl::StrAppend(&out, "\n|---|---:|");
  for (size_t i = 1; i < c.labels.size(); ++i) out += "---:|---:|---:|";
  out += "\n";
  for (const CompareRow& row : c.rows) {
    absl::StrAppend(&out, "| ", row.key, " | ",
                    absl::StrFormat("%.3f", row.cells[0].median_ms), " |");
    for (size_t i = 1; i < row.cells.size(); ++i) {
      const CompareCell& cell = row.cells[i];
      if (!cell.present) {
        out += " - | - | - |";
        continue;
      }
      // erfc underflows past ~1e-308: say so rather than print p = 0.
      const std::string p = cell.p_value > 0
                                ? absl::StrFormat("%.3g", cell.p_value)
                                : std::string("<1e-300");
      absl::StrAppend(
          &out,
          absl::StrFormat(" %.3f | %.2fx%s | %s |", cell.median_ms,
                          cell.speedup, cell.significant ? "" : " (n.s.)", p));
    }
    out += "\n";
  }
  absl::StrAppend(&out, "| geometric mean | |");
  for (size_t i = 1; i < c.geomean_speedup.size(); ++i) {
    absl::StrAppend(&out,
                    absl::StrFormat(" | %.2fx | |", c.geomean_speedup[i]));
  }
  absl::StrAppend(&out,
                  "\n\nspeedup = baseline median / run median (> 1: "
                  "faster than the baseline); p: two-sided "
                  "Mann-Whitney U on the raw samples; n.s.: p >= ",
                  c.alpha, "\n");
  return out;
}

std::vector<std::string> Regressions(const Comparison& c, double threshold) {
  std::vector<std::string> out;
  for (const CompareRow& row : c.rows) {
    for (size_t i = 1; i < row.cells.size(); ++i) {
      const CompareCell& cell = row.cells[i];
      if (cell.present && cell.significant && cell.speedup < 1.0 - threshold) {
        out.push_back(absl::StrFormat("%s (run %d): %.2fx (p=%.3g)", row.key,
                                      static_cast<int>(i), cell.speedup,
                                      cell.p_value));
      }
    }
  }
  return out;
}

}  // namespace mixrt::bench
