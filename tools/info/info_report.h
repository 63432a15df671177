// What `mixrt info` prints: every plugin found (loaded or skipped, and why),
// its devices and their precision capability matrix, as text or JSON.
#ifndef MIXRT_TOOLS_INFO_INFO_REPORT_H_
#define MIXRT_TOOLS_INFO_INFO_REPORT_H_

#include <string>

#include "core/plugin/registry.h"
#include "nlohmann/json.hpp"

namespace mixrt::tools {

nlohmann::json InfoJson(const Registry& registry);
std::string InfoText(const Registry& registry);

}  // namespace mixrt::tools

#endif  // MIXRT_TOOLS_INFO_INFO_REPORT_H_
