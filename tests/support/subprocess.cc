#include "tests/support/subprocess.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

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

std::string FindOnPath(const std::string& program) {
  const char* path = std::getenv("PATH");
  for (absl::string_view directory : absl::StrSplit(path ? path : "", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(directory, "/", program);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return program;
}

}  // namespace chimera::testing
