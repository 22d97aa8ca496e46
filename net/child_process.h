// ChildProcess: a program run as a child with its stdout and stderr
// captured, for the CLI starting local workers, the worker daemon starting
// task processes, and tests driving the real executables. Every wait has a
// deadline, a ChildProcess kills its child when destroyed, and the child is
// killed when its parent dies, so no caller can hang on or leak a child.
//
//   ChildProcess server({coordinator_binary, "--listen", "127.0.0.1:0"});
//   absl::StatusOr<std::string> line = server.ReadLine(absl::Seconds(10));
//   server.Signal(SIGTERM);
//   int code = server.Wait(absl::Seconds(10));
#ifndef CHIMERA_NET_CHILD_PROCESS_H_
#define CHIMERA_NET_CHILD_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chimera::net {

class ChildProcess {
 public:
  // Variables the child's environment sets or replaces, name -> value.
  using Environment = std::map<std::string, std::string>;

  // Starts `argv` (argv[0] is the program's path) in `working_dir` (empty =
  // the caller's), with this process's environment and `environment` over
  // it. Its stdout and stderr are captured, or appended to `log_file` when
  // one is given (for long-lived children nobody reads).
  explicit ChildProcess(const std::vector<std::string>& argv,
                        const std::string& working_dir = "",
                        const std::string& log_file = "",
                        const Environment& environment = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // The next line of stdout, without its newline. DEADLINE_EXCEEDED if none
  // comes in time, OUT_OF_RANGE if stdout closed first.
  absl::StatusOr<std::string> ReadLine(absl::Duration timeout);

  void Signal(int signal);
  // Whether the child is stopped right now (SIGSTOP, a debugger), as /proc
  // says; false where it cannot tell.
  bool Stopped() const;

  // Collects the rest of stdout and stderr and waits for the exit. Returns
  // the exit status, 128 + signal if killed by one; kills the child (and
  // returns 128 + SIGKILL) if it is still running after `timeout`.
  int Wait(absl::Duration timeout);

  bool timed_out() const { return timed_out_; }
  pid_t pid() const { return pid_; }
  // Captured stdout not yet returned by ReadLine.
  const std::string& out() const { return out_; }
  // Captured stderr: its last kMaxCapturedErrBytes.
  const std::string& err() const { return err_; }

  static constexpr size_t kMaxCapturedErrBytes = 64 << 10;

 private:
  // Reads what arrives on the open pipes until `done` says stop or the
  // deadline passes; false on deadline.
  template <typename Done>
  bool Pump(absl::Time deadline, Done done);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_;
  std::string err_;
  bool timed_out_ = false;
  int exit_code_ = -1;
};

}  // namespace chimera::net

#endif  // CHIMERA_NET_CHILD_PROCESS_H_
