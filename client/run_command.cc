#include "client/run_command.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/cli_errors.h"
#include "client/coordinator_client.h"
#include "client/exit_codes.h"
#include "client/job_follow.h"
#include "client/job_output.h"
#include "client/job_trace.h"
#include "client/local_host_costs.h"
#include "client/local_profile.h"
#include "client/structured_output.h"
#include "common/byte_size.h"
#include "common/host_cores.h"
#include "common/number_checks.h"
#include "common/status_macros.h"
#include "coordinator/coordinator_server.h"
#include "jobspec/job_file.h"
#include "net/child_process.h"
#include "nlohmann/json.hpp"
#include "planner/model_profile.h"
#include "planner/plan_params.h"

namespace chimera::client {
namespace {

// Local workers are on the same machine: short heartbeats find a dead one
// fast.
constexpr absl::Duration kHeartbeatPeriod = absl::Milliseconds(500);
constexpr int kHeartbeatFailureThreshold = 6;
constexpr absl::Duration kWorkerExitGrace = absl::Seconds(15);
// A local worker not registered by then failed to start (its log says why);
// loading LibTorch takes seconds on a slow machine.
constexpr absl::Duration kWorkerStartTimeout = absl::Seconds(60);

// `--trace` waits at most this long for its step (the coordinator's own
// limit on a TraceJob call is 10 minutes).
constexpr absl::Duration kRunTraceWait = absl::Minutes(10);

struct RunOptions {
  std::string file;
  // "text" or "json".
  std::string output = "text";
  bool keep_logs = false;
  // Where to write the trace of one step; empty: none.
  std::string trace;
  // The step to trace; -1: the next step once the job runs.
  int trace_step = -1;
  // A profile to plan a CPU job from; empty: measure (or reuse) this
  // machine's.
  std::string profile;
  // Plan from the analytic model and the coordinator's default host costs
  // instead.
  bool no_profile = false;
  // Measure the profile and the host costs again though they are cached.
  bool fresh_profile = false;
};

bool Json(const RunOptions& options) { return options.output == "json"; }

// Records one step of the job while it runs and writes it to
// `options.trace` (format from its extension); the status says how it went.
absl::Status TraceRun(CoordinatorClient& client, const std::string& id,
                      const RunOptions& options) {
  const std::optional<int> step = options.trace_step >= 0
                                      ? std::optional<int>(options.trace_step)
                                      : std::nullopt;
  ASSIGN_OR_RETURN(chimera::v1::JobTrace trace,
                   client.Trace(id, step, kRunTraceWait));
  RETURN_IF_ERROR(
      WriteTraceFile(trace, options.trace, TraceFormatOf(options.trace)));
  if (!Json(options)) {
    std::cout << "wrote the trace of step " << trace.step() << " to "
              << options.trace << std::endl;
  }
  return absl::OkStatus();
}

// The worker binary: $CHIMERA_WORKER_BINARY, else chimera-worker next to
// this executable.
std::string WorkerBinary() {
  const char* from_env = std::getenv("CHIMERA_WORKER_BINARY");
  if (from_env != nullptr && *from_env != '\0') return from_env;
  return (std::filesystem::read_symlink("/proc/self/exe").parent_path() / "chimera-worker")
      .string();
}

// The --profile given, checked against the job's model (exits 2 naming the
// file where it does not fit); none when not given.
std::optional<chimera::v1::ModelProfile> GivenProfile(
    const chimera::v1::TrainJob& manifest, const RunOptions& options) {
  if (options.profile.empty()) return std::nullopt;
  chimera::v1::ModelProfile profile;
  ExitOnFileErrors(
      options.profile,
      planner::LoadProfileFile(options.profile,
                               manifest.spec().model().num_layers(), &profile));
  return profile;
}

// A measurement of this machine for the planner, its log in the run
// directory; in text output `announcement` says when one starts.
MeasurementRequest AnnouncedRequest(const RunOptions& options,
                                    const std::string& log_file,
                                    const std::string& announcement) {
  const bool text = !Json(options);
  return {.worker_binary = WorkerBinary(),
          .log_file = log_file,
          .fresh = options.fresh_profile,
          .before_measuring = [text, announcement] {
            if (text) std::cout << announcement << std::endl;
          }};
}

// In text output, "WHAT (measured before on this machine)" or "WHAT
// (measured in 2.5 s)" since `start`.
void PrintMeasured(const RunOptions& options, const std::string& what,
                   const CachedFile& file, absl::Time start) {
  if (Json(options)) return;
  std::cout << what << " "
            << (file.cached ? "(measured before on this machine)"
                            : absl::StrFormat(
                                  "(measured in %.1f s)",
                                  absl::ToDoubleSeconds(absl::Now() - start)))
            << std::endl;
}

// What a job without --profile is planned from: for a CPU job its model as
// measured on this machine, for a GPU job or with --no-profile the analytic
// model (an empty profile).
chimera::v1::ModelProfile PlanningProfile(const chimera::v1::TrainJob& manifest,
                                          const RunOptions& options,
                                          const std::string& directory,
                                          const std::string& here) {
  const bool gpu = manifest.spec().resources().device() == "gpu";
  if (options.no_profile || gpu) return {};
  const absl::Time start = absl::Now();
  const auto local = ValueOrExit(MeasureOrReuseProfile(
      manifest, options.file, here,
      AnnouncedRequest(options, directory + "/profile.log",
                       "timing the model's layers on this machine for the "
                       "planner")));
  PrintMeasured(options, "profile: " + local.file.path, local.file, start);
  return local.value;
}

// What a cpu job's workers pay on this host beyond their compute, measured
// (or reused) unless --no-profile; none for a gpu job, whose workers the
// coordinator charges nothing of the kind.
std::optional<chimera::v1::HostCosts> PlanningHostCosts(
    const chimera::v1::TrainJob& manifest, const RunOptions& options,
    const std::string& directory) {
  if (options.no_profile || manifest.spec().resources().device() == "gpu") {
    return std::nullopt;
  }
  const absl::Time start = absl::Now();
  const auto local = ValueOrExit(MeasureOrReuseHostCosts(AnnouncedRequest(
      options, directory + "/host-costs.log",
      "measuring what a worker pays on this host beyond its compute, for the "
      "planner")));
  PrintMeasured(options, "host costs: " + FormatHostCosts(local.value),
                local.file, start);
  return local.value;
}

// The coordinator `chimera run` embeds: on loopback, its store in the run
// directory, planning cpu jobs with this host's `costs` where measured.
coordinator::CoordinatorOptions LocalCoordinatorOptions(
    const std::string& directory, int workers,
    const std::optional<chimera::v1::HostCosts>& costs) {
  coordinator::CoordinatorOptions options;
  options.listen = "127.0.0.1:0";
  options.database = directory + "/jobs.db";
  options.heartbeat.period = kHeartbeatPeriod;
  options.heartbeat.failure_threshold = kHeartbeatFailureThreshold;
  options.jobs.max_workers = workers;
  if (costs) {
    coordinator::LaunchOptions& launch = options.jobs.launch;
    launch.cpu_wake_up_seconds = costs->wake_up_seconds();
    launch.cpu_message_post_seconds = costs->message_post_seconds();
    launch.cpu_message_receive_seconds = costs->message_receive_seconds();
    launch.cpu_co_running_slowdown = costs->co_running_slowdown();
  }
  return options;
}

absl::StatusOr<std::string> MakeRunDirectory() {
  std::string pattern =
      (std::filesystem::temp_directory_path() / "chimera-run-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a directory like ", pattern));
  }
  return pattern;
}

