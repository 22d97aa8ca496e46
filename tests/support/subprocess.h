// Runs the real executables for tests and captures what they print. A child
// that outlives its deadline is killed, so a hung program fails its test
// instead of hanging the suite.
//
//   ProcessResult r = RunProcess({chimera_binary, "validate", "-f", file});
//   EXPECT_EQ(r.exit_code, 2);
#ifndef CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_
#define CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "net/child_process.h"

namespace chimera::testing {

using ::chimera::net::ChildProcess;

inline constexpr absl::Duration kDefaultProcessTimeout = absl::Seconds(60);

struct ProcessResult {
  // The exit status; 128 + signal if killed by a signal; -1 if it could not
  // be started.
  int exit_code = -1;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// The program of that name on $PATH, as a path argv[0] can be (processes
// start without a PATH search); `program` itself when it is on none.
std::string FindOnPath(const std::string& program);

// Runs `argv` to completion and returns what it printed.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& working_dir = "",
                         absl::Duration timeout = kDefaultProcessTimeout);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_
