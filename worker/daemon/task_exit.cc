#include "worker/daemon/task_exit.h"

#include <signal.h>
#include <string.h>

#include <fstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace chimera::worker {
namespace {

// Exit statuses above this are 128 + the signal that killed the process.
constexpr int kSignalBase = 128;

std::string SignalName(int signal) {
  const char* abbreviation = sigabbrev_np(signal);
  return abbreviation == nullptr ? absl::StrCat("signal ", signal)
                                 : absl::StrCat("SIG", abbreviation);
}

}  // namespace

bool IsRetryable(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

TaskExit DescribeTaskExit(int exit_code,
                          const std::optional<absl::Status>& failure,
                          bool oom_killed) {
  if (failure) {
    return {std::string(failure->message()), IsRetryable(failure->code())};
  }
  if (exit_code > kSignalBase) {
    const int signal = exit_code - kSignalBase;
    std::string message =
        absl::StrCat("task process killed by signal ", signal, " (",
                     SignalName(signal), ")");
    if (oom_killed && signal == SIGKILL) {
      absl::StrAppend(&message,
                      ": out of memory (the kernel's OOM killer acted in "
                      "this worker's cgroup)");
    }
    return {message, true};
  }
  return {absl::StrCat("task process exited with status ", exit_code,
                       " without saying why"),
          true};
}

std::optional<int64_t> CgroupOomKills(const std::string& cgroup_root,
                                      const std::string& proc_self_cgroup) {
  // cgroup v2 has one line, "0::/path".
  std::ifstream membership(proc_self_cgroup);
  std::string line;
  std::string path;
  while (std::getline(membership, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "0::")) path = std::string(rest);
  }
  if (path.empty()) return std::nullopt;
  std::ifstream events(absl::StrCat(cgroup_root, path, "/memory.events"));
  while (std::getline(events, line)) {
    const std::vector<absl::string_view> words =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    int64_t count = 0;
    if (words.size() == 2 && words[0] == "oom_kill" &&
        absl::SimpleAtoi(words[1], &count)) {
      return count;
    }
  }
  return std::nullopt;
}

}  // namespace chimera::worker
