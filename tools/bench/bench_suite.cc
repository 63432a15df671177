#include "tools/bench/bench_suite.h"

#include <climits>
#include <cstdlib>
#include <set>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/regular_file_read.h"

namespace mixrt::bench {
namespace {

constexpr int64_t kRequired = -1;
constexpr char kHeader[] = "mixrt-bench-suite";
constexpr int kMaxIncludeDepth = 16;
// A suite file is text of a few KiB; includes read each file once.
constexpr uint64_t kMaxSuiteFileBytes = 1 << 20;

// The largest value each key takes (a layers=100000000 suite crashed):
// sizes a 2-core machine can run, and that keep products of them far from
// 64-bit overflow.
const std::map<std::string, int64_t>& Maxima() {
  static const auto* maxima = new std::map<std::string, int64_t>{
      {"m", 1 << 16},     {"n", 1 << 16},        {"k", 1 << 16},
      {"batch", 1 << 16}, {"c", 1 << 14},        {"h", 1 << 14},
      {"w", 1 << 14},     {"o", 1 << 14},        {"kernel", 64},
      {"stride", 64},     {"padding", 64},       {"heads", 1 << 10},
      {"seq", 1 << 16},   {"head_dim", 1 << 12}, {"causal", 1},
      {"width", 1 << 16}, {"layers", 1 << 10},   {"busy_cores", 64},
  };
  return *maxima;
}

// Every kind takes busy_cores: processes spinning beside the timed steps.
std::map<std::string, std::map<std::string, int64_t>>* WithBusyCores(
    std::map<std::string, std::map<std::string, int64_t>>* kinds) {
  for (auto& [kind, keys] : *kinds) keys.emplace("busy_cores", 0);
  return kinds;
}

const std::map<std::string, std::map<std::string, int64_t>>& Kinds() {
  static const auto* kinds =
      WithBusyCores(new std::map<std::string, std::map<std::string, int64_t>>{
          {"gemm",
           {{"m", kRequired},
            {"n", kRequired},
            {"k", kRequired},
            {"batch", 1}}},
          {"conv",
           {{"batch", kRequired},
            {"c", kRequired},
            {"h", kRequired},
            {"w", kRequired},
            {"o", kRequired},
            {"kernel", kRequired},
            {"stride", 1},
            {"padding", 0}}},
          {"sdpa",
           {{"batch", kRequired},
            {"heads", kRequired},
            {"seq", kRequired},
            {"head_dim", kRequired},
            {"causal", 0}}},
          {"mlp_train",
           {{"batch", kRequired}, {"width", kRequired}, {"layers", 3}}},
          {"mlp_infer",
           {{"batch", kRequired}, {"width", kRequired}, {"layers", 3}}},
          {"transformer_train",
           {{"batch", kRequired},
            {"seq", kRequired},
            {"width", kRequired},
            {"heads", kRequired}}},
          {"transformer_infer",
           {{"batch", kRequired},
            {"seq", kRequired},
            {"width", kRequired},
            {"heads", kRequired}}},
      });
  return *kinds;
}

bool ValidName(absl::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' &&
        c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

struct Parser {
  std::vector<SuiteCase> cases;
  std::set<std::string> names;
  std::vector<std::string> stack;  // Files being read, for cycles.
  std::set<std::string> read;      // Files read once already.

  absl::Status File(const std::string& path) {
    // Each file once: its cases would only repeat (an error), and files
    // that include each other many times over were read 10^13 times.
    char resolved[PATH_MAX];
    const std::string canonical = ::realpath(path.c_str(), resolved) != nullptr
                                      ? std::string(resolved)
                                      : path;
    if (read.count(canonical) > 0) {
      bool open = false;
      for (const std::string& f : stack) open |= f == path;
      if (!open) {
        return absl::InvalidArgumentError(
            absl::StrCat("suite file ", path, " is included a second time"));
      }
    }
    read.insert(canonical);
    // A regular file only (a FIFO is refused, not waited on).
    absl::StatusOr<std::string> text =
        files::ReadRegularFile(path, kMaxSuiteFileBytes);
    if (!text.ok()) {
      return absl::Status(text.status().code(),
                          absl::StrCat("cannot read suite file ", path, ": ",
                                       text.status().message()));
    }
    const size_t slash = path.rfind('/');
    return Text(*text, path,
                slash == std::string::npos ? "." : path.substr(0, slash));
  }

  absl::Status Text(const std::string& text, const std::string& name,
                    const std::string& dir) {
    for (const std::string& open : stack) {
      if (open == name) {
        return absl::InvalidArgumentError(
            absl::StrCat("suite ", name, " includes itself (through ",
                         absl::StrJoin(stack, " -> "), ")"));
      }
    }
    if (stack.size() >= kMaxIncludeDepth) {
      return absl::InvalidArgumentError(absl::StrCat(
          "suite ", name, ": includes nested deeper than ", kMaxIncludeDepth));
    }
    stack.push_back(name);
    bool header = false;
    int line_no = 0;
    for (absl::string_view raw : absl::StrSplit(text, '\n')) {
      ++line_no;
      const std::string where = absl::StrCat(name, ":", line_no);
      absl::string_view line = raw.substr(0, raw.find('#'));
      line = absl::StripAsciiWhitespace(line);
      if (line.empty()) continue;
      std::vector<std::string> words =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      if (!header) {
        int version = 0;
        if (words.size() != 2 || words[0] != kHeader ||
            !absl::SimpleAtoi(words[1], &version)) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": expected the header '", kHeader, " ",
                           kSuiteFormatVersion, "' first, got '", line, "'"));
        }
        if (version != kSuiteFormatVersion) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": suite format version ", version,
                           "; this mixrt reads version ", kSuiteFormatVersion));
        }
        header = true;
        continue;
      }
      if (words[0] == "include") {
        if (words.size() != 2) {
          return absl::InvalidArgumentError(
              absl::StrCat(where, ": expected 'include FILE'"));
        }
        const std::string path =
            words[1][0] == '/' ? words[1] : absl::StrCat(dir, "/", words[1]);
        absl::Status included = File(path);
        if (!included.ok()) {
          return absl::Status(included.code(),
                              absl::StrCat(where, ": ", included.message()));
        }
        continue;
      }
      if (words[0] != "case") {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": unknown directive '", words[0],
            "' (expected 'case KIND NAME KEY=VALUE...' or 'include FILE')"));
      }
      absl::Status added = Case(words, where);
      if (!added.ok()) return added;
    }
    if (!header) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": empty suite (expected the header '", kHeader,
                       " ", kSuiteFormatVersion, "')"));
    }
    stack.pop_back();
    return absl::OkStatus();
  }

  absl::Status Case(const std::vector<std::string>& words,
                    const std::string& where) {
    if (words.size() < 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": expected 'case KIND NAME KEY=VALUE...'"));
    }
    SuiteCase c;
    c.kind = words[1];
    c.name = words[2];
    c.where = where;
    auto kind = Kinds().find(c.kind);
    if (kind == Kinds().end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": unknown case kind '", c.kind,
                       "' (known: ", absl::StrJoin(KindNames(), ", "), ")"));
    }
    if (!ValidName(c.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": case name '", c.name, "' must be [A-Za-z0-9_.-]"));
    }
    if (!names.insert(c.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": a case named '", c.name, "' is already in the suite"));
    }
    for (size_t i = 3; i < words.size(); ++i) {
      const size_t eq = words[i].find('=');
      const std::string key = words[i].substr(0, eq);
      if (eq == std::string::npos || kind->second.count(key) == 0) {
        std::vector<std::string> keys;
        for (const auto& [k, unused] : kind->second) keys.push_back(k);
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", words[i], "' is not KEY=VALUE with a key of ", c.kind,
            " (", absl::StrJoin(keys, ", "), ")"));
      }
      int64_t value = 0;
      if (!absl::SimpleAtoi(words[i].substr(eq + 1), &value) || value < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", key, "=", words[i].substr(eq + 1),
                         " is not a non-negative integer"));
      }
      if (const auto max = Maxima().find(key);
          max != Maxima().end() && value > max->second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", key, "=", value,
                         " is larger than this benchmark runs (", key,
                         " <= ", max->second, ")"));
      }
      if (!c.params.emplace(key, value).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", key, " is given twice"));
      }
    }
    for (const auto& [key, default_value] : kind->second) {
      if (c.params.count(key) > 0) continue;
      if (default_value == kRequired) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": ", c.kind, " needs ", key));
      }
      c.params[key] = default_value;
    }
    cases.push_back(std::move(c));
    return absl::OkStatus();
  }
};

}  // namespace

std::map<std::string, int64_t> KindKeys(const std::string& kind) {
  auto it = Kinds().find(kind);
  return it == Kinds().end() ? std::map<std::string, int64_t>{} : it->second;
}

std::vector<std::string> KindNames() {
  std::vector<std::string> names;
  for (const auto& [name, unused] : Kinds()) names.push_back(name);
  return names;
}

absl::StatusOr<std::vector<SuiteCase>> LoadSuite(const std::string& path) {
  Parser parser;
  absl::Status s = parser.File(path);
  if (!s.ok()) return s;
  return parser.cases;
}

absl::StatusOr<std::vector<SuiteCase>> ParseSuite(const std::string& text,
                                                  const std::string& name,
                                                  const std::string& dir) {
  Parser parser;
  absl::Status s = parser.Text(text, name, dir);
  if (!s.ok()) return s;
  return parser.cases;
}

}  // namespace mixrt::bench
