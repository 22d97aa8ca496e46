// chimera-worker: runs pipeline stages with LibTorch. As a daemon it serves
// a coordinator (--coordinator, see worker/daemon/worker_daemon.h); it also
// runs one rank of a job without a coordinator (--standalone, see
// worker/standalone/standalone.h) and reports what the machine offers
// (--devices):
//
//   chimera-worker --coordinator 127.0.0.1:50051 --worker-id host-0 [--gpu 1]
//       [--data-root /data --checkpoint-root /checkpoints]
//   chimera-worker --standalone --job examples/chimera.yaml --rank 0
//       --world 4 --store 127.0.0.1:29500 [--steps 20] [--resume]   # one per
//       rank
//
// and measures a job's per-layer costs for the planner (--profile, see
// worker/profile/profiler.h):
//
//   chimera-worker --profile --job job.yaml [--out profile.json]
//
// A job's data path and checkpoint directory are relative to --data-root and
// --checkpoint-root (default: the current directory), and may not leave them.
//
// Exit codes: 0 success, 1 the job failed while running, 2 bad flags or job,
// 3 (daemon) another daemon registered under this one's --worker-id, which
// this one must not take back: restarting it would only evict the other.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/build_info.h"
#include "common/byte_size.h"
#include "common/environment.h"
#include "common/logging.h"
#include "jobspec/job_file.h"
#include "net/metrics_server.h"
#include "nlohmann/json.hpp"
#include "net/server_address.h"
#include "net/tls_credentials.h"
#include "worker/daemon/local_devices.h"
#include "worker/daemon/task_process.h"
#include "worker/daemon/worker_daemon.h"
#include "worker/profile/profiler.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/task_options.h"
#include "worker/standalone/standalone.h"

