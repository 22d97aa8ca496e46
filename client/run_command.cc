#include "client/run_command.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "client/exit_codes.h"
#include "client/job_follow.h"
#include "client/job_output.h"
#include "common/child_process.h"
#include "coordinator/service/coordinator_server.h"
#include "jobspec/job_file.h"

namespace chimera::client {
namespace {

constexpr int kExitInterrupted = 130;
// Local workers are on the same machine: short heartbeats find a dead one
// fast.
constexpr absl::Duration kHeartbeatPeriod = absl::Milliseconds(500);
constexpr int kHeartbeatFailureThreshold = 6;
constexpr absl::Duration kWorkerExitGrace = absl::Seconds(15);

struct RunOptions {
  std::string file;
  bool json = false;
  bool keep_logs = false;
};

// The worker binary: $CHIMERA_WORKER_BINARY, else chimera-worker next to
// this executable.
std::string WorkerBinary() {
  const char* from_env = std::getenv("CHIMERA_WORKER_BINARY");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "chimera-worker")
      .string();
}

absl::StatusOr<std::string> MakeRunDirectory() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "chimera-run-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a directory like ", pattern));
  }
  return pattern;
}

void PrintSummary(const chimera::v1::Job& job, const std::vector<chimera::v1::StepSummary>& steps) {
  std::cout << "\njob " << job.id() << " " << JobStateName(job.status().state());
  if (!job.status().message().empty()) std::cout << ": " << job.status().message();
  std::cout << "\n";
  std::cout << absl::StrFormat("steps: %d/%d", job.status().completed_steps(),
                               job.manifest().spec().training().max_steps());
  if (!steps.empty()) {
    double samples_per_second = 0;
    for (const auto& step : steps) samples_per_second += step.samples_per_second();
    std::cout << absl::StrFormat("  first loss %.4f  final loss %.4f  mean samples/s %.1f",
                                 steps.front().loss(), steps.back().loss(),
                                 samples_per_second / steps.size());
  }
  std::cout << "\n";
  if (!job.workers().empty()) {
    std::cout << absl::StrFormat("%-5s %-10s %-8s %s\n", "RANK", "WORKER", "BUBBLE",
                                 "PEAK MEMORY");
    for (const auto& worker : job.workers()) {
      std::cout << absl::StrFormat("%-5d %-10s %-8.3f %s\n", worker.rank(), worker.worker_id(),
                                   worker.bubble_ratio(), FormatBytes(worker.peak_memory_bytes()));
    }
  }
}

int Run(const RunOptions& options) {
  chimera::v1::TrainJob manifest;
  ExitOnFileErrors(options.file, jobspec::LoadJobFile(options.file, {}, &manifest));
  const int workers = manifest.spec().resources().workers();
  if (manifest.spec().resources().device() == "gpu") {
    ExitWithError(absl::InvalidArgumentError(
        "spec.resources.device: 'gpu' jobs need GPU worker daemons; chimera run starts CPU "
        "workers"));
  }
  const std::string directory = ValueOrExit(MakeRunDirectory());

  // Ctrl-C and SIGTERM are handled by one thread, which stops the job.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  coordinator::CoordinatorOptions server_options;
  server_options.listen = "127.0.0.1:0";
  server_options.database = directory + "/jobs.db";
  server_options.heartbeat.period = kHeartbeatPeriod;
  server_options.heartbeat.failure_threshold = kHeartbeatFailureThreshold;
  server_options.jobs.max_workers = workers;
  auto server = ValueOrExit(coordinator::CoordinatorServer::Start(server_options));

  std::vector<std::unique_ptr<ChildProcess>> processes;
  const std::string binary = WorkerBinary();
  for (int i = 0; i < workers; ++i) {
    processes.push_back(std::make_unique<ChildProcess>(
        std::vector<std::string>{binary, "--coordinator", server->address(), "--worker-id",
                                 absl::StrCat("local-", i), "--work-dir",
                                 absl::StrCat(directory, "/worker-", i)},
        /*working_dir=*/"", absl::StrCat(directory, "/worker-", i, ".log")));
    if (!processes.back()->started()) {
      ExitWithError(absl::InternalError(absl::StrCat("cannot start ", binary)));
    }
  }
  if (!options.json) {
    std::cout << "coordinator on " << server->address() << ", " << workers
              << " local workers, logs in " << directory << std::endl;
  }

  ConnectionOptions connection;
  connection.address = server->address();
  auto client = ValueOrExit(CoordinatorClient::Connect(connection));
  const chimera::v1::Job submitted = ValueOrExit(client->Submit(manifest));

  std::atomic<bool> interrupted{false};
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (done) return;
    interrupted = true;
    std::cerr << "\ninterrupted: stopping job " << submitted.id() << "\n";
    (void)client->Stop(submitted.id());
  });
  absl::StatusOr<chimera::v1::JobState> state =
      FollowJob(*client, submitted.id(), /*follow=*/true, options.json);
  const chimera::v1::Job final_job = client->Get(submitted.id()).value_or(submitted);
  std::vector<chimera::v1::StepSummary> history;
  (void)client->Watch(submitted.id(), /*follow=*/false,
                      [&history](const chimera::v1::JobEvent& event) {
                        if (event.has_step()) history.push_back(event.step());
                      });
  if (!options.json) PrintSummary(final_job, history);

  // Clean up: workers first (they leave the coordinator), then the server.
  for (auto& process : processes) process->Signal(SIGTERM);
  for (auto& process : processes) process->Wait(kWorkerExitGrace);
  server->Shutdown();
  done = true;
  ::kill(::getpid(), SIGTERM);  // Wakes the signal thread if no signal came.
  stopper.join();

  const bool succeeded = state.ok() && *state == chimera::v1::JOB_STATE_SUCCEEDED;
  if (succeeded && !options.keep_logs) {
    std::error_code ignored;
    std::filesystem::remove_all(directory, ignored);
  }
  if (!state.ok()) ExitWithError(state.status());
  if (interrupted) return kExitInterrupted;
  return succeeded ? kExitOk : kExitFailure;
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand(
      "run",
      "Run a job on this machine: an embedded coordinator on loopback and the local CPU "
      "workers it needs. Follows the job, prints a summary, cleans up (also on Ctrl-C). "
      "Exit 0 when the job succeeds, 1 when it fails or stops, 2 for a bad job file, 130 "
      "when interrupted.");
  command->add_option("-f,--file", options->file, "Job file (YAML)")->required();
  command->add_flag("--json", options->json, "One JSON object per event instead of text");
  command->add_flag("--keep-logs", options->keep_logs,
                    "Keep the run directory (worker logs, job store) after success");
  command->callback([options] {
    const int code = Run(*options);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace chimera::client
