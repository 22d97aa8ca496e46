// What a CPU worker process pays on this host beyond its profiled compute,
// the two terms of the cluster model's device (proto/chimera/v1/cluster.proto)
// that docs/planner.md calls the wake-up and the posting cost:
//
// - wakeUpSeconds: how much longer a compute op runs right after its process
//   slept (as a pipeline rank sleeps in a receive) than back to back. A
//   forked, single-threaded process sleeps, then times a small MLP's
//   forward and backward, and again a few runs later, over and over.
// - messagePostSeconds: how long posting a Gloo send takes the sender, the
//   receiver waiting for it, as a pipeline's sends are posted.
// - messageReceiveSeconds: the CPU time a message costs both processes
//   (every thread: Gloo's I/O threads, the kernel's work on their behalf,
//   waking the receiver) beyond the sender's posting call.
//
// Both alone and on a loaded host (one busy process per core beside the
// measured ones), where a rank of a local job with more ranks than cores
// pays more for both; a cluster file takes the loaded figures for such
// workers.
//
//   host_costs_benchmark [--runs 100] [--sleep-ms 5]
//
// A benchmark: it prints markdown tables and the cluster file's three fields;
// it never passes or fails on time and exits 1 only when a run fails.
#include <ATen/ATen.h>
#include <time.h>
#include <torch/torch.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/pipeline_runs.h"
#include "common/status_macros.h"
#include "tests/support/temp_dir.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/harness/forked_ranks.h"
#include "worker/runtime/compute_threads.h"

namespace chimera::worker {
namespace {

constexpr absl::Duration kRunDeadline = absl::Minutes(5);
constexpr absl::Duration kOpTimeout = absl::Seconds(60);
// The MLP's width, as the quick start's model (hidden 64, 4x FFN).
constexpr int64_t kHidden = 64;
// Tokens per run: ops of about 0.1, 0.5 and 2 ms on a current core.
constexpr int64_t kTokenCounts[] = {64, 256, 1024};
// A pipeline's activation message: the quick start's micro-batch (2 x 32
// tokens x hidden 64, float32) is 16 KiB.
constexpr int64_t kMessageFloats = 4096;
// Runs between a cold run and its hot one: the slow spell after a wake-up
// lasts about half a millisecond of work.
constexpr int kSettlingRuns = 3;

struct Flags {
  int runs = 100;
  int sleep_ms = 5;
};

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

double CpuSeconds(clockid_t clock) {
  timespec now;
  ::clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * now.tv_nsec;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// The median seconds of a forward and backward of an MLP over `tokens` right
// after sleeping (cold) and a few runs later (hot), `runs` times: runs close
// in time, so that the host's speed, which drifts by tens of percent over
// seconds on a shared VM, cancels out.
std::pair<double, double> TimeMlp(int64_t tokens, const Flags& flags) {
  torch::manual_seed(0);
  torch::nn::Sequential mlp(torch::nn::Linear(kHidden, 4 * kHidden),
                            torch::nn::GELU(),
                            torch::nn::Linear(4 * kHidden, kHidden));
  const at::Tensor input = torch::randn({tokens, kHidden});
  auto run_once = [&] {
    const auto start = std::chrono::steady_clock::now();
    mlp->zero_grad();
    mlp->forward(input).sum().backward();
    return SecondsSince(start);
  };
  for (int i = 0; i < 10; ++i) run_once();
  std::vector<double> hot, cold;
  for (int i = 0; i < flags.runs; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(flags.sleep_ms));
    cold.push_back(run_once());
    for (int settle = 0; settle < kSettlingRuns; ++settle) run_once();
    hot.push_back(run_once());
  }
  return {Median(hot), Median(cold)};
}

// One process of the wake-up measurement: hot and cold seconds per token
// count, one number per line, to `out`.
absl::Status WakeUpProcess(const Flags& flags, const std::string& out) {
  LimitComputeThreads(1);
  std::ofstream file(out);
  for (int64_t tokens : kTokenCounts) {
    const auto [hot, cold] = TimeMlp(tokens, flags);
    file << hot << "\n" << cold << "\n";
  }
  return file.good() ? absl::OkStatus()
                     : absl::InternalError("cannot write " + out);
}

// One rank of the message measurement: even ranks send to the next odd one,
// which waits in its receive. A sender writes to `out`.RANK the median
// seconds its Send call took and its process's CPU seconds per message
// outside those calls, a receiver its process's CPU seconds per message.
absl::Status PostingRank(int rank, int world_size, TcpRendezvous& rendezvous,
                         const Flags& flags, const std::string& out) {
  LimitComputeThreads(1);
  GlooOptions gloo;
  gloo.rank = rank;
  gloo.world_size = world_size;
  gloo.timeout = kOpTimeout;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(rendezvous, gloo));
  const at::Tensor tensor = at::zeros({kMessageFloats}, at::kFloat);
  const bool sender = rank % 2 == 0;
  const int peer = sender ? rank + 1 : rank - 1;
  std::vector<double> posting;
  double posting_cpu = 0;
  const double process_cpu_start = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < flags.runs; ++i) {
    if (!sender) {
      ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                       comm->Recv(tensor, peer, 0));
      RETURN_IF_ERROR(op->Wait(kOpTimeout));
      continue;
    }
    // The receiver is asleep in its receive by now, as in a pipeline.
    std::this_thread::sleep_for(std::chrono::milliseconds(flags.sleep_ms));
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     comm->Send(tensor, peer, 0));
    posting_cpu += CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    posting.push_back(SecondsSince(start));
    RETURN_IF_ERROR(op->Wait(kOpTimeout));
  }
  const double process_cpu =
      CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start;
  const std::string path = absl::StrCat(out, ".", rank);
  std::ofstream file(path);
  if (sender) file << Median(posting) << "\n";
  file << (process_cpu - posting_cpu) / flags.runs << "\n";
  return file.good() ? absl::OkStatus()
                     : absl::InternalError("cannot write " + path);
}

