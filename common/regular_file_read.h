// Reading a file that must be a regular file: opened non-blocking, so a FIFO
// or device planted at the path is refused instead of hanging the reader;
// its size is known before anything is allocated, and running out of memory
// is reported as such (never as a damaged file).
#ifndef MIXRT_COMMON_REGULAR_FILE_READ_H_
#define MIXRT_COMMON_REGULAR_FILE_READ_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace mixrt::files {

// An open regular file; closed on destruction.
class RegularFile {
 public:
  // NotFound when absent; FailedPrecondition when not a regular file.
  // Without `follow_links`, a symlink at `path` is refused too (O_NOFOLLOW).
  static absl::StatusOr<RegularFile> Open(const std::string& path,
                                          bool follow_links = true);

  RegularFile(RegularFile&& other) noexcept;
  RegularFile& operator=(RegularFile&& other) noexcept;
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;
  ~RegularFile();

  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // The open descriptor (what was checked is what is read or mapped:
  // /proc/self/fd/<fd> names this very file) and its owner.
  int fd() const { return fd_; }
  uint32_t owner() const { return owner_; }
  // Reads exactly `bytes` at `offset` (DataLoss when the file is shorter
  // now than it was at Open).
  absl::Status ReadAt(uint64_t offset, void* out, size_t bytes) const;
  // The whole file; ResourceExhausted when it cannot be allocated.
  absl::StatusOr<std::string> ReadAll() const;

 private:
  RegularFile(int fd, uint64_t size, uint32_t owner, std::string path)
      : fd_(fd), size_(size), owner_(owner), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  uint32_t owner_ = 0;
  std::string path_;
};

// RegularFile::Open + ReadAll, refusing files over `max_bytes`.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            uint64_t max_bytes);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_REGULAR_FILE_READ_H_
