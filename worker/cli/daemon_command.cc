// `daemon`: serve a coordinator; `run-task`: one of its tasks, in the
// process the daemon starts for it.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/environment.h"
#include "common/logging.h"
#include "common/number_checks.h"
#include "common/status_macros.h"
#include "net/metrics_flags.h"
#include "net/server_address.h"
#include "net/tls_credentials.h"
#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"
#include "worker/cli/shared_flags.h"
#include "worker/daemon/local_devices.h"
#include "worker/daemon/task_process.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/runtime/blas_core.h"
#include "worker/runtime/compute_threads.h"

namespace chimera::worker::cli {
namespace {

struct DaemonFlags {
  DaemonOptions options;
  net::ClientTlsFiles tls;
  net::MetricsFlags metrics;
  std::string data_root;
  std::string checkpoint_root;
};

// Bad input as the daemon's exit status, said on stderr.
int BadInput(absl::string_view message) {
  std::cerr << "chimera-worker: " << message << "\n";
  return kExitBadInput;
}

// The flags' checks that need no file or network.
absl::Status CheckAddresses(const DaemonOptions& options) {
  if (const absl::Status valid = net::ParseDialAddress(options.coordinator).status();
      !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--coordinator: ", valid.message()));
  }
  // Other workers dial it joined with a port; the coordinator refuses
  // anything else at registration.
  if (!net::IsHostNameOrAddress(options.host)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--host: '", absl::CHexEscape(options.host),
        "' is not a host name or an IP address (no port, no brackets)"));
  }
  return absl::OkStatus();
}

// Fills in what the flags leave to the daemon: its roots (canonical), its
// id, the binary its task processes run, its work directory and token.
absl::Status CompleteOptions(DaemonFlags& flags) {
  DaemonOptions& options = flags.options;
  absl::StatusOr<WorkerRoots> roots =
      WorkerRootsFrom(flags.data_root, flags.checkpoint_root);
  if (!roots.ok()) return roots.status();
  options.roots = *std::move(roots);
  CHIMERA_LOG(INFO) << "data root " << options.roots.data
                    << ", checkpoint root " << options.roots.checkpoints;
  if (options.worker_id.empty()) {
    options.worker_id =
        absl::StrCat(DiscoverLocalResources().node, "-", ::getpid());
  }
  options.task_binary = std::filesystem::read_symlink("/proc/self/exe").string();
  if (options.work_dir.empty()) {
    options.work_dir = (std::filesystem::temp_directory_path() /
                        absl::StrCat("chimera-worker-", ::getpid()))
                           .string();
  }
  std::error_code error;
  std::filesystem::create_directories(options.work_dir, error);
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat("--work-dir ", options.work_dir, ": ", error.message()));
  }
  options.token = OrEnvironment(options.token, "CHIMERA_WORKER_TOKEN");
  flags.tls.ca = OrEnvironment(flags.tls.ca, "CHIMERA_TLS_CA");
  flags.tls.certificate = OrEnvironment(flags.tls.certificate, "CHIMERA_TLS_CERT");
  flags.tls.private_key = OrEnvironment(flags.tls.private_key, "CHIMERA_TLS_KEY");
  return absl::OkStatus();
}

// /metrics as the flags ask (nullptr when they do not), its address told to
// the daemon's options.
absl::StatusOr<std::unique_ptr<net::MetricsServer>> StartMetrics(
    DaemonFlags& flags) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::MetricsServer> metrics,
                   net::StartMetrics(flags.metrics));
  if (!metrics) return nullptr;
  flags.options.metrics_address = metrics->address();
  std::cout << "metrics on " << metrics->address() << std::endl;
  return metrics;
}

// Runs `daemon` until it ends or one of `signals` (blocked in every thread)
// arrives; the daemon's exit status.
int Serve(WorkerDaemon& daemon, const sigset_t& signals) {
  std::thread waiter([&daemon, signals] {
    int signal = 0;
    sigwait(&signals, &signal);
    daemon.Shutdown();
  });
  const absl::Status status = daemon.Run();
  // Wake the waiter if Run ended on its own: the waiter alone, whatever the
  // masks of threads that libraries started.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  if (status.ok()) return kExitOk;
  const int exit_code = absl::IsAlreadyExists(status) ? kExitReplaced : kExitFailed;
  CHIMERA_LOG(ERROR) << status.message() << "; this daemon exits with status "
                     << exit_code;
  return exit_code;
}

