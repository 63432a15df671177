#include "core/plugin/isolated_probe.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "core/plugin/plugin_loader.h"

namespace mixrt {

absl::Status ProbePluginInChild(const std::string& path,
                                absl::Duration timeout) {
  int fds[2];
  if (pipe(fds) != 0) {
    return absl::InternalError(
        absl::StrCat("probe ", path, ": pipe: ", strerror(errno)));
  }
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return absl::InternalError(
        absl::StrCat("probe ", path, ": fork: ", strerror(errno)));
  }
  if (pid == 0) {
    // Child: load, report the outcome as text, and leave without running
    // the parent's atexit handlers or destructors.
    close(fds[0]);
    // The host's crash handlers (a crash reporter, a sanitizer) would turn
    // the plugin's fault into their own exit; the default action lets the
    // parent name the signal that killed the plugin.
    for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) signal(sig, SIG_DFL);
    absl::StatusOr<std::unique_ptr<Backend>> backend = LoadPlugin(path);
    const std::string message =
        backend.ok() ? "OK" : std::string(backend.status().message());
    ssize_t ignored = write(fds[1], message.data(), message.size());
    (void)ignored;
    _exit(backend.ok() ? 0 : 1);
  }
  close(fds[1]);
  std::string message;
  const absl::Time deadline = absl::Now() + timeout;
  bool timed_out = false;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) break;  // EOF: the child exited or closed the pipe.
    message.append(buffer, n);
  }
  close(fds[0]);
  if (timed_out) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return absl::DeadlineExceededError(
        absl::StrCat("plugin ", path, " did not finish loading within ",
                     absl::FormatDuration(timeout), " (killed)"));
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status)) {
    return absl::AbortedError(
        absl::StrCat("plugin ", path, " crashed with signal ", WTERMSIG(status),
                     " (", strsignal(WTERMSIG(status)), ") while loading"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && message == "OK") {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      message.empty() ? absl::StrCat("plugin ", path, " probe failed")
                      : message);
}

}  // namespace mixrt
