// An advisory lock held for the lifetime of a run that writes one path, so
// two runs writing the same checkpoint do not interleave silently. The lock
// is flock(2) on "<path>.lock" (released by the kernel when the process
// dies, so a crash never leaves it held); the file records the holder's pid
// for the refusal message.
#ifndef MIXRT_COMMON_FILE_LOCK_H_
#define MIXRT_COMMON_FILE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace mixrt::files {

class FileLock {
 public:
  // FailedPrecondition naming the holder's pid when another process (or
  // another FileLock in this one) holds it.
  static absl::StatusOr<FileLock> Acquire(const std::string& path);

  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&& other) noexcept;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock();

  const std::string& lock_path() const { return lock_path_; }

 private:
  FileLock(int fd, std::string lock_path)
      : fd_(fd), lock_path_(std::move(lock_path)) {}
  int fd_ = -1;
  std::string lock_path_;
};

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_FILE_LOCK_H_
