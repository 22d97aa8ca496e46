// How many workers one coordinator holds. For each worker count, starts a
// chimera-coordinator process (loopback, in-memory store) and that many
// simulated workers, each as a real one is to the coordinator: its own
// connection, a registration, a heartbeat every period and an open
// assignment stream. With one job queued that waits for more workers than
// there are (so every scheduling tick looks at all of them), it measures
// for a while what the coordinator costs (CPU, threads, resident memory)
// and how fast it answers: heartbeats, `chimera workers` (ListWorkers) and
// `chimera status` (GetJob). Workers declared dead would mean the
// coordinator fell behind.
//
// With --followers, that many users also follow the queued job (`chimera
// submit` does), each with a WatchJob stream over its own connection.
//
//   coordinator_scale_benchmark [--workers 250,500,1000,2000] [--followers 0]
//                               [--seconds 20]
//
// A benchmark: it prints a markdown table (docs/operations.md), never passes
// or fails on time, and exits 1 only when it cannot set a run up.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "bench/open_streams.h"
#include "chimera/v1/service.grpc.pb.h"
#include "client/coordinator_client.h"
#include "common/status_macros.h"
#include "jobspec/job_file.h"
#include "net/open_file_limit.h"
#include "net/child_process.h"
#include "tests/support/free_port.h"
#include "tests/support/temp_dir.h"

namespace chimera::bench {
namespace {

constexpr absl::Duration kCallDeadline = absl::Seconds(10);
constexpr absl::Duration kStartDeadline = absl::Seconds(30);
// How often the measured window asks what a user's `chimera workers` and
// `chimera status` would (listing every worker costs the coordinator
// milliseconds per thousand).
constexpr absl::Duration kProbeInterval = absl::Milliseconds(500);
// Threads that send the simulated workers' heartbeats and registrations.
constexpr int kSenderThreads = 4;

std::unique_ptr<grpc::ClientContext> Deadlined() {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(absl::ToChronoTime(absl::Now() + kCallDeadline));
  return context;
}

// Milliseconds at the q-th quantile (0..1) of `samples`; 0 with none.
double QuantileMs(std::vector<absl::Duration> samples, double q) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const size_t index = std::min(
      samples.size() - 1, static_cast<size_t>(q * (samples.size() - 1) + 0.5));
  return absl::ToDoubleMilliseconds(samples[index]);
}

// Latencies recorded from several threads.
class Latencies {
 public:
  void Add(absl::Duration latency) {
    absl::MutexLock lock(&mutex_);
    samples_.push_back(latency);
  }
  std::vector<absl::Duration> Take() {
    absl::MutexLock lock(&mutex_);
    return std::move(samples_);
  }

 private:
  absl::Mutex mutex_;
  std::vector<absl::Duration> samples_ ABSL_GUARDED_BY(mutex_);
};

// What the coordinator process has used so far, from /proc.
struct ProcessUsage {
  double cpu_seconds = 0;
  int threads = 0;
  double resident_mib = 0;
};

ProcessUsage UsageOf(pid_t pid) {
  ProcessUsage usage;
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string field;
  // utime and stime are fields 14 and 15; the name (field 2) has no spaces
  // here.
  for (int i = 1; i <= 15 && stat >> field; ++i) {
    if (i >= 14) usage.cpu_seconds += std::stod(field) / sysconf(_SC_CLK_TCK);
  }
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string key;
  while (status >> key) {
    if (key == "Threads:") status >> usage.threads;
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      usage.resident_mib = kib / 1024;
    }
  }
  return usage;
}

// A stub over a connection of its own, as a client on its own host has:
// channels whose arguments differ share no connection.
template <typename Service>
std::unique_ptr<typename Service::Stub> OwnConnection(const std::string& address, int i) {
  grpc::ChannelArguments arguments;
  arguments.SetInt("chimera.bench_client", i);
  return Service::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), arguments));
}

// One simulated worker: its own connection; its assignment stream is read
// with every other's (OpenStreams).
struct SimulatedWorker {
  std::string id;
  uint64_t incarnation = 0;
  std::unique_ptr<chimera::v1::WorkerService::Stub> stub;
};

