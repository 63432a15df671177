// Character-level text for examples/gpt: the fortune cookie databases of
// Debian's `fortunes` packages (about 2.5 MB of English text; scripts/
// setup.sh installs them), one token per byte value that occurs.
#ifndef MIXRT_EXAMPLES_TEXT_DATA_H_
#define MIXRT_EXAMPLES_TEXT_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace mixrt::examples {

struct TextCorpus {
  // Token ids, one byte each (a vocabulary of at most 256 byte values): a
  // gigabyte of text is a gigabyte of tokens, not eight. The last 10% is
  // held out.
  std::vector<uint8_t> train, validation;
  std::vector<unsigned char> alphabet;  // Token id -> byte.
  int64_t vocab_size() const { return static_cast<int64_t>(alphabet.size()); }
  std::string Decode(const std::vector<int64_t>& tokens) const;
};

// Every fortune file (not the .dat indexes or .u8 links) under `dir`, in
// name order. NotFound, saying how to install them, when there are none;
// a file over 64 MiB, or 256 MiB in all, is refused with its size (never
// skipped without a word).
absl::StatusOr<TextCorpus> LoadFortunes(
    const std::string& dir = "/usr/share/games/fortunes");

}  // namespace mixrt::examples

#endif  // MIXRT_EXAMPLES_TEXT_DATA_H_
