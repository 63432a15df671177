#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace mixrt::files {

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path) {
  const std::string lock_path = path + ".lock";
  // O_NOFOLLOW: a planted symlink must not make us truncate its target.
  const int fd = ::open(lock_path.c_str(),
                        O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot open the lock file ", lock_path, ": ", std::strerror(errno)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat("the lock file ", lock_path, " is not a regular file"));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char holder[32] = {0};
    const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
    ::close(fd);
    const std::string pid =
        n > 0 ? std::string(absl::StripAsciiWhitespace(
                    absl::string_view(holder, static_cast<size_t>(n))))
              : "unknown";
    return absl::FailedPreconditionError(absl::StrCat(
        "another run (pid ", pid, ") is writing ", path, "; it holds ",
        lock_path, ". Use another path, or wait for that run to end"));
  }
  const std::string pid = absl::StrCat(::getpid(), "\n");
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) !=
                                     static_cast<ssize_t>(pid.size())) {
    // The pid is only for messages; the lock itself is held.
  }
  return FileLock(fd, lock_path);
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(other.fd_), lock_path_(std::move(other.lock_path_)) {
  other.fd_ = -1;
}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    lock_path_ = std::move(other.lock_path_);
    other.fd_ = -1;
  }
  return *this;
}

// The lock file stays: removing it would let a third process lock a fresh
// inode while a second one still waits on the old one.
FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace mixrt::files
