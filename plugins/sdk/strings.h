// StrCat / StrAppend / StrJoin / StrFormat for the SDK, on the C++ standard
// library (Abseil's names and, for what the SDK prints, their output:
// integers in decimal, floating point with 6 significant digits).
#ifndef MIXRT_PLUGINS_SDK_STRINGS_H_
#define MIXRT_PLUGINS_SDK_STRINGS_H_

#include <cstdarg>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>

namespace mixrt::sdk {
namespace strings_internal {

inline void Append(std::string* out, std::string_view s) { out->append(s); }
inline void Append(std::string* out, const char* s) {
  if (s != nullptr) out->append(s);
}
inline void Append(std::string* out, const std::string& s) { out->append(s); }
inline void Append(std::string* out, char c) { out->push_back(c); }
template <typename T>
std::enable_if_t<std::is_integral_v<T> || std::is_enum_v<T>> Append(
    std::string* out, T v) {
  if constexpr (std::is_enum_v<T>) {
    out->append(std::to_string(static_cast<std::underlying_type_t<T>>(v)));
  } else if constexpr (std::is_same_v<T, bool>) {
    out->push_back(v ? '1' : '0');
  } else {
    out->append(std::to_string(v));
  }
}
// Other string types (absl::string_view): their characters.
template <typename S>
auto Append(std::string* out, const S& s)
    -> decltype(out->append(s.data(), s.size()), void()) {
  out->append(s.data(), s.size());
}
inline void AppendFloat(std::string* out, double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  out->append(buf);
}
inline void Append(std::string* out, double v) { AppendFloat(out, v); }
inline void Append(std::string* out, float v) { AppendFloat(out, v); }

}  // namespace strings_internal

template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (strings_internal::Append(out, args), ...);
}

template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  StrAppend(&out, args...);
  return out;
}

template <typename Range>
std::string StrJoin(const Range& range, std::string_view separator) {
  std::string out;
  bool first = true;
  for (const auto& item : range) {
    if (!first) out.append(separator);
    first = false;
    strings_internal::Append(&out, item);
  }
  return out;
}

// printf formatting into a std::string.
inline std::string StrFormat(const char* format, ...)
    __attribute__((format(printf, 1, 2)));
inline std::string StrFormat(const char* format, ...) {
  va_list args;
  va_start(args, format);
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) std::vsnprintf(out.data(), out.size() + 1, format, args);
  va_end(args);
  return out;
}

}  // namespace mixrt::sdk

#endif  // MIXRT_PLUGINS_SDK_STRINGS_H_
