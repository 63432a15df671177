#include "core/compiler/dynamic_artifact.h"

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mixrt::compiler {
namespace {

void AppendInts(std::string* out, const char* name,
                const std::vector<Affine>& ints) {
  absl::StrAppend(out, name, " ", ints.size());
  for (const Affine& f : ints) absl::StrAppend(out, " ", f.a, ",", f.b);
  *out += "\n";
}

bool ParseInts(const std::vector<absl::string_view>& words,
               std::vector<Affine>* ints) {
  size_t count = 0;
  if (words.size() < 2 || !absl::SimpleAtoi(words[1], &count) ||
      words.size() != count + 2) {
    return false;
  }
  for (size_t i = 0; i < count; ++i) {
    const std::vector<absl::string_view> ab = absl::StrSplit(words[i + 2], ',');
    Affine f;
    if (ab.size() != 2 || !absl::SimpleAtoi(ab[0], &f.a) ||
        !absl::SimpleAtoi(ab[1], &f.b)) {
      return false;
    }
    ints->push_back(f);
  }
  return true;
}

}  // namespace

std::string EncodeDynamic(const DynamicArtifact& a) {
  std::string out = "dims";
  for (const auto& [input, dim] : a.dims)
    absl::StrAppend(&out, " ", input, ":", dim);
  absl::StrAppend(&out, "\nsizes ", a.n1, " ", a.n2, "\nmasked ",
                  absl::BytesToHexString(a.masked_key), "\n");
  AppendInts(&out, "forward", a.forward);
  if (a.backward.has_value()) {
    AppendInts(&out, "backward", *a.backward);
  } else {
    out += "backward none\n";
  }
  return out + "end\n";
}

std::optional<DynamicArtifact> DecodeDynamic(const std::string& text) {
  const std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.size() != 7 || lines[5] != "end" || !lines[6].empty()) {
    return std::nullopt;
  }
  DynamicArtifact a;
  const std::vector<absl::string_view> dims = absl::StrSplit(lines[0], ' ');
  if (dims.size() < 2 || dims[0] != "dims") return std::nullopt;
  for (size_t i = 1; i < dims.size(); ++i) {
    const std::vector<absl::string_view> id = absl::StrSplit(dims[i], ':');
    int input = 0, dim = 0;
    if (id.size() != 2 || !absl::SimpleAtoi(id[0], &input) ||
        !absl::SimpleAtoi(id[1], &dim) || input < 0 || dim < 0) {
      return std::nullopt;
    }
    a.dims.emplace_back(input, dim);
  }
  const std::vector<absl::string_view> sizes = absl::StrSplit(lines[1], ' ');
  if (sizes.size() != 3 || sizes[0] != "sizes" ||
      !absl::SimpleAtoi(sizes[1], &a.n1) ||
      !absl::SimpleAtoi(sizes[2], &a.n2)) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> masked = absl::StrSplit(lines[2], ' ');
  if (masked.size() != 2 || masked[0] != "masked" ||
      masked[1].size() % 2 != 0 ||
      masked[1].find_first_not_of("0123456789abcdef") !=
          absl::string_view::npos) {
    return std::nullopt;
  }
  a.masked_key = absl::HexStringToBytes(masked[1]);
  const std::vector<absl::string_view> forward = absl::StrSplit(lines[3], ' ');
  if (forward.empty() || forward[0] != "forward" ||
      !ParseInts(forward, &a.forward)) {
    return std::nullopt;
  }
  const std::vector<absl::string_view> backward = absl::StrSplit(lines[4], ' ');
  if (backward.size() == 2 && backward[0] == "backward" &&
      backward[1] == "none") {
    return a;
  }
  a.backward.emplace();
  if (backward.empty() || backward[0] != "backward" ||
      !ParseInts(backward, &*a.backward)) {
    return std::nullopt;
  }
  return a;
}

}  // namespace mixrt::compiler