// N simulated workers registered with the coordinator at `address`, each
// heartbeating every `period` from its registration on, until destroyed.
class SimulatedWorkers {
 public:
  static absl::StatusOr<std::unique_ptr<SimulatedWorkers>> Start(
      const std::string& address, int count, absl::Duration period) {
    std::unique_ptr<SimulatedWorkers> workers(new SimulatedWorkers(period));
    absl::BitGen random;
    for (int i = 0; i < count; ++i) {
      auto worker = std::make_unique<SimulatedWorker>();
      worker->id = absl::StrCat("sim-", i);
      worker->incarnation = absl::Uniform<uint64_t>(random, 1, UINT64_MAX);
      worker->stub = OwnConnection<chimera::v1::WorkerService>(address, i);
      workers->workers_.push_back(std::move(worker));
    }
    for (int t = 0; t < kSenderThreads; ++t) {
      workers->senders_.emplace_back([raw = workers.get(), t] { raw->Send(t); });
    }
    RETURN_IF_ERROR(workers->AwaitRegistrations());
    return workers;
  }

  ~SimulatedWorkers() {
    stop_ = true;
    for (std::thread& sender : senders_) sender.join();
  }

  Latencies& heartbeat_latencies() { return heartbeats_; }

 private:
  explicit SimulatedWorkers(absl::Duration period) : period_(period) {}

  // Sender `t` looks after every kSenderThreads-th worker: once a period it
  // heartbeats those registered, after registering (and opening the streams
  // of) as many more as half a period allows.
  void Send(int t) {
    size_t next = t;
    while (!stop_) {
      const absl::Time round = absl::Now();
      for (; next < workers_.size() && absl::Now() - round < period_ / 2;
           next += kSenderThreads) {
        if (!RegisterAndOpenStream(*workers_[next])) return;
      }
      for (size_t i = t; i < next && !stop_; i += kSenderThreads) {
        Heartbeat(*workers_[i]);
      }
      absl::SleepFor(round + period_ - absl::Now());
    }
  }

  // False, with failure_ set, when the coordinator refused it.
  bool RegisterAndOpenStream(SimulatedWorker& worker) {
    const grpc::Status status = Register(worker);
    absl::MutexLock lock(&mutex_);
    if (!status.ok()) {
      failure_ = absl::UnavailableError(
          absl::StrCat(worker.id, ": ", status.error_message()));
      return false;
    }
    ++registered_;
    chimera::v1::WatchAssignmentsRequest request;
    request.set_worker_id(worker.id);
    request.set_incarnation(worker.incarnation);
    streams_.Open([&](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
      return worker.stub->PrepareAsyncWatchAssignments(context, request, queue);
    });
    return true;
  }

  absl::Status AwaitRegistrations() {
    absl::MutexLock lock(&mutex_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_) {
      return !failure_.ok() || registered_ == workers_.size();
    };
    mutex_.Await(absl::Condition(&done));
    return failure_;
  }

  static grpc::Status Register(const SimulatedWorker& worker) {
    chimera::v1::RegisterWorkerRequest request;
    request.set_worker_id(worker.id);
    request.set_incarnation(worker.incarnation);
    request.set_node(worker.id);
    request.set_host("127.0.0.1");
    request.set_memory_bytes(int64_t{16} << 30);
    request.set_cpu_cores(8);
    request.add_devices()->set_kind("cpu");
    chimera::v1::RegisterWorkerResponse response;
    return worker.stub->RegisterWorker(Deadlined().get(), request, &response);
  }

  void Heartbeat(const SimulatedWorker& worker) {
    chimera::v1::HeartbeatRequest beat;
    beat.set_worker_id(worker.id);
    beat.set_incarnation(worker.incarnation);
    chimera::v1::HeartbeatResponse ignored;
    const absl::Time sent = absl::Now();
    if (worker.stub->Heartbeat(Deadlined().get(), beat, &ignored).ok()) {
      heartbeats_.Add(absl::Now() - sent);
    }
  }

  const absl::Duration period_;
  std::vector<std::unique_ptr<SimulatedWorker>> workers_;
  // After workers_: destroyed first, it ends the streams.
  OpenStreams<chimera::v1::Assignment> streams_;
  std::vector<std::thread> senders_;
  std::atomic<bool> stop_{false};
  absl::Mutex mutex_;
  size_t registered_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::Status failure_ ABSL_GUARDED_BY(mutex_);
  Latencies heartbeats_;
};

