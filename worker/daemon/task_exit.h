// How a task process ended, as its worker tells the coordinator: what
// happened, in words a user can act on, and whether running the task again
// may succeed (ReportTaskStateRequest.retryable). A task that reports its
// own error says so with its status code on the event stream; a process
// that dies without one was killed or crashed, and the kernel may say it ran
// out of memory (the cgroup's memory.events counts its OOM kills).
//
//   const std::optional<int64_t> kills_before = CgroupOomKills();
//   ... run the task; failure = its "failed" event, if any ...
//   const TaskExit exit = DescribeTaskExit(
//       code, failure, CgroupOomKills() > kills_before);
#ifndef CHIMERA_WORKER_DAEMON_TASK_EXIT_H_
#define CHIMERA_WORKER_DAEMON_TASK_EXIT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"

namespace chimera::worker {

struct TaskExit {
  std::string message;
  bool retryable = false;
};

// Whether a task that failed with `code` may succeed when run again: a full
// disk, a peer or store that went away, a collective that timed out, a
// superseded attempt; not the task's own errors (bad data or spec, a
// mismatched checkpoint, a non-finite loss).
bool IsRetryable(absl::StatusCode code);

// A task process that exited with `exit_code` (128 + N when killed by
// signal N) after reporting `failure` (nullopt: it reported none);
// `oom_killed`: the kernel's OOM killer acted in the worker's cgroup
// meanwhile.
TaskExit DescribeTaskExit(int exit_code,
                          const std::optional<absl::Status>& failure,
                          bool oom_killed);

// The OOM kills counted in memory.events of this process's cgroup (v2)
// under `cgroup_root`; nullopt where that is not known (cgroup v1, no
// access).
std::optional<int64_t> CgroupOomKills(
    const std::string& cgroup_root = "/sys/fs/cgroup",
    const std::string& proc_self_cgroup = "/proc/self/cgroup");

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_TASK_EXIT_H_
