// mixrt-plugin-host: runs one backend plugin in a process of its own for a
// host process that started it (core/plugin/isolated_plugin.h), so that the
// plugin crashing or hanging cannot take the host down.
//
//   mixrt-plugin-host /path/libmixrt_x.so ARENA_BYTES   (fds 3 and 4 open)
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "core/plugin/isolation/plugin_host_server.h"

// In a sanitizer build, what the plugin leaks when its process ends is the
// plugin's to answer for, not a failure of this host (whose leak check would
// turn exit(0) into another status).
extern "C" int __lsan_is_turned_off() { return 1; }

int main(int argc, char** argv) {
  uint64_t arena_bytes = 0;
  if (argc != 3 || !absl::SimpleAtoi(argv[2], &arena_bytes)) {
    std::fprintf(stderr,
                 "usage: %s PLUGIN ARENA_BYTES\n"
                 "Started by mixrt for an out-of-process plugin "
                 "(MIXRT_PLUGIN_ISOLATION); not run by hand.\n",
                 argc > 0 ? argv[0] : "mixrt-plugin-host");
    return 2;
  }
  return mixrt::isolation::ServePlugin(argv[1], arena_bytes);
}
