#include "common/atomic_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mixrt::files {
namespace {

absl::Status Errno(absl::string_view what, const std::string& path) {
  const int err = errno;
  const std::string text =
      absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS) {
    return absl::PermissionDeniedError(text);
  }
  if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(text);
  return absl::InternalError(text);
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// umask() both reads and sets the mask, which races with other threads;
// /proc/self/status reports it without changing it.
mode_t CurrentUmask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view v = line;
    if (absl::ConsumePrefix(&v, "Umask:")) {
      v = absl::StripAsciiWhitespace(v);
      const unsigned long mask =
          std::strtoul(std::string(v).c_str(), nullptr, 8);
      return static_cast<mode_t>(mask & 0777);
    }
  }
  return 022;
}

absl::Status WriteAll(int fd, absl::string_view data, const std::string& path) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Errno("cannot write", path);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Creates "<target>.tmp.<pid>.<n>" exclusively. A name taken (by another
// thread, or planted by someone else) is skipped, never opened.
absl::StatusOr<std::pair<int, std::string>> CreateTemporary(
    const std::string& target) {
  static std::atomic<unsigned> counter{0};
  for (int attempt = 0; attempt < 64; ++attempt) {
    const std::string tmp =
        absl::StrCat(target, ".tmp.", ::getpid(), ".", counter++);
    const int fd =
        ::open(tmp.c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) return std::make_pair(fd, tmp);
    if (errno != EEXIST) return Errno("cannot create", tmp);
  }
  return absl::AlreadyExistsError(absl::StrCat(
      "cannot create a temporary file beside ", target,
      ": 64 candidate names already exist (someone is planting them?)"));
}

// Why writing through the symlink `link` (lstat'ed into `st`) could be
// another user's doing, or "": a link owned by someone other than this
// user and root, or one in a directory others can write to (anyone could
// have made it there: /tmp's run.ckpt -> a root-only file), is not
// followed.
std::string UntrustedLink(const std::string& link, const struct stat& st) {
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return absl::StrCat("it is owned by another user (uid ", st.st_uid, ")");
  }
  const size_t slash = link.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : link.substr(0, slash);
  struct stat dir_st;
  if (::stat(dir.c_str(), &dir_st) != 0)
    return absl::StrCat("its directory ", dir, " cannot be inspected");
  if (dir_st.st_mode & (S_IWGRP | S_IWOTH)) {
    return absl::StrCat("it sits in ", dir,
                        ", which its group or every user can write to");
  }
  return "";
}

}  // namespace

absl::StatusOr<std::string> ResolveWriteTarget(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty file path");
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;  // A new file.
    return Errno("cannot inspect", path);
  }
  std::string target = path;
  if (S_ISLNK(st.st_mode)) {
    // Every link on the way must be one this user could have made alone.
    std::string link = path;
    struct stat link_st = st;
    for (int hops = 0; S_ISLNK(link_st.st_mode); ++hops) {
      if (const std::string why = UntrustedLink(link, link_st); !why.empty()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "refusing to write through the symlink ", link, ": ", why,
            " (the kernel's protected_symlinks rule, which mixrt keeps "
            "itself); write to the file's own path, or replace the link"));
      }
      char next[PATH_MAX];
      const ssize_t n = ::readlink(link.c_str(), next, sizeof(next) - 1);
      if (n < 0 || hops > 40) break;  // realpath below reports it.
      next[n] = '\0';
      const size_t slash = link.rfind('/');
      link = next[0] == '/' || slash == std::string::npos
                 ? std::string(next)
                 : absl::StrCat(link.substr(0, slash + 1), next);
      if (::lstat(link.c_str(), &link_st) != 0) break;
    }
    char resolved[PATH_MAX];
    if (::realpath(path.c_str(), resolved) == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "refusing to write ", path,
          ": it is a symlink whose target cannot be resolved (",
          std::strerror(errno), "); remove the link or point it at a file"));
    }
    target = resolved;
    if (::stat(target.c_str(), &st) != 0)
      return Errno("cannot inspect", target);
  }
  if (!S_ISREG(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing to write ", path,
        target == path ? "" : absl::StrCat(" (-> ", target, ")"), ": it is ",
        kind, "; only a regular file or a new path is replaced"));
  }
  return target;
}

absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data, int mode,
                                 const VerifyFn& verify) {
  absl::StatusOr<std::string> target = ResolveWriteTarget(path);
  if (!target.ok()) return target.status();
  RemoveStaleTemporaries(*target);
  absl::StatusOr<std::pair<int, std::string>> created =
      CreateTemporary(*target);
  if (!created.ok()) return created.status();
  const auto [fd, tmp] = *created;
  absl::Status status = WriteAll(fd, data, tmp);
  if (status.ok() &&
      ::fchmod(fd, static_cast<mode_t>(mode) & ~CurrentUmask()) != 0) {
    status = Errno("cannot set the mode of", tmp);
  }
  if (status.ok() && ::fsync(fd) != 0) status = Errno("cannot fsync", tmp);
  ::close(fd);
  if (status.ok() && verify) status = verify(tmp);
  if (status.ok() && ::rename(tmp.c_str(), target->c_str()) != 0) {
    status = Errno("cannot rename into", *target);
  }
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  const int dfd =
      ::open(DirectoryOf(*target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // Makes the rename itself durable.
    ::close(dfd);
  }
  return absl::OkStatus();
}

int RemoveStaleTemporaries(const std::string& path) {
  const std::string dir = DirectoryOf(path);
  const std::string prefix = BaseName(path) + ".tmp.";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(d)) {
    absl::string_view name = entry->d_name;
    if (!absl::ConsumePrefix(&name, prefix)) continue;
    const std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
    int pid = 0;
    if (parts.empty() || !absl::SimpleAtoi(parts[0], &pid) || pid <= 0) {
      continue;
    }
    // Alive, or not ours to judge (EPERM: another user's live process).
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;
    const std::string file = dir + "/" + std::string(entry->d_name);
    struct stat st;
    if (::lstat(file.c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    if (::unlink(file.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

absl::Status CheckCanCreate(const std::string& path) {
  if (path.empty()) return absl::InvalidArgumentError("empty file path");
  absl::StatusOr<std::string> target = ResolveWriteTarget(path);
  if (!target.ok()) return target.status();
  const std::string dir = DirectoryOf(*target);
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return Errno(absl::StrCat("cannot write ", path, ": its directory"), dir);
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write ", path, ": ", dir, " is not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    return Errno(absl::StrCat("cannot write ", path, ": directory"), dir);
  }
  return absl::OkStatus();
}

}  // namespace mixrt::files
