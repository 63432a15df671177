#include "common/regular_file_read.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/memory_budget.h"

namespace mixrt::files {

absl::StatusOr<RegularFile> RegularFile::Open(const std::string& path,
                                              bool follow_links) {
  // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC |
                                          (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0) {
    const std::string text =
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(text)
                           : absl::FailedPreconditionError(text);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot read ", path,
        ": it is not a regular file (a directory, FIFO, device or socket)"));
  }
  // Reads of a regular file never block; clear the flag anyway so the
  // descriptor behaves normally.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return RegularFile(fd, static_cast<uint64_t>(st.st_size), st.st_uid, path);
}

RegularFile::RegularFile(RegularFile&& other) noexcept
    : fd_(other.fd_),
      size_(other.size_),
      owner_(other.owner_),
      path_(std::move(other.path_)) {
  other.fd_ = -1;
}

RegularFile& RegularFile::operator=(RegularFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    size_ = other.size_;
    owner_ = other.owner_;
    path_ = std::move(other.path_);
    other.fd_ = -1;
  }
  return *this;
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RegularFile::ReadAt(uint64_t offset, void* out,
                                 size_t bytes) const {
  auto* p = static_cast<char*>(out);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n =
        ::pread(fd_, p + done, bytes - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(
          absl::StrCat("cannot read ", path_, ": ", std::strerror(errno)));
    }
    if (n == 0) {
      return absl::DataLossError(absl::StrCat(
          "cannot read ", path_, ": it ended at byte ", offset + done,
          " (it was ", size_, " bytes when opened; is it being rewritten?)"));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> RegularFile::ReadAll() const {
  if (absl::Status fits =
          CheckFitsInMemory(size_, absl::StrCat("reading ", path_));
      !fits.ok()) {
    return fits;
  }
  std::string data;
  try {
    data.resize(size_);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory: reading ", path_, " needs ", size_,
                     " bytes (the file itself was not checked)"));
  } catch (const std::length_error&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory: ", path_, " is too large (", size_, " bytes)"));
  }
  absl::Status read = ReadAt(0, data.data(), data.size());
  if (!read.ok()) return read;
  return data;
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            uint64_t max_bytes) {
  absl::StatusOr<RegularFile> file = RegularFile::Open(path);
  if (!file.ok()) return file.status();
  if (file->size() > max_bytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", path, ": it is ", file->size(),
                     " bytes, more than the ", max_bytes, " expected"));
  }
  return file->ReadAll();
}

}  // namespace mixrt::files
