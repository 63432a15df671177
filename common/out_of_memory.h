// A program's last word when memory runs out. Allocations in the standard
// library throw std::bad_alloc; uncaught, the program ended with "terminate
// called after throwing an instance of 'std::bad_alloc'" and SIGABRT (a
// core dump, as if mixrt had crashed). Installed at the top of main, it
// prints one line naming the program and the address-space limit it ran
// under, and exits with status 1, as any other error does.
#ifndef MIXRT_COMMON_OUT_OF_MEMORY_H_
#define MIXRT_COMMON_OUT_OF_MEMORY_H_

namespace mixrt {

// Sets std::terminate's handler: an uncaught std::bad_alloc (from any
// thread) prints "<program>: out of memory: ..." and exits 1; any other
// uncaught exception prints what it says and aborts as before. `program`
// must outlive the process (a string literal or argv[0]).
void ReportOutOfMemoryAtExit(const char* program);

}  // namespace mixrt

#endif  // MIXRT_COMMON_OUT_OF_MEMORY_H_
