#include "common/out_of_memory.h"

#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

namespace mixrt {
namespace {

const char* program_name = "mixrt";

// Writes with fprintf and stack memory only: the heap may be exhausted.
[[noreturn]] void OnTerminate() {
  const std::exception_ptr current = std::current_exception();
  try {
    if (current) std::rethrow_exception(current);
  } catch (const std::bad_alloc&) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      std::fprintf(stderr,
                   "%s: out of memory: an allocation failed under the "
                   "address-space limit (ulimit -v) of %llu MiB\n",
                   program_name,
                   static_cast<unsigned long long>(limit.rlim_cur >> 20));
    } else {
      std::fprintf(stderr,
                   "%s: out of memory: an allocation failed (no address-space "
                   "limit: the machine's memory is exhausted)\n",
                   program_name);
    }
    std::fflush(stderr);
    std::_Exit(1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: uncaught exception: %s\n", program_name,
                 e.what());
  } catch (...) {
    std::fprintf(stderr, "%s: uncaught exception of unknown type\n",
                 program_name);
  }
  std::abort();
}

}  // namespace

void ReportOutOfMemoryAtExit(const char* program) {
  program_name = program;
  std::set_terminate(OnTerminate);
}

}  // namespace mixrt
