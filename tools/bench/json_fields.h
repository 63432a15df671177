// Reading fields of a result JSON that may be malformed (a file given to
// `mixrt bench compare`): nlohmann's value() throws a type error (an abort
// here) when the key holds another type.
#ifndef MIXRT_TOOLS_BENCH_JSON_FIELDS_H_
#define MIXRT_TOOLS_BENCH_JSON_FIELDS_H_

#include <string>

#include "nlohmann/json.hpp"

namespace mixrt::bench {

// `object[key]` when it is a string, else `fallback`.
inline std::string StringOr(const nlohmann::json& object, const char* key,
                            const std::string& fallback) {
  if (!object.is_object() || !object.contains(key) ||
      !object[key].is_string()) {
    return fallback;
  }
  return object[key].get<std::string>();
}

}  // namespace mixrt::bench

#endif  // MIXRT_TOOLS_BENCH_JSON_FIELDS_H_
