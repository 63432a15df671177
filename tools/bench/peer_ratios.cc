#include "tools/bench/peer_ratios.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tools/bench/bench_stats.h"
#include "tools/bench/json_fields.h"

namespace mixrt::bench {
namespace {

std::string Text(const nlohmann::json& object, const char* key) {
  return StringOr(object, key, "");
}

// A positive median step time, or 0 when the row was not timed.
double MedianMs(const nlohmann::json& r) {
  if (Text(r, "status") != "ok" || !r.contains("timing")) return 0;
  const nlohmann::json& t = r["timing"];
  if (!t.is_object() || !t.contains("median_ms") ||
      !t["median_ms"].is_number()) {
    return 0;
  }
  const double ms = t["median_ms"].get<double>();
  return ms > 0 && std::isfinite(ms) ? ms : 0;
}

}  // namespace

int ResultRound(const nlohmann::json& result) {
  if (!result.contains("round") || !result["round"].is_number_integer()) {
    return 1;
  }
  return result["round"].get<int>();
}

std::string PeerPairKey(const nlohmann::json& result) {
  return absl::StrCat(Text(result, "case"), "|", Text(result, "precision"), "|",
                      Text(result, "mode"), "|", ResultRound(result));
}

std::vector<PeerRatioRow> PeerRatios(const nlohmann::json& run) {
  if (!run.contains("results") || !run["results"].is_array() ||
      !run.contains("peers") || !run["peers"].is_array()) {
    return {};
  }
  // Peers by name, then by pair key.
  std::map<std::string, std::map<std::string, const nlohmann::json*>> peers;
  for (const nlohmann::json& p : run["peers"]) {
    if (p.is_object()) peers[Text(p, "backend")][PeerPairKey(p)] = &p;
  }
  std::vector<PeerRatioRow> rows;
  // (case, backend, precision, mode, peer) -> index in rows.
  std::map<std::tuple<std::string, std::string, std::string, std::string,
                      std::string>,
           size_t>
      index;
  for (const nlohmann::json& r : run["results"]) {
    if (!r.is_object()) continue;
    const double mixrt_ms = MedianMs(r);
    if (mixrt_ms == 0) continue;
    for (const auto& [peer, by_key] : peers) {
      auto p = by_key.find(PeerPairKey(r));
      if (p == by_key.end()) continue;
      const auto id =
          std::make_tuple(Text(r, "case"), Text(r, "backend"),
                          Text(r, "precision"), Text(r, "mode"), peer);
      auto [it, added] = index.emplace(id, rows.size());
      if (added) {
        PeerRatioRow row;
        std::tie(row.case_name, row.backend, row.precision, row.mode,
                 row.peer) = id;
        rows.push_back(row);
      }
      PeerRatioRow& row = rows[it->second];
      const double peer_ms = MedianMs(*p->second);
      if (peer_ms > 0) row.ratios.push_back(peer_ms / mixrt_ms);
      if (Text(*p->second, "status") == "cut_off") ++row.cut_off_rounds;
    }
  }
  for (PeerRatioRow& row : rows) {
    if (row.ratios.empty()) continue;
    std::vector<double> sorted = row.ratios;
    std::sort(sorted.begin(), sorted.end());
    row.median = Quantile(sorted, 0.5);
    row.min = sorted.front();
    row.max = sorted.back();
  }
  return rows;
}

std::string PeerRatioMarkdown(const std::vector<PeerRatioRow>& rows) {
  if (rows.empty()) return "";
  std::string out =
      "| case | backend | precision | mode | peer | rounds | vs peer "
      "(median) | range |\n"
      "|---|---|---|---|---|---:|---:|---|\n";
  std::map<std::string, std::pair<double, int>> log_sums;  // By precision.
  for (const PeerRatioRow& row : rows) {
    std::string ratio = "-", range = "";
    if (!row.ratios.empty()) {
      ratio = absl::StrFormat("%.2fx", row.median);
      range = absl::StrFormat("%.2f-%.2fx", row.min, row.max);
      auto& [sum, count] = log_sums[row.precision];
      sum += std::log(row.median);
      ++count;
    }
    if (row.cut_off_rounds > 0) {
      absl::StrAppend(&range, range.empty() ? "" : "; ", "peer cut off in ",
                      row.cut_off_rounds, " round(s)");
    }
    absl::StrAppend(&out, "| ", row.case_name, " | ", row.backend, " | ",
                    row.precision, " | ", row.mode, " | ", row.peer, " | ",
                    row.ratios.size(), " | ", ratio, " | ", range, " |\n");
  }
  for (const auto& [precision, sum_count] : log_sums) {
    absl::StrAppend(
        &out, "\n", precision, ": geometric mean of the medians ",
        absl::StrFormat("%.2fx", std::exp(sum_count.first / sum_count.second)),
        " over ", sum_count.second, sum_count.second == 1 ? " row" : " rows");
  }
  out += "\n";
  return out;
}

}  // namespace mixrt::bench
