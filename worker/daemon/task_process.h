// The task process: one training task run in a child of the worker daemon,
// so that stopping it is a signal, a crash takes only the task down, and
// nothing of one task (threads, sockets, memory) outlives it.
//
// The daemon writes the StartTask (binary protobuf) to a file and runs
// `chimera-worker run-task FILE --host HOST --data-root DIR
// --checkpoint-root DIR`; the child reports on stdout, one event per line:
//   ready HOST:PORT STEP     rank 0's rendezvous store is up; every rank
//                            starts at STEP (the latest complete checkpoint)
//   step {WorkerStepMetrics as one-line JSON, with its timeline}
//   failed CODE MESSAGE      why it fails, with its absl::StatusCode as a
//                            number (then exit status 1)
// It exits 0 when every step is done. Stopping it is SIGTERM: a stopped
// job's half-done step is worth nothing, so it ends at once.
#ifndef CHIMERA_WORKER_DAEMON_TASK_PROCESS_H_
#define CHIMERA_WORKER_DAEMON_TASK_PROCESS_H_

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "chimera/v1/service.pb.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {

inline constexpr char kReadyEvent[] = "ready";
inline constexpr char kStepEvent[] = "step";
inline constexpr char kFailedEvent[] = "failed";

// What the daemon tells its task process (`run-task`'s arguments).
struct TaskProcessArgs {
  // The StartTask, as binary protobuf.
  std::string task_file;
  // The daemon's --host.
  std::string host;
  // The CUDA device of a gpu task.
  int gpu = 0;
  // The daemon's own canonical roots: the task's files lie under them.
  WorkerRoots roots;
  // The shared memory segment where the task publishes the op it runs
  // (OpPositionBoard); empty: nowhere.
  std::string position_segment;
};

// Runs the task `args` name in this process; returns the exit status.
int RunTaskProcess(const TaskProcessArgs& args, std::ostream& events);

// One parsed event line.
struct TaskEvent {
  std::string kind;
  std::string store_address;               // ready
  int64_t first_step = 0;                  // ready
  chimera::v1::WorkerStepMetrics metrics;  // step
  absl::Status failure;                    // failed
};
absl::StatusOr<TaskEvent> ParseTaskEvent(absl::string_view line);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_DAEMON_TASK_PROCESS_H_
