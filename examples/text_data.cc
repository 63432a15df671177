#include "examples/text_data.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/regular_file_read.h"

namespace mixrt::examples {

std::string TextCorpus::Decode(const std::vector<int64_t>& tokens) const {
  std::string text;
  for (int64_t t : tokens) {
    if (t >= 0 && t < vocab_size())
      text.push_back(static_cast<char>(alphabet[t]));
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
  constexpr uint64_t kMaxFileBytes = uint64_t{64} << 20,
                     kMaxTotalBytes = uint64_t{256} << 20;
  std::string text;
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    struct stat st;
    // Directories (e.g. off/) and anything not a regular file are skipped.
    if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (static_cast<uint64_t>(st.st_size) > kMaxFileBytes ||
        text.size() + static_cast<uint64_t>(st.st_size) > kMaxTotalBytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          path, " is ", st.st_size,
          " bytes; this example reads files of up to ", kMaxFileBytes >> 20,
          " MiB and ", kMaxTotalBytes >> 20, " MiB in all (", text.size(),
          " bytes read before it): pass a smaller --data"));
    }
    absl::StatusOr<std::string> part =
        files::ReadRegularFile(path, kMaxFileBytes);
    if (part.ok()) text += *part;
  }
  if (text.size() < 10000) {
    return absl::NotFoundError(absl::StrCat(
        "no fortune files under ", dir, " (", text.size(),
        " bytes): install Debian's `fortunes` package (scripts/setup.sh "
        "does) or pass --data=<directory of text files>"));
  }
  std::array<int, 256> id;
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
        .push_back(
            static_cast<uint8_t>(id[static_cast<unsigned char>(text[i])]));
  }
  return corpus;
}

}  // namespace mixrt::examples
