#include "examples/digits_data.h"

#include <sys/stat.h>
#include <zlib.h>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/regular_file_read.h"
#include "mixrt/status_macros.h"

namespace mixrt::examples {
namespace {

constexpr size_t kMaxTextBytes = size_t{64} << 20;
constexpr int64_t kMinImages = 10;

constexpr const char* kCandidates[] = {
    "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz",
    "/usr/local/lib/python3.11/dist-packages/sklearn/datasets/data/"
    "digits.csv.gz",
};

}  // namespace

absl::StatusOr<Digits> LoadDigits(const std::string& path) {
  std::string file = path;
  if (file.empty()) {
    for (const char* c : kCandidates) {
      struct stat st;
      if (stat(c, &st) == 0) {
        file = c;
        break;
      }
    }
  }
  if (file.empty()) {
    return absl::NotFoundError(
        "digits.csv.gz not found: install scikit-learn (scripts/setup.sh "
        "installs Debian's python3-sklearn) or pass its path");
  }
  // A FIFO or device would block gzopen or never end.
  MIXRT_RETURN_IF_ERROR(files::RegularFile::Open(file).status());
  gzFile gz = gzopen(file.c_str(), "rb");
  if (gz == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open ", file));
  }
  std::string text;
  char buffer[1 << 16];
  int n;
  while ((n = gzread(gz, buffer, sizeof(buffer))) > 0) {
    // The real file is 0.3 MB unpacked; a "gzip bomb" would take all memory.
    if (text.size() + static_cast<size_t>(n) > kMaxTextBytes) {
      gzclose(gz);
      return absl::DataLossError(absl::StrCat(
          file, " unpacks to more than ", kMaxTextBytes >> 20,
          " MiB; the digits data are about 0.3 MB (not this file?)"));
    }
    text.append(buffer, n);
  }
  const bool read_error = n < 0;
  gzclose(gz);
  if (read_error) {
    return absl::DataLossError(
        absl::StrCat(file, " is not readable gzip data"));
  }
  Digits d;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    ++line_no;
    std::vector<absl::string_view> cells = absl::StrSplit(line, ',');
    if (cells.size() != 65) {
      return absl::DataLossError(absl::StrCat(file, ":", line_no,
                                              ": expected 65 "
                                              "values, got ",
                                              cells.size()));
    }
    for (int i = 0; i < 64; ++i) {
      double v;
      // Written so that NaN (which SimpleAtod accepts) is refused too.
      if (!absl::SimpleAtod(cells[i], &v) || !(v >= 0 && v <= 16)) {
        return absl::DataLossError(
            absl::StrCat(file, ":", line_no, ": bad pixel '", cells[i], "'"));
      }
      d.pixels.push_back(static_cast<float>(v / 16.0));
    }
    int64_t label;
    if (!absl::SimpleAtoi(cells[64], &label) || label < 0 || label > 9) {
      return absl::DataLossError(
          absl::StrCat(file, ":", line_no, ": bad label '", cells[64], "'"));
    }
    d.labels.push_back(label);
  }
  if (d.count() < kMinImages) {
    return absl::DataLossError(absl::StrCat(
        file, " holds ", d.count(), " images; at least ", kMinImages,
        " are needed for a training and a validation split"));
  }
  return d;
}

}  // namespace mixrt::examples
