// chimera-worker daemons for tests that run jobs through a real
// coordinator: the command line written once.
//
//   workers_.push_back(StartWorkerDaemon({.binary = CHIMERA_WORKER_BINARY,
//                                         .coordinator = coordinator_->address(),
//                                         .worker_id = "w0",
//                                         .work_dir = dir_.path() + "/w0"}));
//   ...
//   StopProcesses(workers_);
#ifndef CHIMERA_TESTS_SUPPORT_WORKER_PROCESS_H_
#define CHIMERA_TESTS_SUPPORT_WORKER_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "net/child_process.h"

namespace chimera::testing {

struct WorkerDaemon {
  std::string binary;       // chimera-worker
  std::string coordinator;  // HOST:PORT
  std::string worker_id;
  std::string work_dir;     // Its task files and task logs.
  // Further flags: its roots, /metrics, TLS files.
  std::vector<std::string> flags;
  std::string working_dir;  // Empty: the test's own.
  std::string log_file;     // Empty: its output is kept in memory.
};

// Runs `binary daemon --coordinator ... --worker-id ... --work-dir ...
// flags...`; it registers on its own.
std::unique_ptr<net::ChildProcess> StartWorkerDaemon(const WorkerDaemon& daemon);

// Asks each process to stop (SIGTERM), then waits up to `timeout` for each
// (ChildProcess kills one still running when it goes).
void StopProcesses(std::vector<std::unique_ptr<net::ChildProcess>>& processes,
                   absl::Duration timeout = absl::Seconds(20));

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_WORKER_PROCESS_H_