namespace {

// What this machine offers, as text or (`json`) one JSON object.
void PrintDevices(bool json) {
  const chimera::worker::LocalResources resources =
      chimera::worker::DiscoverLocalResources();
  // NCCL serves only gpu tasks: it is on offer where this build can run them
  // and the machine has a GPU.
  const bool nccl =
      resources.nccl && chimera::worker::kWorkerHasGpuRuntime &&
      std::any_of(resources.devices.begin(), resources.devices.end(),
                  [](const auto& device) { return device.kind == "gpu"; });
  if (json) {
    nlohmann::json devices = nlohmann::json::array();
    for (const auto& device : resources.devices) {
      devices.push_back({{"kind", device.kind},
                         {"index", device.index},
                         {"name", device.name},
                         {"memoryBytes", device.memory_bytes}});
    }
    std::cout << nlohmann::json({{"node", resources.node},
                                 {"cpuCores", resources.cpu_cores},
                                 {"memoryBytes", resources.memory_bytes},
                                 {"communicators", nccl ? std::vector<std::string>{"gloo", "nccl"}
                                                        : std::vector<std::string>{"gloo"}},
                                 {"devices", devices}})
                     .dump(2)
              << "\n";
    return;
  }
  std::cout << "node " << resources.node << ", " << resources.cpu_cores
            << " CPU cores, " << chimera::FormatBytes(resources.memory_bytes)
            << " memory\n"
            << "communicators: gloo" << (nccl ? ", nccl" : "") << "\n";
  for (const auto& device : resources.devices) {
    std::cout << device.kind << ":" << device.index << " " << device.name << " "
              << chimera::FormatBytes(device.memory_bytes) << "\n";
  }
}

// The build and the LibTorch this process runs on (the one it was built
// against, unless the library path found another).
void PrintVersion(bool json) {
  const std::string runs_on =
      chimera::worker::DiscoverLocalResources().torch_version;
  if (json) {
    nlohmann::json build =
        nlohmann::json::parse(chimera::DescribeBuildAsJson("chimera-worker"));
    build["runsOnLibtorch"] = runs_on;
    std::cout << build.dump() << "\n";
    return;
  }
  std::cout << chimera::DescribeBuild("chimera-worker") << "; runs on LibTorch "
            << runs_on << "\n";
}

constexpr int kExitFailed = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitReplaced = 3;

int RunStandaloneMode(const chimera::worker::StandaloneFlags& flags) {
  for (const auto& [given, flag] :
       {std::pair<bool, const char*>{!flags.job_path.empty(), "--job"},
        {flags.rank >= 0, "--rank"},
        {flags.world > 0, "--world"},
        {!flags.store.empty(), "--store"}}) {
    if (!given) {
      std::cerr << "chimera-worker: " << flag
                << " is required with --standalone\n";
      return kExitBadInput;
    }
  }
  const auto run = chimera::worker::PrepareStandalone(flags);
  if (!run.ok()) {
    std::cerr << "chimera-worker: " << run.status().message() << "\n";
    return kExitBadInput;
  }
  const absl::Status status = chimera::worker::RunStandalone(*run, std::cout);
  if (!status.ok()) {
    std::cerr << "chimera-worker: rank " << flags.rank << ": "
              << status.message() << "\n";
    return kExitFailed;
  }
  return 0;
}

// Where the daemon serves /metrics (--metrics-listen, --metrics-public).
struct MetricsFlags {
  std::string listen;  // Empty: nowhere.
  chimera::net::MetricsServer::Reach reach = chimera::net::MetricsServer::Reach::kLoopbackOnly;
};

// Serves the coordinator (and /metrics as `metrics_flags` ask) until SIGINT or
// SIGTERM; its tasks' files lie under the roots.
int RunDaemon(chimera::worker::DaemonOptions options,
              chimera::net::ClientTlsFiles tls, const MetricsFlags& metrics_flags,
              const std::string& data_root, const std::string& checkpoint_root) {
  // Only the waiting thread sees the termination signals: they are blocked
  // before gRPC or anything else starts a thread, since threads inherit the
  // mask. A thread with SIGTERM unblocked used to take the signal that wakes
  // the waiter, and the daemon died of it without a word.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (const absl::Status valid =
          chimera::net::ParseDialAddress(options.coordinator).status();
      !valid.ok()) {
    std::cerr << "chimera-worker: --coordinator: " << valid.message() << "\n";
    return kExitBadInput;
  }
  // Other workers dial it joined with a port; the coordinator refuses
  // anything else at registration.
  if (!chimera::net::IsHostNameOrAddress(options.host)) {
    std::cerr << "chimera-worker: --host: '" << absl::CHexEscape(options.host)
              << "' is not a host name or an IP address (no port, no brackets)\n";
    return kExitBadInput;
  }
  absl::StatusOr<chimera::worker::WorkerRoots> canonical =
      chimera::worker::WorkerRootsFrom(data_root, checkpoint_root);
  if (!canonical.ok()) {
    std::cerr << "chimera-worker: " << canonical.status().message() << "\n";
    return kExitBadInput;
  }
  options.roots = *std::move(canonical);
  CHIMERA_LOG(INFO) << "data root " << options.roots.data
                    << ", checkpoint root " << options.roots.checkpoints;
  if (options.worker_id.empty()) {
    options.worker_id = absl::StrCat(
        chimera::worker::DiscoverLocalResources().node, "-", ::getpid());
  }
  options.task_binary =
      std::filesystem::read_symlink("/proc/self/exe").string();
  if (options.work_dir.empty()) {
    options.work_dir = (std::filesystem::temp_directory_path() /
                        absl::StrCat("chimera-worker-", ::getpid()))
                           .string();
  }
  std::error_code error;
  std::filesystem::create_directories(options.work_dir, error);
  if (error) {
    std::cerr << "chimera-worker: --work-dir " << options.work_dir << ": "
              << error.message() << "\n";
    return kExitBadInput;
  }
  options.token = chimera::OrEnvironment(options.token, "CHIMERA_WORKER_TOKEN");
  tls.ca = chimera::OrEnvironment(tls.ca, "CHIMERA_TLS_CA");
  tls.certificate = chimera::OrEnvironment(tls.certificate, "CHIMERA_TLS_CERT");
  tls.private_key = chimera::OrEnvironment(tls.private_key, "CHIMERA_TLS_KEY");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      chimera::net::ChannelCredentials(tls);
  if (!credentials.ok()) {
    std::cerr << "chimera-worker: " << credentials.status().message() << "\n";
    return kExitBadInput;
  }
  std::unique_ptr<chimera::net::MetricsServer> metrics;
  if (!metrics_flags.listen.empty()) {
    absl::StatusOr<std::unique_ptr<chimera::net::MetricsServer>> started =
        chimera::net::MetricsServer::Start(metrics_flags.listen, metrics_flags.reach);
    if (!started.ok()) {
      std::cerr << "chimera-worker: " << started.status().message() << "\n";
      return kExitBadInput;
    }
    metrics = *std::move(started);
    options.metrics_address = metrics->address();
    std::cout << "metrics on " << metrics->address() << std::endl;
  }
  chimera::worker::WorkerDaemon daemon(std::move(options),
                                       *std::move(credentials));
  if (metrics) metrics->Add(daemon.metrics());
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
  if (status.ok()) return 0;
  const int exit_code = absl::IsAlreadyExists(status) ? kExitReplaced : kExitFailed;
  CHIMERA_LOG(ERROR) << status.message() << "; this daemon exits with status " << exit_code;
  return exit_code;
}

