#include "common/regular_file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace mixrt::files {
namespace {

using ::testing::HasSubstr;

std::string Tmp(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
}

TEST(RegularFileRead, ReadsAFile) {
  const std::string path = Tmp("plain");
  std::ofstream(path) << "hello";
  absl::StatusOr<std::string> data = ReadRegularFile(path, 100);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, "hello");
  EXPECT_EQ(ReadRegularFile(path, 4).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadRegularFile(Tmp("absent"), 4).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(RegularFileRead, AFifoIsRefusedWithoutWaitingForAWriter) {
  // Opened blocking, this would wait forever: no one writes the FIFO.
  const std::string path = Tmp("fifo");
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  absl::StatusOr<std::string> data = ReadRegularFile(path, 100);
  EXPECT_EQ(data.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(data.status().message(), HasSubstr("not a regular file"));
}

TEST(RegularFileRead, ADirectoryOrDeviceIsRefused) {
  EXPECT_THAT(
      ReadRegularFile(std::getenv("TEST_TMPDIR"), 100).status().message(),
      HasSubstr("not a regular file"));
  EXPECT_THAT(ReadRegularFile("/dev/zero", 100).status().message(),
              HasSubstr("not a regular file"));
}

TEST(RegularFileRead, AnAllocationFailureIsReportedAsOne) {
  // A sparse 4 TiB file: no machine here can hold it in memory.
  const std::string path = Tmp("huge");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  if (::ftruncate(fd, off_t{1} << 42) != 0) {
    ::close(fd);
    GTEST_SKIP() << "this file system cannot hold a 4 TiB sparse file";
  }
  ::close(fd);
  absl::StatusOr<RegularFile> file = RegularFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<std::string> data = file->ReadAll();
  EXPECT_EQ(data.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(data.status().message(), HasSubstr("out of memory"));
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace mixrt::files
