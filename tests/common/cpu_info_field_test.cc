// CpuInfoField against /proc/cpuinfo read here line by line: the first
// "flags" line's value, a key matched whole (not as a prefix), and "" for
// a key the file lacks; CpuFlags as that line's words.
#include "common/cpu_info_field.h"

#include <fstream>
#include <set>
#include <string>

#include "gtest/gtest.h"

namespace mixrt {
namespace {

TEST(CpuInfoFieldTest, FirstFlagsLineWholeKeyAndMissingKey) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, flags_line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      flags_line = line;
      break;
    }
  }
  if (flags_line.empty()) GTEST_SKIP() << "no flags line in /proc/cpuinfo";
  const std::string flags = CpuInfoField("flags");
  ASSERT_FALSE(flags.empty());
  EXPECT_NE(flags_line.find(flags), std::string::npos) << flags;
  EXPECT_NE(flags.front(), ' ');
  EXPECT_NE(flags.back(), ' ');
  EXPECT_EQ(CpuInfoField("flag"), "") << "a prefix of a key is not the key";
  EXPECT_EQ(CpuInfoField("no such field"), "");
  // CpuFlags: the same line's words, each one whole.
  const std::set<std::string> words = CpuFlags();
  ASSERT_FALSE(words.empty());
  for (const std::string& w : words) {
    EXPECT_NE((" " + flags + " ").find(" " + w + " "), std::string::npos) << w;
  }
  EXPECT_EQ(words.count("fpu"), 1u) << "every x86-64 CPU reports fpu";
  EXPECT_EQ(words.count(""), 0u);
}

}  // namespace
}  // namespace mixrt