int RunProfileMode(const std::string& job_path, const std::string& data_root,
                   int gpu_index, const std::string& out_path) {
  if (job_path.empty()) {
    std::cerr << "chimera-worker: --job is required with --profile\n";
    return kExitBadInput;
  }
  const auto job =
      chimera::jobspec::LoadJobFile(job_path, {.data_root = data_root});
  if (!job.ok()) {
    std::cerr << "chimera-worker: " << job.status().message() << "\n";
    return kExitBadInput;
  }
  const auto profile = chimera::worker::ProfileJob(*job, gpu_index);
  if (!profile.ok()) {
    std::cerr << "chimera-worker: profiling " << job_path << ": "
              << profile.status().message() << "\n";
    return kExitFailed;
  }
  const std::string json = chimera::worker::ProfileToJson(*profile);
  if (out_path.empty()) {
    std::cout << json;
    return 0;
  }
  std::ofstream out(out_path, std::ios::trunc);
  out << json;
  out.close();
  if (!out) {
    std::cerr << "chimera-worker: cannot write --out " << out_path << "\n";
    return kExitFailed;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chimera-worker: executes pipeline stages with LibTorch"};
  bool version = false;
  bool devices = false;
  app.add_flag("--version", version,
               "Print the version and the LibTorch it runs on");
  app.add_flag("--devices", devices,
               "Print the node, memory and devices this worker offers");
  std::string output = "text";
  app.add_option("-o,--output", output, "Format of --version and --devices: text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  bool standalone = false;
  chimera::worker::StandaloneFlags flags;
  app.add_flag("--standalone", standalone,
               "Run one rank of a job file without a coordinator");
  app.add_option("--job", flags.job_path, "Job file (standalone, profile)");
  app.add_option("--rank", flags.rank,
                 "This worker's rank, 0..world-1 (standalone)");
  app.add_option("--world", flags.world,
                 "Number of ranks: data x pipeline (standalone)");
  app.add_option(
      "--store", flags.store,
      "HOST:PORT of the rendezvous store; rank 0 serves it (standalone)");
  app.add_option("--steps", flags.steps,
                 "Steps to run; default spec.training.maxSteps (standalone)");
  app.add_option("--timeout", flags.timeout_seconds,
                 "Seconds any wait may take: the store, connecting, each "
                 "transfer and collective; a stopped peer is named once they "
                 "pass (standalone; default 300)");
  app.add_flag(
      "--resume", flags.resume,
      "Continue from the job's latest complete checkpoint (standalone); "
      "without it a run starts over and replaces the job's checkpoints");
  app.add_option("--data-root", flags.data_root,
                 "The directory job data paths are relative to; a job reads "
                 "nothing outside it (default: the current directory)");
  app.add_option("--checkpoint-root", flags.checkpoint_root,
                 "The directory job checkpoint directories are relative to; "
                 "a job writes nothing outside it (default: the current "
                 "directory)");
  chimera::worker::DaemonOptions daemon;
  app.add_option("--coordinator", daemon.coordinator,
                 "Serve the coordinator at HOST:PORT as a worker daemon");
  app.add_option("--worker-id", daemon.worker_id,
                 "Stable name of this worker (default: node-pid)");
  app.add_option("--node", daemon.node,
                 "Node (host) name reported to the coordinator");
  app.add_option("--host", daemon.host,
                 "Address other workers reach this one at (rendezvous, Gloo): "
                 "a host name or IP address, without a port")
      ->capture_default_str();
  app.add_option("--token", daemon.token,
                 "Join token (default: $CHIMERA_WORKER_TOKEN)");
  chimera::net::ClientTlsFiles tls;
  app.add_option("--tls-ca", tls.ca,
                 "PEM CA of a TLS coordinator (default: $CHIMERA_TLS_CA)");
  app.add_option("--tls-cert", tls.certificate,
                 "PEM client certificate, for a coordinator that requires one "
                 "(default: $CHIMERA_TLS_CERT)");
  app.add_option("--tls-key", tls.private_key,
                 "PEM private key of --tls-cert (default: $CHIMERA_TLS_KEY)");
  app.add_option(
      "--work-dir", daemon.work_dir,
      "Directory for task files and task logs (default: a temporary one)");
  std::string metrics_listen;
  app.add_option(
      "--metrics-listen", metrics_listen,
      "HOST:PORT for the daemon's Prometheus /metrics (port 0: any free one); "
      "default: none. Non-loopback hosts need --metrics-public");
  bool metrics_public = false;
  app.add_flag("--metrics-public", metrics_public,
               "Let --metrics-listen be beyond loopback: /metrics has no token "
               "and names jobs, workers and hosts");
  int gpu = -1;
  app.add_option("--gpu", gpu,
                 "CUDA device of gpu jobs: the daemon's one GPU (default 0; "
                 "run one daemon per GPU), a standalone rank's (default: "
                 "its rank), or the one --profile measures (default 0)");
  app.add_option("--gpu-transport", flags.gpu_transport,
                 "How a standalone gpu job's ranks exchange tensors: nccl "
                 "(default), or gloo staged through host memory, for ranks "
                 "that share one GPU");
  std::string task_file;
  app.add_option("--run-task", task_file,
                 "Internal: run one task (the daemon's task process)")
      ->group("");
  bool profile = false;
  std::string profile_out;
  app.add_flag("--profile", profile,
               "Measure the job's per-layer costs on its device (the CPU, "
               "or for a gpu job the --gpu GPU) and write a model profile");
  app.add_option("--out", profile_out,
                 "Profile file to write; default stdout (profile)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help is exit 0; every bad flag or value is 2, whatever CLI11 numbers.
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  if (gpu < -1) {
    std::cerr << "chimera-worker: --gpu is " << gpu
              << "; it must be a CUDA device index >= 0\n";
    return kExitBadInput;
  }
  flags.gpu = gpu;
  daemon.gpu = std::max(gpu, 0);
  if (!task_file.empty() || standalone || profile) {
    // These modes compute in this process: with OpenMP threads that sleep
    // when idle (a task process has that from its daemon already).
    chimera::worker::RestartWithEnvironment(
        chimera::worker::OpenMpWaitEnvironment(), argv);
  }
  if (!task_file.empty()) {
    // The daemon passes its own canonical roots.
    const chimera::worker::WorkerRoots roots{flags.data_root,
                                             flags.checkpoint_root};
    return chimera::worker::RunTaskProcess(task_file, daemon.host, daemon.gpu,
                                           roots, std::cout);
  }
  if (standalone) return RunStandaloneMode(flags);
  if (profile)
    return RunProfileMode(flags.job_path, flags.data_root, daemon.gpu,
                          profile_out);
  if (!daemon.coordinator.empty())
    return RunDaemon(std::move(daemon), std::move(tls),
                     {metrics_listen, metrics_public
                                          ? chimera::net::MetricsServer::Reach::kAnyone
                                          : chimera::net::MetricsServer::Reach::kLoopbackOnly},
                     flags.data_root, flags.checkpoint_root);
  if (version) PrintVersion(output == "json");
  if (devices) PrintDevices(output == "json");
  if (!version && !devices) {
    std::cout << app.help();
    return 2;
  }
  return 0;
}