// This host's GPUs, as the NVIDIA driver lists them (/dev/nvidia0, ...).
int CountLocalGpus() {
  std::error_code error;
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.rfind("nvidia", 0) == 0 &&
        std::all_of(name.begin() + 6, name.end(), ::isdigit)) {
      ++count;
    }
  }
  return count;
}

// The local workers a job runs on: its spec.resources.workers, or where it
// leaves them open one per GPU, or one per core (CPU workers may share
// cores: more where a fixed pipeline x data needs more).
absl::StatusOr<int> LocalWorkers(const chimera::v1::TrainJob& manifest, bool gpu) {
  if (!gpu) {
    const int cores = HostCores();
    return planner::WorkersToUse(manifest, std::max(cores, planner::MinimumWorkers(manifest)));
  }
  const int gpus = CountLocalGpus();
  if (manifest.spec().resources().workers() > 0) return manifest.spec().resources().workers();
  if (const int workers = planner::WorkersToUse(manifest, gpus); workers > 0) return workers;
  return absl::FailedPreconditionError(absl::StrCat(
      "spec.resources.workers: left open, and this host has ", gpus,
      " GPUs; the job's fixed spec.parallelism needs ", planner::MinimumWorkers(manifest)));
}

// Waits until the `count` local workers have registered, so that a worker
// that cannot start ends the run instead of leaving the job pending, and
// checks that each offers a GPU when the job needs one.
absl::Status AwaitLocalWorkers(CoordinatorClient& client, int count, bool gpu,
                               const std::string& directory) {
  const absl::Time deadline = absl::Now() + kWorkerStartTimeout;
  std::vector<chimera::v1::WorkerInfo> workers;
  while (true) {
    ASSIGN_OR_RETURN(workers, client.Workers());
    if (static_cast<int>(workers.size()) >= count) break;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          workers.size(), " of ", count, " local workers registered within ",
          absl::FormatDuration(kWorkerStartTimeout), "; their logs are in ", directory));
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  if (!gpu) return absl::OkStatus();
  for (const chimera::v1::WorkerInfo& worker : workers) {
    const bool has_gpu =
        std::any_of(worker.devices().begin(), worker.devices().end(),
                    [](const chimera::v1::Device& device) { return device.kind() == "gpu"; });
    if (!has_gpu) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spec.resources.device is gpu, but local worker ", worker.worker_id(),
          " offers no GPU: its chimera-worker was built against a CPU-only LibTorch, or this "
          "machine has fewer than ",
          count, " GPUs (one worker per GPU)"));
    }
  }
  return absl::OkStatus();
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
  std::cout << "\n"
            << FormatPredictedAgainstSteps(job, steps)
            << FormatMemoryAgainstMeasured(job);
  if (!job.workers().empty()) {
    std::cout << "per rank, in the last step:\n";
    std::cout << absl::StrFormat("%-5s %-10s %-8s %-10s %s\n", "RANK", "WORKER", "BUBBLE",
                                 "PREDICTED", "PEAK MEMORY");
    for (const auto& worker : job.workers()) {
      std::cout << absl::StrFormat("%-5d %-10s %-8.3f %-10s %s\n", worker.rank(),
                                   worker.worker_id(), worker.bubble_ratio(),
                                   FormatPredictedBubble(job, worker.rank()),
                                   FormatBytes(worker.peak_memory_bytes()));
    }
  }
}