// Reads one number per line from each of `files`.
absl::StatusOr<std::vector<std::vector<double>>> ReadNumbers(
    const std::vector<std::string>& files) {
  std::vector<std::vector<double>> all;
  for (const std::string& path : files) {
    std::ifstream file(path);
    std::vector<double>& values = all.emplace_back();
    for (double value; file >> value;) values.push_back(value);
    if (values.empty()) return absl::DataLossError(path + " is empty");
  }
  return all;
}

absl::Status CheckExits(const std::vector<harness::RankExit>& exits,
                        const std::string& what) {
  for (const harness::RankExit& exit : exits) {
    if (!exit.ok()) {
      return absl::InternalError(
          absl::StrCat(what, ": process ", exit.rank, " failed"));
    }
  }
  return absl::OkStatus();
}

// Keeps a core busy with the MLP until every file of `done` exists.
absl::Status Load(const std::vector<std::string>& done) {
  LimitComputeThreads(1);
  torch::nn::Sequential mlp(torch::nn::Linear(kHidden, 4 * kHidden),
                            torch::nn::GELU(),
                            torch::nn::Linear(4 * kHidden, kHidden));
  const at::Tensor input = torch::randn({256, kHidden});
  auto all_done = [&done] {
    return std::all_of(done.begin(), done.end(), [](const std::string& path) {
      return std::ifstream(path).good();
    });
  };
  while (!all_done()) {
    mlp->zero_grad();
    mlp->forward(input).sum().backward();
  }
  return absl::OkStatus();
}

// Whether a measurement runs alone on the host or beside one busy process
// per core, as ranks of a local job that outnumber its cores compute.
enum class Host { kAlone, kLoaded };

const char* HostName(Host host) {
  return host == Host::kAlone ? "alone" : "loaded";
}

// Runs `measure` as `measurers` processes, with one loading process per core
// beside them on a loaded host, until the measurers have written `results`.
absl::Status RunMeasurement(
    int measurers, Host host, const std::vector<std::string>& results,
    const std::function<absl::Status(int rank, TcpRendezvous&)>& measure,
    const std::string& what) {
  const int cores =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int loaders = host == Host::kLoaded ? cores : 0;
  return CheckExits(harness::RunForkedRanks(
                        measurers + loaders, kRunDeadline,
                        [&](int rank, TcpRendezvous& rendezvous) {
                          return rank < measurers ? measure(rank, rendezvous)
                                                  : Load(results);
                        }),
                    what);
}