int RunDaemon(DaemonFlags& flags) {
  // Only the waiting thread sees the termination signals: they are blocked
  // before gRPC or anything else starts a thread, since threads inherit the
  // mask. A thread with SIGTERM unblocked used to take the signal that wakes
  // the waiter, and the daemon died of it without a word.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (absl::Status valid = CheckAddresses(flags.options); !valid.ok()) {
    return BadInput(valid.message());
  }
  if (absl::Status complete = CompleteOptions(flags); !complete.ok()) {
    return BadInput(complete.message());
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      net::ChannelCredentials(flags.tls);
  if (!credentials.ok()) return BadInput(credentials.status().message());
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> metrics = StartMetrics(flags);
  if (!metrics.ok()) return BadInput(metrics.status().message());
  WorkerDaemon daemon(std::move(flags.options), *std::move(credentials));
  if (*metrics) (*metrics)->Add(daemon.metrics());
  return Serve(daemon, signals);
}

void AddConnectionFlags(CLI::App* command, DaemonFlags& flags) {
  command->add_option("--coordinator", flags.options.coordinator,
                      "HOST:PORT of the coordinator to serve")
      ->required();
  command->add_option("--token", flags.options.token,
                      "Join token (default: $CHIMERA_WORKER_TOKEN)");
  command->add_option("--tls-ca", flags.tls.ca,
                      "PEM CA of a TLS coordinator (default: $CHIMERA_TLS_CA)");
  command->add_option("--tls-cert", flags.tls.certificate,
                      "PEM client certificate, for a coordinator that requires "
                      "one (default: $CHIMERA_TLS_CERT)");
  command->add_option("--tls-key", flags.tls.private_key,
                      "PEM private key of --tls-cert (default: $CHIMERA_TLS_KEY)");
}

void AddIdentityFlags(CLI::App* command, DaemonFlags& flags) {
  command->add_option("--worker-id", flags.options.worker_id,
                      "Stable name of this worker (default: node-pid)");
  command->add_option("--node", flags.options.node,
                      "Node (host) name reported to the coordinator");
  command->add_option("--host", flags.options.host,
                      "Address other workers reach this one at (rendezvous, "
                      "Gloo): a host name or IP address, without a port")
      ->capture_default_str();
  AddGpuFlag(command, &flags.options.gpu,
             "CUDA device of gpu jobs: this daemon's one GPU (run one daemon "
             "per GPU)");
  command
      ->add_option("--peak-flops", flags.options.peak_flops,
                   "Peak FLOP/s of the device it computes on (a CPU worker: "
                   "its share of the host), for jobs' model FLOPs "
                   "utilisation; default: a known GPU's dense bf16 peak, "
                   "else none")
      ->check(kPositiveNumber);
}

}  // namespace

void AddDaemonCommand(CLI::App& app, Invocation* invocation) {
  auto flags = std::make_shared<DaemonFlags>();
  CLI::App* command = app.add_subcommand(
      "daemon",
      "Serve a coordinator as a worker daemon: register, heartbeat, and run "
      "the tasks it assigns, each in a process of its own, until SIGINT or "
      "SIGTERM (exit 3: another daemon took this --worker-id)");
  AddConnectionFlags(command, *flags);
  AddIdentityFlags(command, *flags);
  command->add_option("--work-dir", flags->options.work_dir,
                      "Directory for task files and task logs (default: a "
                      "temporary one)");
  net::AddMetricsFlags(command, "the daemon's", &flags->metrics);
  AddRootFlags(command, &flags->data_root, &flags->checkpoint_root);
  command->callback([flags, invocation] {
    // Its task processes inherit its environment: the BLAS core settled here
    // is theirs.
    flags->options.blas_core = SettleBlasCore({}, invocation->argv);
    invocation->exit_code = RunDaemon(*flags);
  });
}

void AddRunTaskCommand(CLI::App& app, Invocation* invocation) {
  auto flags = std::make_shared<TaskProcessArgs>();
  CLI::App* command = app.add_subcommand(
      "run-task", "Internal: run one task, as the daemon's task process");
  command->group("");  // Not listed in --help.
  command->add_option("task-file", flags->task_file, "The daemon's task file")
      ->required();
  command->add_option("--host", flags->host, "The daemon's --host")->required();
  AddGpuFlag(command, &flags->gpu, "The daemon's --gpu");
  AddRootFlags(command, &flags->roots.data, &flags->roots.checkpoints);
  command->add_option("--position-segment", flags->position_segment,
                      "Where to publish the op the task runs");
  command->callback([flags, invocation] {
    // A task computes: with OpenMP threads that sleep when idle, on the BLAS
    // core the CPU calls for (its daemon set both already, so this rarely
    // restarts).
    SettleBlasCore(OpenMpWaitEnvironment(), invocation->argv);
    invocation->exit_code = RunTaskProcess(*flags, std::cout);
  });
}

}  // namespace chimera::worker::cli