int Run(const RunOptions& options) {
  chimera::v1::TrainJob manifest;
  ExitOnFileErrors(options.file, jobspec::LoadJobFile(options.file, {}, &manifest));
  if (!options.trace.empty()) {
    if (absl::Status writable = CheckTracePath(options.trace); !writable.ok()) {
      ExitWithError(absl::InvalidArgumentError(
          absl::StrCat("--trace: ", writable.message())));
    }
    const int steps = manifest.spec().training().max_steps();
    if (options.trace_step >= steps) {
      ExitWithError(absl::InvalidArgumentError(
          absl::StrCat("--trace-step: ", options.trace_step,
                       " is not a step of the job (it runs ", "steps 0 to ",
                       steps - 1, ")")));
    }
  }
  const bool gpu = manifest.spec().resources().device() == "gpu";
  const int workers = ValueOrExit(LocalWorkers(manifest, gpu));
  const std::optional<chimera::v1::ModelProfile> given =
      GivenProfile(manifest, options);
  std::error_code no_directory;
  const std::string here = std::filesystem::current_path(no_directory).string();
  if (no_directory) {
    ExitWithError(absl::FailedPreconditionError(absl::StrCat(
        "the current directory, where the job's paths lie, is gone: ",
        no_directory.message())));
  }
  const std::string directory = ValueOrExit(MakeRunDirectory());

  // Ctrl-C and SIGTERM are handled by one thread, which stops the job.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A reader of our output that goes away (`chimera run ... | head`) must
  // not kill this process before it has stopped the job: writes then fail,
  // and the following asks the signal thread to stop it.
  ::signal(SIGPIPE, SIG_IGN);

  // Timed before any worker starts, on a machine otherwise idle.
  const chimera::v1::ModelProfile profile =
      given ? *given : PlanningProfile(manifest, options, directory, here);
  const std::optional<chimera::v1::HostCosts> host_costs =
      PlanningHostCosts(manifest, options, directory);
  auto server = ValueOrExit(coordinator::CoordinatorServer::Start(
      LocalCoordinatorOptions(directory, workers, host_costs)));
  if (!Json(options)) {
    std::cout << "coordinator on " << server->address() << ", " << workers
              << " local workers, logs in " << directory << std::endl;
  }

  std::vector<std::unique_ptr<net::ChildProcess>> processes;
  const std::string binary = WorkerBinary();
  for (int i = 0; i < workers; ++i) {
    std::vector<std::string> argv = {binary,
                                     "daemon",
                                     "--coordinator",
                                     server->address(),
                                     "--worker-id",
                                     absl::StrCat("local-", i),
                                     "--work-dir",
                                     absl::StrCat(directory, "/worker-", i),
                                     // The job's paths are the submitter's.
                                     "--data-root",
                                     here,
                                     "--checkpoint-root",
                                     here};
    // One worker per GPU.
    if (gpu) argv.insert(argv.end(), {"--gpu", std::to_string(i)});
    processes.push_back(std::make_unique<net::ChildProcess>(
        argv, /*working_dir=*/"", absl::StrCat(directory, "/worker-", i, ".log")));
    if (!processes.back()->started()) {
      ExitWithError(absl::InternalError(absl::StrCat("cannot start ", binary)));
    }
  }

  ConnectionOptions connection;
  connection.address = server->address();
  auto client = ValueOrExit(CoordinatorClient::Connect(connection));
  const chimera::v1::Job submitted =
      ValueOrExit(client->Submit(manifest, profile));

  std::atomic<bool> interrupted{false};
  std::atomic<bool> output_closed{false};
  std::atomic<bool> done{false};
  std::thread stopper([&] {
    int signal = 0;
    sigwait(&signals, &signal);
    if (done) return;
    interrupted = true;
    std::cerr << "\n"
              << (output_closed ? "standard output closed" : "interrupted")
              << ": stopping job " << submitted.id() << "\n";
    (void)client->Stop(submitted.id());
  });
  // The trace call returns once its step is recorded or the job has ended.
  absl::Status traced;
  std::thread tracer;
  if (!options.trace.empty()) {
    tracer = std::thread(
        [&] { traced = TraceRun(*client, submitted.id(), options); });
  }
  const absl::Status ready = AwaitLocalWorkers(*client, workers, gpu, directory);
  if (!ready.ok()) (void)client->Stop(submitted.id());
  absl::StatusOr<chimera::v1::JobState> state =
      ready.ok() ? FollowJob(*client, submitted.id(),
                              {.follow = true,
                               .json = Json(options),
                               .announce_plan = true,
                               .on_output_closed =
                                   [&output_closed] {
                                     output_closed = true;
                                     ::kill(::getpid(), SIGTERM);
                                   }}) : ready;
  if (tracer.joinable()) tracer.join();
  const chimera::v1::Job final_job = client->Get(submitted.id()).value_or(submitted);
  std::vector<chimera::v1::StepSummary> history;
  (void)client->Watch(submitted.id(), /*follow=*/false,
                      [&history](const chimera::v1::JobEvent& event) {
                        if (event.has_step()) history.push_back(event.step());
                      });
  if (Json(options)) {
    std::cout << nlohmann::json({{"job", ToJsonValue(final_job)}}).dump() << std::endl;
  } else if (ready.ok()) {
    PrintSummary(final_job, history);
  }

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
  } else if (!succeeded) {
    std::cerr << "chimera run: the workers' logs and the job store are kept in "
              << directory << "\n";
  }
  if (!state.ok()) ExitWithError(state.status());
  if (output_closed) return kExitOutputClosed;
  if (interrupted) return kExitInterrupted;
  if (!traced.ok()) {
    std::cerr << "chimera: --trace: " << DescribeError(traced) << "\n";
    return kExitFailure;
  }
  return succeeded ? kExitOk : kExitFailure;
}

}  // namespace

