// Child processes for tests that drive the real executables. A child that
// outlives its deadline is killed, so a hung program fails its test instead
// of hanging the suite, and a ChildProcess kills its child when destroyed.
//
//   ProcessResult r = RunProcess({chimera_binary, "validate", "-f", file});
//   EXPECT_EQ(r.exit_code, 2);
//
//   ChildProcess server({coordinator_binary, "--listen", "127.0.0.1:0"});
//   absl::StatusOr<std::string> line = server.ReadLine(absl::Seconds(10));
//   server.Signal(SIGTERM);
//   EXPECT_EQ(server.Wait(absl::Seconds(10)), 0);
#ifndef CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_
#define CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace chimera::testing {

inline constexpr absl::Duration kDefaultProcessTimeout = absl::Seconds(60);

class ChildProcess {
 public:
  // Starts `argv` (argv[0] is the program's path) in `working_dir` (empty =
  // the test's own), with stdout and stderr captured.
  explicit ChildProcess(const std::vector<std::string>& argv,
                        const std::string& working_dir = "");
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }

  // The next line of stdout, without its newline. DEADLINE_EXCEEDED if none
  // comes in time, OUT_OF_RANGE if stdout closed first.
  absl::StatusOr<std::string> ReadLine(absl::Duration timeout);

  void Signal(int signal);

  // Collects the rest of stdout and stderr and waits for the exit. Returns
  // the exit status, 128 + signal if killed by one; kills the child (and
  // returns 128 + SIGKILL) if it is still running after `timeout`.
  int Wait(absl::Duration timeout);

  bool timed_out() const { return timed_out_; }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  // Reads what arrives on the open pipes until `done` says stop or the
  // deadline passes; false on deadline.
  template <typename Done>
  bool Pump(absl::Time deadline, Done done);

  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  size_t out_consumed_ = 0;  // Bytes of out_ already returned by ReadLine.
  std::string out_;
  std::string err_;
  bool timed_out_ = false;
  int exit_code_ = -1;
};

struct ProcessResult {
  // The exit status; 128 + signal if killed by a signal; -1 if it could not
  // be started.
  int exit_code = -1;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// Runs `argv` to completion and returns what it printed.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& working_dir = "",
                         absl::Duration timeout = kDefaultProcessTimeout);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_
