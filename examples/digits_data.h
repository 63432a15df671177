// scikit-learn's handwritten digits (1797 8x8 images, 10 classes), read
// from the digits.csv.gz that ships inside the scikit-learn package.
#ifndef MIXRT_EXAMPLES_DIGITS_DATA_H_
#define MIXRT_EXAMPLES_DIGITS_DATA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixrt::examples {

struct Digits {
  std::vector<float> pixels;  // n x 64, scaled to [0, 1]
  std::vector<int64_t> labels;
  int64_t count() const { return static_cast<int64_t>(labels.size()); }
};

// `path` or, when empty, the first of the places Debian's python3-sklearn
// and pip install it.
absl::StatusOr<Digits> LoadDigits(const std::string& path = "");

}  // namespace mixrt::examples

#endif  // MIXRT_EXAMPLES_DIGITS_DATA_H_
