// Bazel's $(rootpath) gives test environments paths relative to the
// runfiles root; variables that mixrt requires to be absolute (a library
// named by a relative path could be checked in one place and loaded from
// another) are made absolute before the code under test reads them.
#ifndef MIXRT_TESTS_TESTING_ABSOLUTE_ENV_PATH_H_
#define MIXRT_TESTS_TESTING_ABSOLUTE_ENV_PATH_H_

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

namespace mixrt::testing {

// Rewrites $`name`, when set and relative, from the current directory.
// Returns true, for use in a static initializer.
inline bool MakeEnvPathAbsolute(const char* name) {
  const char* value = std::getenv(name);
  char cwd[PATH_MAX];
  if (value == nullptr || *value == '\0' || *value == '/' ||
      getcwd(cwd, sizeof(cwd)) == nullptr) {
    return true;
  }
  setenv(name, (std::string(cwd) + "/" + value).c_str(), 1);
  return true;
}

}  // namespace mixrt::testing

#endif  // MIXRT_TESTS_TESTING_ABSOLUTE_ENV_PATH_H_
