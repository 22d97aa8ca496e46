#include "net/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <iterator>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace chimera::net {
namespace {

// argv and the environment for execve, built before fork: after fork, the
// child of a threaded parent must not allocate.
class ExecArgs {
 public:
  ExecArgs(const std::vector<std::string>& argv,
           const ChildProcess::Environment& overrides) {
    for (const std::string& arg : argv)
      argv_.push_back(const_cast<char*>(arg.c_str()));
    argv_.push_back(nullptr);
    for (char** variable = environ; *variable != nullptr; ++variable) {
      const std::string entry = *variable;
      if (overrides.count(entry.substr(0, entry.find('='))) == 0) {
        environment_.push_back(entry);
      }
    }
    for (const auto& [name, value] : overrides) {
      environment_.push_back(name + "=" + value);
    }
    for (std::string& entry : environment_) envp_.push_back(entry.data());
    envp_.push_back(nullptr);
  }

  // In the forked child: becomes the program, or exits 127.
  [[noreturn]] void Exec(const std::string& working_dir) {
    // A child must not outlive its parent: a killed worker daemon takes its
    // task process along, a killed test its servers.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    // The parent may block signals to sigwait for them; the child starts clean.
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (!working_dir.empty() && ::chdir(working_dir.c_str()) != 0) _exit(127);
    ::execve(argv_[0], argv_.data(), envp_.data());
    _exit(127);
  }

 private:
  std::vector<char*> argv_;
  std::vector<std::string> environment_;
  std::vector<char*> envp_;
};

}  // namespace

ChildProcess::ChildProcess(const std::vector<std::string>& argv,
                           const std::string& working_dir,
                           const std::string& log_file,
                           const Environment& environment) {
  ExecArgs exec(argv, environment);
  if (!log_file.empty()) {
    const int log = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(log, STDOUT_FILENO);
      ::dup2(log, STDERR_FILENO);
      exec.Exec(working_dir);
    }
    ::close(log);
    return;
  }
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return;
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    exec.Exec(working_dir);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  out_fd_ = out_pipe[0];
  err_fd_ = err_pipe[0];
  if (pid_ < 0) {
    ::close(out_fd_);
    ::close(err_fd_);
    out_fd_ = err_fd_ = -1;
  }
}

ChildProcess::~ChildProcess() {
  if (pid_ > 0 && exit_code_ < 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  if (out_fd_ >= 0) ::close(out_fd_);
  if (err_fd_ >= 0) ::close(err_fd_);
}

template <typename Done>
bool ChildProcess::Pump(absl::Time deadline, Done done) {
  while (!done() && (out_fd_ >= 0 || err_fd_ >= 0)) {
    const int64_t wait_ms = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (wait_ms <= 0) return false;
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (::poll(fds, 2, static_cast<int>(wait_ms)) < 0 && errno != EINTR) {
      return false;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
        continue;
      }
      char buffer[4096];
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof(buffer));
      if (n > 0) {
        (i == 0 ? out_ : err_).append(buffer, static_cast<size_t>(n));
        if (err_.size() > kMaxCapturedErrBytes) {
          err_.erase(0, err_.size() - kMaxCapturedErrBytes);
        }
      } else if (n == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        (i == 0 ? out_fd_ : err_fd_) = -1;
      }
    }
  }
  return true;
}

absl::StatusOr<std::string> ChildProcess::ReadLine(absl::Duration timeout) {
  auto has_line = [this] {
    return out_.find('\n') != std::string::npos;
  };
  if (!Pump(absl::Now() + timeout, has_line)) {
    return absl::DeadlineExceededError("no line on stdout in time");
  }
  const size_t newline = out_.find('\n');
  if (newline == std::string::npos) {
    return absl::OutOfRangeError("stdout closed");
  }
  std::string line = out_.substr(0, newline);
  // Returned lines are dropped so a long-running child's output does not
  // pile up.
  out_.erase(0, newline + 1);
  return line;
}

void ChildProcess::Signal(int signal) {
  if (pid_ > 0 && exit_code_ < 0) ::kill(pid_, signal);
}

bool ChildProcess::Stopped() const {
  if (pid_ <= 0) return false;
  // "PID (COMMAND) STATE ...": the command may hold spaces and parentheses,
  // so the state follows the last ')'.
  std::ifstream stat(absl::StrCat("/proc/", pid_, "/stat"));
  const std::string line((std::istreambuf_iterator<char>(stat)),
                         std::istreambuf_iterator<char>());
  const size_t end = line.rfind(')');
  if (end == std::string::npos || end + 2 >= line.size()) return false;
  const char state = line[end + 2];
  return state == 'T' || state == 't';
}

int ChildProcess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  if (exit_code_ >= 0) return exit_code_;
  const absl::Time deadline = absl::Now() + timeout;
  if (!Pump(deadline, [] { return false; })) {
    timed_out_ = true;
    ::kill(pid_, SIGKILL);
  }
  // The pipes may close before the child exits; keep to the deadline.
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline && !timed_out_) {
      timed_out_ = true;
      ::kill(pid_, SIGKILL);
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return exit_code_;
}

}  // namespace chimera::net