// Users following the queued job as `chimera submit` does (a WatchJob
// stream each, over a connection of its own), every one answered.
class Followers {
 public:
  static absl::StatusOr<std::unique_ptr<Followers>> Start(const std::string& address,
                                                         const std::string& job_id,
                                                         int count) {
    auto followers = std::make_unique<Followers>();
    chimera::v1::WatchJobRequest request;
    request.set_job_id(job_id);
    for (int i = 0; i < count; ++i) {
      chimera::v1::JobService::Stub& stub = *followers->stubs_.emplace_back(
          OwnConnection<chimera::v1::JobService>(address, -1 - i));
      followers->streams_.Open([&](grpc::ClientContext* context, grpc::CompletionQueue* queue) {
        return stub.PrepareAsyncWatchJob(context, request, queue);
      });
    }
    const int answered = followers->streams_.AwaitAnswered(count, kStartDeadline);
    if (answered < count) {
      return absl::UnavailableError(absl::StrCat(
          "only ", answered, " of ", count, " followers had the job's status within ",
          absl::FormatDuration(kStartDeadline)));
    }
    return followers;
  }

 private:
  std::vector<std::unique_ptr<chimera::v1::JobService::Stub>> stubs_;
  // After stubs_: destroyed first, it ends the streams.
  OpenStreams<chimera::v1::JobEvent> streams_;
};

struct Flags {
  std::vector<int> workers = {250, 500, 1000, 2000};
  int followers = 0;
  double seconds = 20;
  double heartbeat_period = 1;
};

struct Row {
  int workers = 0;
  int followers = 0;
  double cpu_percent = 0;
  ProcessUsage usage;
  std::vector<absl::Duration> heartbeats, list_workers, get_job;
  int dead = 0;
};

// A job that waits for one worker more than there are.
absl::StatusOr<chimera::v1::TrainJob> WaitingJob(int workers) {
  jobspec::ValidationOptions options;
  options.check_data_files = false;
  ASSIGN_OR_RETURN(chimera::v1::TrainJob job,
                   jobspec::LoadJobFile(
                       std::string(CHIMERA_SOURCE_DIR) + "/examples/chimera.yaml",
                       options));
  job.mutable_spec()->clear_parallelism();
  job.mutable_spec()->mutable_resources()->set_workers(workers + 1);
  return job;
}

// The last `bytes` of the file at `path`.
std::string TailOf(const std::string& path, size_t bytes = 2000) {
  std::ifstream file(path);
  const std::string text((std::istreambuf_iterator<char>(file)),
                         std::istreambuf_iterator<char>());
  return text.substr(text.size() - std::min(text.size(), bytes));
}

// A chimera-coordinator process on a loopback port, its log in a file (as a
// service's is: it logs a line per registration, which a pipe nobody reads
// while it runs would soon stop), and a client that reached it.
struct RunningCoordinator {
  std::unique_ptr<net::ChildProcess> process;
  std::string address;
  std::unique_ptr<client::CoordinatorClient> client;
};

absl::StatusOr<RunningCoordinator> StartCoordinator(const Flags& flags,
                                                    const std::string& log) {
  RunningCoordinator coordinator;
  coordinator.address = absl::StrCat("127.0.0.1:", testing::FreePort());
  coordinator.process = std::make_unique<net::ChildProcess>(
      std::vector<std::string>{CHIMERA_COORDINATOR_BINARY, "--listen",
                               coordinator.address, "--db", ":memory:",
                               "--heartbeat-period",
                               absl::StrCat(flags.heartbeat_period)},
      "", log);
  client::ConnectionOptions connection;
  connection.address = coordinator.address;
  ASSIGN_OR_RETURN(coordinator.client,
                   client::CoordinatorClient::Connect(connection));
  const absl::Time deadline = absl::Now() + kStartDeadline;
  absl::Status reached = coordinator.client->Workers().status();
  while (!reached.ok() && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(100));
    reached = coordinator.client->Workers().status();
  }
  if (!reached.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the coordinator did not answer within ",
                     absl::FormatDuration(kStartDeadline), " (", reached.message(),
                     "); its log ends:\n", TailOf(log)));
  }
  return coordinator;
}

