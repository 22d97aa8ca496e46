#include "tests/support/worker_process.h"

#include <signal.h>

namespace chimera::testing {

std::unique_ptr<net::ChildProcess> StartWorkerDaemon(const WorkerDaemon& daemon) {
  std::vector<std::string> argv = {daemon.binary,      "daemon",
                                   "--coordinator",    daemon.coordinator,
                                   "--worker-id",      daemon.worker_id,
                                   "--work-dir",       daemon.work_dir};
  argv.insert(argv.end(), daemon.flags.begin(), daemon.flags.end());
  return std::make_unique<net::ChildProcess>(argv, daemon.working_dir,
                                             daemon.log_file);
}

void StopProcesses(std::vector<std::unique_ptr<net::ChildProcess>>& processes,
                   absl::Duration timeout) {
  for (auto& process : processes) process->Signal(SIGTERM);
  for (auto& process : processes) process->Wait(timeout);
}

}  // namespace chimera::testing
