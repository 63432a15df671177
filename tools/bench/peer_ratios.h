// mixrt against its peers, row by row, over a run's rounds (--rounds): a
// ratio is a peer's median step over mixrt's in the same round (> 1: mixrt
// faster), and a row's ratio is the median of its rounds', with their range.
// On a machine whose speed drifts by tens of percent over minutes (a shared
// VM), one pair of medians can land either side of 1x on a tie; rounds run
// minutes apart show which rows are ties and which are wins.
#ifndef MIXRT_TOOLS_BENCH_PEER_RATIOS_H_
#define MIXRT_TOOLS_BENCH_PEER_RATIOS_H_

#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace mixrt::bench {

struct PeerRatioRow {
  std::string case_name, backend, precision, mode, peer;
  std::vector<double> ratios;  // One per round where both sides ran.
  double median = 0, min = 0, max = 0;
  int cut_off_rounds = 0;  // Rounds where the peer was cut off.
};

// The round a result JSON row belongs to: its "round", else 1.
int ResultRound(const nlohmann::json& result);

// What pairs a result with a peer's: the same case, precision, mode and
// round ("case|precision|mode|round").
std::string PeerPairKey(const nlohmann::json& result);

// The rows of `run` (a result JSON: "results" and "peers") that a peer ran
// too, in the order of "results". A result without "round" is round 1.
std::vector<PeerRatioRow> PeerRatios(const nlohmann::json& run);

// The rows as a Markdown table, with each precision's geometric mean of the
// rows' median ratios; empty when there are no rows.
std::string PeerRatioMarkdown(const std::vector<PeerRatioRow>& rows);

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_PEER_RATIOS_H_
