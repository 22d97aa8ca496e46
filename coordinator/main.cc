// chimera-coordinator: accepts training jobs, plans them, drives the worker
// daemons and keeps every job in its SQLite store.
//
// Prints "listening on HOST:PORT" once ready (with --listen HOST:0 the port
// is the one the OS picked), and shuts down cleanly on SIGINT or SIGTERM.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "common/build_info.h"
#include "common/logging.h"
#include "common/number_checks.h"
#include "coordinator/coordinator_server.h"
#include "net/metrics_flags.h"
#include "net/open_file_limit.h"

namespace {

// Blocks until SIGINT or SIGTERM; both must be blocked in every thread.
int WaitForTerminationSignal(const sigset_t& signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

std::string FromEnvironment(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

// Flags given in seconds or bytes/s that CoordinatorOptions holds otherwise.
struct UnitFlags {
  double heartbeat_period = 1.0;
  double heartbeat_timeout = 5.0;
  double rendezvous_timeout = 60.0;
  double progress_timeout = 60.0;
  double readopt_timeout = 15.0;
  double planning_timeout = 10.0;
  double forget_dead_workers_after = 600.0;
  double link_bandwidth = chimera::coordinator::kDefaultLinkBandwidth;
  double link_latency = chimera::coordinator::kDefaultLinkLatencySeconds;
  double link_collective_latency =
      chimera::coordinator::kDefaultLinkCollectiveLatencySeconds;
};

// How workers and running jobs are watched.
void AddLivenessFlags(CLI::App* app,
                      chimera::coordinator::CoordinatorOptions* options,
                      UnitFlags* units) {
  app->add_option("--heartbeat-period", units->heartbeat_period,
                  "Seconds between worker heartbeats")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
  app->add_option("--heartbeat-timeout", units->heartbeat_timeout,
                  "Deadline of one heartbeat, seconds")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
  app->add_option("--heartbeat-failure-threshold",
                  options->heartbeat.failure_threshold,
                  "Missed periods after which a worker is dead")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app->add_option("--forget-dead-workers-after", units->forget_dead_workers_after,
                  "Seconds a dead worker stays listed before it is forgotten")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--rendezvous-timeout", units->rendezvous_timeout,
                  "Seconds rank 0 of a job has to host its rendezvous store")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
  app->add_option("--progress-timeout", units->progress_timeout,
                  "Seconds a running job's rank may report no step (or 10 "
                  "predicted step times, if longer; a run's first step may "
                  "take --rendezvous-timeout) before its run is lost "
                  "naming it as stalled (and the job leaves out the worker "
                  "of a rank that holds the others up)")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
  app->add_option("--readopt-timeout", units->readopt_timeout,
                  "Seconds a job found running at start waits for its "
                  "workers to register again with its tasks before it "
                  "restarts or fails naming the ranks that did not")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
}

// How jobs are admitted and planned.
void AddPlanningFlags(CLI::App* app,
                      chimera::coordinator::CoordinatorOptions* options,
                      UnitFlags* units) {
  app->add_option("--max-workers", options->jobs.max_workers,
                  "Most workers this coordinator will ever have; jobs needing "
                  "more are rejected at submit (0: no limit)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--planning-timeout", units->planning_timeout,
                  "Seconds the plan of a queued job may be searched before "
                  "the job fails saying so; the search runs beside the "
                  "liveness checks, never in their way")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
  app->add_option("--link-bandwidth", units->link_bandwidth,
                  "Bytes/s between workers, assumed when planning jobs that "
                  "leave parallelism open")
      ->check(chimera::kPositiveNumber)
      ->capture_default_str();
  app->add_option("--link-latency", units->link_latency,
                  "Seconds of latency between workers, assumed when planning")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--link-collective-latency", units->link_collective_latency,
                  "Seconds each step of an allreduce takes beyond its bytes, "
                  "assumed when planning (0: --link-latency)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--co-running-slowdown",
                  options->jobs.launch.cpu_co_running_slowdown,
                  "How much longer a CPU worker computes for each other worker "
                  "of its host computing at once, assumed when planning "
                  "(chimera-worker host-costs measures it)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--cpu-wake-up", options->jobs.launch.cpu_wake_up_seconds,
                  "Seconds a CPU worker's compute op loses after the worker "
                  "waited for a message, assumed when planning "
                  "(chimera-worker host-costs measures it)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--cpu-message-post",
                  options->jobs.launch.cpu_message_post_seconds,
                  "Seconds a CPU worker takes to post a message or begin an "
                  "allreduce, assumed when planning "
                  "(chimera-worker host-costs measures it)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  app->add_option("--cpu-message-receive",
                  options->jobs.launch.cpu_message_receive_seconds,
                  "Seconds of a core a message costs its CPU worker's host "
                  "beyond posting it, charged where it is received, assumed "
                  "when planning (chimera-worker host-costs measures it)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
}

// Who may call, over what, and where /metrics is served.
void AddAccessFlags(CLI::App* app,
                    chimera::coordinator::CoordinatorOptions* options) {
  chimera::net::AddMetricsFlags(app, "the coordinator's", &options->metrics);
  app->add_option("--client-token", options->client_token,
                  "Token clients must send (default: $CHIMERA_CLIENT_TOKEN); "
                  "at least 16 printable characters, not the worker token");
  app->add_option("--worker-token", options->worker_token,
                  "Token workers must send to join (default: "
                  "$CHIMERA_WORKER_TOKEN); at least 16 printable characters");
  app->add_option("--tls-cert", options->tls.certificate,
                  "PEM certificate chain for TLS");
  app->add_option("--tls-key", options->tls.private_key,
                  "PEM private key for TLS");
  app->add_option("--tls-client-ca", options->tls.client_ca,
                  "PEM CA that client and worker certificates must chain to "
                  "(mTLS)");
}

// Every flag, in the order --help lists them.
void AddFlags(CLI::App* app, chimera::coordinator::CoordinatorOptions* options,
              UnitFlags* units) {
  app->add_option("--listen", options->listen,
                  "HOST:PORT to serve on; port 0 picks a free port. "
                  "Non-loopback hosts need --client-token and --worker-token")
      ->capture_default_str();
  app->add_option("--db", options->database,
                  "SQLite job store (created if missing; ':memory:' keeps "
                  "nothing)")
      ->capture_default_str();
  app->add_option("--db-max-bytes", options->database_max_bytes,
                  "Most bytes the job store, file and write-ahead log "
                  "together, may grow to; a full store refuses new jobs "
                  "(RESOURCE_EXHAUSTED) and the ends of running ones are "
                  "recorded once there is room (0: as the disk allows)")
      ->check(chimera::kNonNegativeNumber)
      ->capture_default_str();
  AddLivenessFlags(app, options, units);
  AddPlanningFlags(app, options, units);
  AddAccessFlags(app, options);
}

void ApplyUnitFlags(const UnitFlags& units,
                    chimera::coordinator::CoordinatorOptions* options) {
  options->heartbeat.period = absl::Seconds(units.heartbeat_period);
  options->heartbeat.forget_dead_after = absl::Seconds(units.forget_dead_workers_after);
  options->heartbeat.timeout = absl::Seconds(units.heartbeat_timeout);
  options->jobs.rendezvous_timeout = absl::Seconds(units.rendezvous_timeout);
  options->jobs.progress_timeout = absl::Seconds(units.progress_timeout);
  options->jobs.readopt_timeout = absl::Seconds(units.readopt_timeout);
  options->jobs.planning_timeout = absl::Seconds(units.planning_timeout);
  for (auto* link : {options->jobs.launch.links.mutable_intra_node(),
                     options->jobs.launch.links.mutable_inter_node()}) {
    link->set_latency_seconds(units.link_latency);
    link->set_bandwidth_bytes_per_second(units.link_bandwidth);
    link->set_collective_latency_seconds(units.link_collective_latency);
  }
}

// Blocks SIGINT and SIGTERM in the calling thread and every thread it starts
// afterwards; returns them for WaitForTerminationSignal.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Serves until SIGINT or SIGTERM; returns the exit code (2: it could not
// start with these options: a bad or busy address, a job store it cannot
// open or that another coordinator holds).
int Serve(const chimera::coordinator::CoordinatorOptions& options,
          const sigset_t& signals) {
  // Every worker holds a connection: the usual soft limit would cap them.
  if (absl::StatusOr<uint64_t> open_files = chimera::net::RaiseOpenFileLimit();
      open_files.ok()) {
    CHIMERA_LOG(INFO) << "up to " << *open_files
                      << " open files (connections to workers and clients)";
  } else {
    CHIMERA_LOG(WARNING) << open_files.status();
  }
  auto server = chimera::coordinator::CoordinatorServer::Start(options);
  if (!server.ok()) {
    std::cerr << "chimera-coordinator: " << server.status().message() << "\n";
    return 2;
  }
  std::cout << "listening on " << (*server)->address() << std::endl;
  if (!(*server)->metrics_address().empty()) {
    std::cout << "metrics on " << (*server)->metrics_address() << std::endl;
  }
  const int signal = WaitForTerminationSignal(signals);
  CHIMERA_LOG(INFO) << "signal " << signal << ": shutting down";
  (*server)->Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  chimera::coordinator::CoordinatorOptions options;
  options.client_token = FromEnvironment("CHIMERA_CLIENT_TOKEN");
  options.worker_token = FromEnvironment("CHIMERA_WORKER_TOKEN");
  UnitFlags units;
  CLI::App app{
      "chimera-coordinator: accepts training jobs, plans them, drives the "
      "worker daemons "
      "and keeps every job in SQLite."};
  AddFlags(&app, &options, &units);
  bool version = false;
  std::string output = "text";
  app.add_flag("--version", version, "Print the version, commit, build type and LibTorch");
  app.add_option("-o,--output", output, "Format of --version: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (version) {
    std::cout << (output == "json" ? chimera::DescribeBuildAsJson("chimera-coordinator")
                                   : chimera::DescribeBuild("chimera-coordinator"))
              << "\n";
    return 0;
  }
  ApplyUnitFlags(units, &options);
  // Before gRPC starts its threads, so that only sigwait sees the signals.
  const sigset_t signals = BlockTerminationSignals();
  return Serve(options, signals);
}
