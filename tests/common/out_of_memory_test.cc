// An allocation that fails in a program that installed the report ends in
// one line and status 1, not "terminate called" and SIGABRT; any other
// uncaught exception still aborts, saying what it was.
#include "common/out_of_memory.h"

#include <sys/resource.h>

#include <new>
#include <stdexcept>
#include <thread>

#include "gtest/gtest.h"

namespace mixrt {
namespace {

// What operator new throws when an allocation fails. Thrown directly, not
// provoked: under AddressSanitizer a failed operator new reports and ends
// the process instead of throwing (the report itself is what is tested;
// a real failed allocation is in the bad-input matrix, by hand).
void FailAnAllocation() { throw std::bad_alloc(); }

// Runs `f` where nothing catches what it throws (as in a program's main):
// gtest's death tests catch exceptions escaping their statement.
void Uncaught(void (*f)()) noexcept { f(); }

TEST(OutOfMemoryDeathTest, AFailedAllocationIsOneLineAndStatusOne) {
  EXPECT_EXIT(
      {
        ReportOutOfMemoryAtExit("train");
        Uncaught(FailAnAllocation);
      },
      ::testing::ExitedWithCode(1),
      "^train: out of memory: an allocation failed \\(no address-space limit");
}

// Under a 4 GiB address-space limit (ulimit -v 4194304).
void FailAnAllocationUnderALimit() {
  const rlim_t four_gib = rlim_t{4} << 30;
  const struct rlimit limit = {four_gib, four_gib};
  setrlimit(RLIMIT_AS, &limit);
  FailAnAllocation();
}

TEST(OutOfMemoryDeathTest, TheReportNamesTheAddressSpaceLimit) {
  EXPECT_EXIT(
      {
        ReportOutOfMemoryAtExit("train");
        Uncaught(FailAnAllocationUnderALimit);
      },
      ::testing::ExitedWithCode(1),
      "train: out of memory: an allocation failed under the address-space "
      "limit \\(ulimit -v\\) of 4096 MiB");
}

TEST(OutOfMemoryDeathTest, AFailureOnAnotherThreadIsReportedToo) {
  EXPECT_EXIT(
      {
        ReportOutOfMemoryAtExit("train");
        std::thread([] { FailAnAllocation(); }).join();
      },
      ::testing::ExitedWithCode(1), "train: out of memory");
}

TEST(OutOfMemoryDeathTest, OtherExceptionsStillAbortSayingWhatTheyWere) {
  EXPECT_DEATH(
      {
        ReportOutOfMemoryAtExit("train");
        Uncaught([] { throw std::runtime_error("a bug"); });
      },
      "train: uncaught exception: a bug");
}

}  // namespace
}  // namespace mixrt
