#include "tests/support/subprocess.h"

namespace chimera::testing {

ProcessResult RunProcess(const std::vector<std::string>& argv,
                         const std::string& working_dir,
                         absl::Duration timeout) {
  net::ChildProcess child(argv, working_dir);
  ProcessResult result;
  if (!child.started()) return result;
  result.exit_code = child.Wait(timeout);
  result.timed_out = child.timed_out();
  result.out = child.out();
  result.err = child.err();
  return result;
}

}  // namespace chimera::testing
