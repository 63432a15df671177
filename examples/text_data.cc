#include "examples/text_data.h"

#include <dirent.h>

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/regular_file_read.h"

namespace mixrt::examples {

std::string TextCorpus::Decode(const std::vector<int64_t>& tokens) const {
  std::string text;
  for (int64_t t : tokens) {
    if (t >= 0 && t < vocab_size()) text.push_back(static_cast<char>(alphabet[t]));
  }
  return text;
}

absl::StatusOr<TextCorpus> LoadFortunes(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name[0] == '.' || absl::EndsWith(name, ".dat") ||
          absl::EndsWith(name, ".u8")) {
        continue;
      }
      names.push_back(name);
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string text;
  for (const std::string& name : names) {
    // Directories (e.g. off/) and anything not a regular file are skipped.
    absl::StatusOr<std::string> part =
        files::ReadRegularFile(dir + "/" + name, 64 << 20);
    if (part.ok()) text += *part;
  }
  if (text.size() < 10000) {
    return absl::NotFoundError(absl::StrCat(
        "no fortune files under ", dir, " (", text.size(),
        " bytes): install Debian's `fortunes` package (scripts/setup.sh "
        "does) or pass --data=<directory of text files>"));
  }
  std::array<int64_t, 256> id;
  id.fill(-1);
  TextCorpus corpus;
  for (unsigned char c : text) {
    if (id[c] < 0) {
      id[c] = 0;  // Seen; numbered below in byte order.
    }
  }
  for (int c = 0; c < 256; ++c) {
    if (id[c] == 0) {
      id[c] = corpus.vocab_size();
      corpus.alphabet.push_back(static_cast<unsigned char>(c));
    }
  }
  const size_t split = text.size() * 9 / 10;
  for (size_t i = 0; i < text.size(); ++i) {
    (i < split ? corpus.train : corpus.validation)
        .push_back(id[static_cast<unsigned char>(text[i])]);
  }
  return corpus;
}

}  // namespace mixrt::examples