absl::StatusOr<Row> Measure(int count, const Flags& flags) {
  const testing::TempDir dir;
  const std::string log = dir.path() + "/coordinator.log";
  ASSIGN_OR_RETURN(RunningCoordinator coordinator, StartCoordinator(flags, log));
  client::CoordinatorClient& client = *coordinator.client;
  // The job and its followers first: this measures holding them all, not
  // thousands of clients connecting at once (on a small machine that storm
  // delays the workers' first heartbeats past the failure threshold).
  ASSIGN_OR_RETURN(chimera::v1::TrainJob manifest, WaitingJob(count));
  ASSIGN_OR_RETURN(chimera::v1::Job job, client.Submit(manifest));
  ASSIGN_OR_RETURN(std::unique_ptr<Followers> followers,
                   Followers::Start(coordinator.address, job.id(), flags.followers));
  const absl::Duration period = absl::Seconds(flags.heartbeat_period);
  absl::StatusOr<std::unique_ptr<SimulatedWorkers>> started =
      SimulatedWorkers::Start(coordinator.address, count, period);
  if (!started.ok()) {
    return absl::Status(started.status().code(),
                        absl::StrCat(started.status().message(),
                                     "; the coordinator's log ends:\n", TailOf(log)));
  }
  std::unique_ptr<SimulatedWorkers> workers = *std::move(started);

  Row row;
  row.workers = count;
  row.followers = flags.followers;
  // One heartbeat round to settle, then the measured window.
  absl::SleepFor(period);
  workers->heartbeat_latencies().Take();
  const pid_t pid = coordinator.process->pid();
  const ProcessUsage before = UsageOf(pid);
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(flags.seconds);
  for (absl::Time probe = start; probe < end; probe += kProbeInterval) {
    absl::SleepFor(probe - absl::Now());
    absl::Time sent = absl::Now();
    RETURN_IF_ERROR(client.Workers().status());
    row.list_workers.push_back(absl::Now() - sent);
    sent = absl::Now();
    RETURN_IF_ERROR(client.Get(job.id()).status());
    row.get_job.push_back(absl::Now() - sent);
  }
  row.usage = UsageOf(pid);
  row.cpu_percent = 100 * (row.usage.cpu_seconds - before.cpu_seconds) /
                    absl::ToDoubleSeconds(absl::Now() - start);
  row.heartbeats = workers->heartbeat_latencies().Take();
  ASSIGN_OR_RETURN(std::vector<chimera::v1::WorkerInfo> listed, client.Workers());
  for (const auto& worker : listed) {
    row.dead += worker.state() == chimera::v1::WORKER_STATE_DEAD;
  }
  followers.reset();
  workers.reset();
  coordinator.process->Signal(SIGTERM);
  coordinator.process->Wait(absl::Seconds(15));
  return row;
}

void PrintRow(const Row& row) {
  std::printf(
      "| %d | %d | %.1f | %d | %.0f | %.2f / %.2f | %.1f / %.1f | %.2f / %.2f | %d |\n",
      row.workers, row.followers, row.cpu_percent,
      row.usage.threads, row.usage.resident_mib,
      QuantileMs(row.heartbeats, 0.5), QuantileMs(row.heartbeats, 0.99),
      QuantileMs(row.list_workers, 0.5), QuantileMs(row.list_workers, 0.99),
      QuantileMs(row.get_job, 0.5), QuantileMs(row.get_job, 0.99), row.dead);
  std::fflush(stdout);
}

int Run(const Flags& flags) {
  // Each worker holds a connection here and one in the coordinator, which
  // raises its own limit.
  if (absl::StatusOr<uint64_t> limit = net::RaiseOpenFileLimit(); !limit.ok()) {
    std::fprintf(stderr, "%s\n", std::string(limit.status().message()).c_str());
    return 1;
  }
  std::printf(
      "Coordinator holding N workers (heartbeat every %g s, one assignment "
      "stream each, one job queued, followed by the users shown), measured "
      "over %g s; latencies p50 / p99 in ms\n\n",
      flags.heartbeat_period, flags.seconds);
  std::printf(
      "| workers | followers | coordinator CPU %% of a core | threads | RSS MiB "
      "| heartbeat | ListWorkers | GetJob | declared dead |\n"
      "|---|---|---|---|---|---|---|---|---|\n");
  for (int count : flags.workers) {
    absl::StatusOr<Row> row = Measure(count, flags);
    if (!row.ok()) {
      std::fprintf(stderr, "%d workers: %s\n", count,
                   std::string(row.status().message()).c_str());
      return 1;
    }
    PrintRow(*row);
  }
  return 0;
}

}  // namespace
}  // namespace chimera::bench

int main(int argc, char** argv) {
  chimera::bench::Flags flags;
  CLI::App app{"Measures what one coordinator costs, and how fast it answers, "
               "with N workers registered"};
  app.add_option("--workers", flags.workers, "Worker counts to measure")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  app.add_option("--followers", flags.followers,
                 "Users following the queued job (a WatchJob stream each)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  app.add_option("--seconds", flags.seconds, "Measured window per count")
      ->check(CLI::Range(1.0, 3600.0))
      ->capture_default_str();
  app.add_option("--heartbeat-period", flags.heartbeat_period,
                 "Seconds between each worker's heartbeats")
      ->check(CLI::Range(0.05, 60.0))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return chimera::bench::Run(flags);
}
