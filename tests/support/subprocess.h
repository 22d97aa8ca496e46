// Runs a program as a child process and captures what it prints, for tests
// that drive the real executables. A child that outlives its deadline is
// killed, so a hung program fails its test instead of hanging the suite.
//
//   ProcessResult r = RunProcess({chimera_binary, "validate", "-f", file});
//   EXPECT_EQ(r.exit_code, 2);
#ifndef CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_
#define CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace chimera::testing {

inline constexpr absl::Duration kDefaultProcessTimeout = absl::Seconds(60);

struct ProcessResult {
  // The exit status; 128 + signal if killed by a signal; -1 if it could not
  // be started.
  int exit_code = -1;
  bool timed_out = false;
  std::string out;
  std::string err;
};

// `argv[0]` is the program's path. `working_dir` empty = the test's own.
ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& working_dir = "",
                         absl::Duration timeout = kDefaultProcessTimeout);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_SUBPROCESS_H_
