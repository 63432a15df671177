// Reads typed values off a fuzzer's byte string; past the end every read
// returns zeros, so a target never needs to check lengths.
#ifndef MIXRT_FUZZ_FUZZ_INPUT_H_
#define MIXRT_FUZZ_FUZZ_INPUT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace mixrt::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  T Read() {
    T value{};
    const size_t n = sizeof(T) < size_ - pos_ ? sizeof(T) : size_ - pos_;
    std::memcpy(&value, data_ + pos_, n);
    pos_ += n;
    return value;
  }

  // Up to `max` bytes, length taken from the input.
  std::string ReadString(size_t max) {
    size_t n = Read<uint16_t>() % (max + 1);
    if (n > size_ - pos_) n = size_ - pos_;
    std::string s(reinterpret_cast<const char*>(data_ + pos_), n);
    pos_ += n;
    return s;
  }

  std::string Rest() {
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return s;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace mixrt::fuzz

#endif  // MIXRT_FUZZ_FUZZ_INPUT_H_