void AddRunCommand(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* command = app.add_subcommand(
      "run",
      "Run a job on this machine: an embedded coordinator on loopback and the local "
      "workers it needs (one per GPU for gpu jobs). Follows the job, prints a summary "
      "and stops its workers (also on Ctrl-C); the run directory of worker logs is removed "
      "after a success and named on stderr otherwise. Exit 0 when the job succeeds, 1 when it fails or stops "
      "or its workers cannot run it, 2 for a bad job file, 130 when interrupted, 141 when "
      "its output was closed (the job is stopped).");
  command->add_option("-f,--file", options->file, "Job file (YAML)")->required();
  command
      ->add_option("-o,--output", options->output,
                   "text, or json: one JSON object per line, for the plan once the job "
                   "runs, each event, and last the job as it ended ({\"job\": ...})")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  command->add_flag_callback(
      "--json", [options] { options->output = "json"; }, "Same as -o json");
  command->add_flag("--keep-logs", options->keep_logs,
                    "Keep the run directory (worker logs, job store) after success");
  CLI::Option* trace = command->add_option(
      "--trace", options->trace,
      "Record one step on every rank and write it to this file: an SVG of "
      "the measured and the simulated timeline for FILE.svg, else a Chrome "
      "trace (as chimera trace writes them)");
  CLI::Option* profile = command->add_option(
      "--profile", options->profile,
      "Plan the job from this model profile (chimera-worker profile writes "
      "one). Without it a cpu job's model is timed on this machine first, "
      "once per model, worker build and host: the profile is cached in "
      "$XDG_CACHE_HOME/chimera/profiles (else ~/.cache/chimera/profiles). "
      "Either way a cpu job's planner also takes what a worker pays on this "
      "host beyond its compute (chimera-worker host-costs), measured once "
      "per host and worker build and cached in $XDG_CACHE_HOME/chimera/hosts");
  command
      ->add_flag("--no-profile", options->no_profile,
                 "Plan from the analytic model (a GPU's) and the "
                 "coordinator's default host costs instead of measuring this "
                 "machine, as gpu jobs do without --profile")
      ->excludes(profile);
  command->add_flag("--fresh-profile", options->fresh_profile,
                    "Time the model and this host's costs again though they "
                    "are cached (the host's alone with --profile)");
  command
      ->add_option("--trace-step", options->trace_step,
                   "The step --trace records (from 0; default: the next "
                   "step once the job runs)")
      ->check(kNonNegativeNumber)
      ->needs(trace);
  command->callback([options] {
    const int code = Run(*options);
    if (code != kExitOk) throw CLI::RuntimeError(code);
  });
}

}  // namespace chimera::client
