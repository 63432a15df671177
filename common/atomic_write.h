// Replacing a file so that a crash, a planted symlink or a concurrent writer
// never leaves a mix, redirects the write, or replaces something that is not
// a file.
//
// The data go to a temporary beside the target, created exclusively
// (O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600 until written), fsynced, then renamed
// over the target; the directory is fsynced so the rename is durable.
//
// Targets: an absent path or a regular file is replaced. A symlink writes
// through: the file it resolves to is replaced (beside it), so the link stays
// valid and points at the new content, but only a link owned by this user
// or root in a directory neither group nor others can write to (each link
// of a chain): a link another user could have planted (in /tmp, say) is
// refused, as the kernel's protected_symlinks would, whatever the sysctl
// says. Anything else (a directory, device, FIFO, socket, or a dangling
// link) is refused.
#ifndef MIXRT_COMMON_ATOMIC_WRITE_H_
#define MIXRT_COMMON_ATOMIC_WRITE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mixrt::files {

// Called with the temporary's path after it is written and fsynced, before
// the rename: a non-OK status abandons the write (the target is untouched).
using VerifyFn = std::function<absl::Status(const std::string& tmp_path)>;

// `mode` is the final permission bits, reduced by the process umask.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view data, int mode = 0644,
                                 const VerifyFn& verify = nullptr);

// The file a write to `path` replaces: `path` itself, or the target of the
// symlink it is. Refuses non-regular targets with a message naming them.
absl::StatusOr<std::string> ResolveWriteTarget(const std::string& path);

// Removes "<name>.tmp.<pid>.*" files beside `path` left by writers that
// died (their pid no longer runs); only files owned by this user. Returns
// how many were removed.
int RemoveStaleTemporaries(const std::string& path);

// OK when a file can be created in `path`'s directory (it exists, is a
// directory, and is writable and searchable by this process); otherwise
// says which of these fails. For checking a save path before training.
absl::Status CheckCanCreate(const std::string& path);

}  // namespace mixrt::files

#endif  // MIXRT_COMMON_ATOMIC_WRITE_H_