// The wake-up cost of one process on `host`: a table row per token count.
// Returns the middle op size's.
absl::StatusOr<double> MeasureWakeUp(Host host, const Flags& flags) {
  const chimera::testing::TempDir dir;
  const std::string out = dir.path() + "/wake";
  RETURN_IF_ERROR(RunMeasurement(
      1, host, {out},
      [&](int, TcpRendezvous&) { return WakeUpProcess(flags, out); },
      "wake-up"));
  ASSIGN_OR_RETURN(const auto numbers, ReadNumbers({out}));
  double middle_extra = 0;
  for (size_t size = 0; size < std::size(kTokenCounts); ++size) {
    const double hot = numbers[0][2 * size];
    const double cold = numbers[0][2 * size + 1];
    if (size == 1) middle_extra = cold - hot;
    std::printf("| %s | %lld | %.1f | %.1f | %.1f |\n", HostName(host),
                static_cast<long long>(kTokenCounts[size]), 1e6 * hot,
                1e6 * cold, 1e6 * (cold - hot));
  }
  return middle_extra;
}

struct MessageCosts {
  double posting = 0;
  double receiving = 0;
};

// What a message costs one sender and its receiver on `host`: a table row.
absl::StatusOr<MessageCosts> MeasureMessages(Host host, const Flags& flags) {
  const chimera::testing::TempDir dir;
  const std::string out = dir.path() + "/post";
  const std::vector<std::string> results = {out + ".0", out + ".1"};
  RETURN_IF_ERROR(RunMeasurement(
      2, host, results,
      [&](int rank, TcpRendezvous& rendezvous) {
        return PostingRank(rank, 2, rendezvous, flags, out);
      },
      "posting"));
  ASSIGN_OR_RETURN(const auto numbers, ReadNumbers(results));
  if (numbers[0].size() < 2) return absl::DataLossError(out + ".0 is short");
  const MessageCosts costs{numbers[0][0], numbers[0][1] + numbers[1][0]};
  std::printf("| %s | %.1f | %.1f |\n", HostName(host), 1e6 * costs.posting,
              1e6 * costs.receiving);
  return costs;
}

// Prints `measure`'s rows alone and on a loaded host; returns the loaded
// figure.
template <typename Figure>
absl::StatusOr<Figure> OnBothHosts(
    absl::StatusOr<Figure> (*measure)(Host, const Flags&), const Flags& flags) {
  RETURN_IF_ERROR(measure(Host::kAlone, flags).status());
  return measure(Host::kLoaded, flags);
}

absl::Status Run(const Flags& flags) {
  const int cores =
      std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::printf(
      "%d cores; single-threaded processes; %d runs each, sleeping %d ms "
      "before each cold run and each send\n\n",
      cores, flags.runs, flags.sleep_ms);
  std::printf(
      "MLP forward and backward (hidden %lld, 4x FFN), median microseconds:\n\n"
      "| host | tokens | back to back | after a sleep | wake-up cost |\n"
      "|---|---|---|---|---|\n",
      static_cast<long long>(kHidden));
  ASSIGN_OR_RETURN(const double wake_up, OnBothHosts(MeasureWakeUp, flags));
  std::printf(
      "\nA Gloo send of %lld bytes on loopback, its receiver waiting, "
      "microseconds: the sender's posting call (median), and the CPU time of "
      "both processes per message beyond that call (mean):\n\n"
      "| host | posting cost | receiving cost |\n|---|---|---|\n",
      static_cast<long long>(4 * kMessageFloats));
  ASSIGN_OR_RETURN(const MessageCosts messages,
                   OnBothHosts(MeasureMessages, flags));
  std::printf(
      "\nFor a cluster file whose CPU workers outnumber this host's cores "
      "(the loaded rows):\n  device: {wakeUpSeconds: %.1e, messagePostSeconds: "
      "%.1e, messageReceiveSeconds: %.1e}\n",
      std::max(0.0, wake_up), std::max(0.0, messages.posting),
      std::max(0.0, messages.receiving));
  return absl::OkStatus();
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::bench::RestartWithSingleThreadedPools(argv);
  chimera::worker::Flags flags;
  CLI::App app{
      "What a CPU worker process loses after a sleep and a message costs its "
      "host, for a cluster file's wakeUpSeconds, messagePostSeconds and "
      "messageReceiveSeconds"};
  app.add_option("--runs", flags.runs, "Timed runs per measurement")
      ->check(CLI::Range(10, 100000));
  app.add_option("--sleep-ms", flags.sleep_ms,
                 "Milliseconds slept before each cold run and each send")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const absl::Status status = chimera::worker::Run(flags);
  if (!status.ok()) {
    std::fprintf(stderr, "host_costs_benchmark: %s\n",
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}
