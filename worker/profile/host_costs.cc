#include "worker/profile/host_costs.h"

#include <ATen/ATen.h>
#include <time.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/host_cores.h"
#include "common/statistics.h"
#include "common/status_macros.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/harness/forked_ranks.h"
#include "worker/runtime/compute_threads.h"

namespace chimera::worker {
namespace {

constexpr absl::Duration kRunDeadline = absl::Minutes(5);
constexpr absl::Duration kOpTimeout = absl::Seconds(60);
// The MLP's width, as the quick start's model (hidden 64, 4x FFN).
constexpr int64_t kHidden = 64;
// MeasureHostCosts's op: about half a millisecond to a millisecond on a
// current core, as a small pipeline's ops.
constexpr int64_t kOpTokens = 256;
// A pipeline's activation message: the quick start's micro-batch (2 x 32
// tokens x hidden 64, float32) is 16 KiB.
constexpr int64_t kMessageFloats = 4096;
// Runs between a cold run and its hot one: the slow spell after a wake-up
// lasts about half a millisecond of work.
constexpr int kSettlingRuns = 3;
// Co-running processes start timing together this long after they are
// forked: long enough for every one to have warmed up.
constexpr auto kCoRunningStartDelay = std::chrono::milliseconds(300);

double CpuSeconds(clockid_t clock) {
  timespec now;
  ::clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * now.tv_nsec;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

// A forward and backward of the MLP over `tokens`, single-threaded.
class MlpRun {
 public:
  explicit MlpRun(int64_t tokens)
      : mlp_(torch::nn::Linear(kHidden, 4 * kHidden), torch::nn::GELU(),
             torch::nn::Linear(4 * kHidden, kHidden)),
        input_(torch::randn({tokens, kHidden})) {}

  // Seconds it took.
  double Once() {
    const auto start = std::chrono::steady_clock::now();
    mlp_->zero_grad();
    mlp_->forward(input_).sum().backward();
    return SecondsSince(start);
  }

 private:
  torch::nn::Sequential mlp_;
  at::Tensor input_;
};

// A private directory for the processes' result files, removed with it.
class ResultDirectory {
 public:
  ResultDirectory() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "chimera-host-costs-XXXXXX")
            .string();
    if (::mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~ResultDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ResultDirectory(const ResultDirectory&) = delete;
  ResultDirectory& operator=(const ResultDirectory&) = delete;

  // `name` inside it; INTERNAL where it could not be created.
  absl::StatusOr<std::string> File(const std::string& name) const {
    if (path_.empty()) {
      return absl::InternalError(
          absl::StrCat("cannot create a directory in ",
                       std::filesystem::temp_directory_path().string()));
    }
    return path_ + "/" + name;
  }

 private:
  std::string path_;
};

absl::Status WriteNumbers(const std::string& path,
                          const std::vector<double>& numbers) {
  std::ofstream file(path);
  for (const double number : numbers) file << number << "\n";
  return file.good() ? absl::OkStatus()
                     : absl::InternalError("cannot write " + path);
}

// One number per line from each of `files`.
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

// Keeps a core busy with the MLP until every file of `done` exists.
absl::Status Load(const std::vector<std::string>& done) {
  LimitComputeThreads(1);
  MlpRun mlp(kOpTokens);
  auto all_done = [&done] {
    return std::all_of(done.begin(), done.end(), [](const std::string& path) {
      return std::ifstream(path).good();
    });
  };
  while (!all_done()) mlp.Once();
  return absl::OkStatus();
}

// Runs `measure` as `measurers` processes, with one loading process per core
// beside them on a loaded host, until the measurers have written `results`.
absl::Status RunMeasurement(
    int measurers, HostLoad load, const std::vector<std::string>& results,
    const std::function<absl::Status(int rank, TcpRendezvous&)>& measure,
    const std::string& what) {
  const int loaders = load == HostLoad::kLoaded ? HostCores() : 0;
  for (const harness::RankExit& exit : harness::RunForkedRanks(
           measurers + loaders, kRunDeadline,
           [&](int rank, TcpRendezvous&rendezvous) {
             return rank < measurers ? measure(rank, rendezvous)
                                     : Load(results);
           })) {
    if (!exit.ok()) {
      return absl::InternalError(
          absl::StrCat("measuring ", what, ": process ", exit.rank, " failed"));
    }
  }
  return absl::OkStatus();
}

// The wake-up measurement's process: back to back and after a sleep.
absl::Status TimeWakeUps(int64_t tokens, const HostCostRuns& runs,
                         const std::string& out) {
  LimitComputeThreads(1);
  torch::manual_seed(0);
  MlpRun mlp(tokens);
  for (int i = 0; i < 10; ++i) mlp.Once();
  std::vector<double> hot, cold;
  for (int i = 0; i < runs.runs; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(runs.sleep_ms));
    cold.push_back(mlp.Once());
    for (int settle = 0; settle < kSettlingRuns; ++settle) mlp.Once();
    hot.push_back(mlp.Once());
  }
  return WriteNumbers(out, {Median(hot), Median(cold)});
}

// One rank of the message measurement: rank 0 sends to rank 1, which waits
// in its receive. The sender writes to `out`.0 the median seconds its Send
// call took and its process's CPU seconds per message outside those calls,
// the receiver to `out`.1 its process's CPU seconds per message.
absl::Status TimeMessages(int rank, TcpRendezvous& rendezvous,
                          const HostCostRuns& runs, const std::string& out) {
  LimitComputeThreads(1);
  GlooOptions gloo;
  gloo.rank = rank;
  gloo.world_size = 2;
  gloo.timeout = kOpTimeout;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(rendezvous, gloo));
  const at::Tensor tensor = at::zeros({kMessageFloats}, at::kFloat);
  const bool sender = rank == 0;
  std::vector<double> posting;
  double posting_cpu = 0;
  const double process_cpu_start = CpuSeconds(CLOCK_PROCESS_CPUTIME_ID);
  for (int i = 0; i < runs.runs; ++i) {
    if (!sender) {
      ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op, comm->Recv(tensor, 0, 0));
      RETURN_IF_ERROR(op->Wait(kOpTimeout));
      continue;
    }
    // The receiver is asleep in its receive by now, as in a pipeline.
    std::this_thread::sleep_for(std::chrono::milliseconds(runs.sleep_ms));
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = CpuSeconds(CLOCK_THREAD_CPUTIME_ID);
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op, comm->Send(tensor, 1, 0));
    posting_cpu += CpuSeconds(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    posting.push_back(SecondsSince(start));
    RETURN_IF_ERROR(op->Wait(kOpTimeout));
  }
  const double cpu_per_message =
      (CpuSeconds(CLOCK_PROCESS_CPUTIME_ID) - process_cpu_start - posting_cpu) /
      runs.runs;
  const std::string path = absl::StrCat(out, ".", rank);
  return sender ? WriteNumbers(path, {Median(posting), cpu_per_message})
                : WriteNumbers(path, {cpu_per_message});
}

// One co-running process: warms up, waits for `start`, and writes the
// median seconds of its timed runs to `out`.RANK.
absl::Status TimeCoRunning(int rank,
                           std::chrono::system_clock::time_point start,
                           const HostCostRuns& runs, const std::string& out) {
  LimitComputeThreads(1);
  MlpRun mlp(kOpTokens);
  for (int i = 0; i < 10; ++i) mlp.Once();
  std::this_thread::sleep_until(start);
  std::vector<double> times;
  for (int i = 0; i < runs.runs; ++i) times.push_back(mlp.Once());
  return WriteNumbers(absl::StrCat(out, ".", rank), {Median(times)});
}

// The median over every process of `processes` computing at once.
absl::StatusOr<double> TimeTogether(int processes, const HostCostRuns& runs,
                                    const ResultDirectory& directory) {
  ASSIGN_OR_RETURN(const std::string out,
                   directory.File(absl::StrCat("co-running-", processes)));
  const auto start = std::chrono::system_clock::now() + kCoRunningStartDelay;
  std::vector<std::string> results;
  for (int rank = 0; rank < processes; ++rank) {
    results.push_back(absl::StrCat(out, ".", rank));
  }
  RETURN_IF_ERROR(RunMeasurement(
      processes, HostLoad::kAlone, results,
      [&](int rank, TcpRendezvous&) {
        return TimeCoRunning(rank, start, runs, out);
      },
      "co-running"));
  ASSIGN_OR_RETURN(const auto numbers, ReadNumbers(results));
  std::vector<double> medians;
  for (const auto& process : numbers) medians.push_back(process[0]);
  return Median(medians);
}

}  // namespace

const char* HostLoadName(HostLoad load) {
  return load == HostLoad::kAlone ? "alone" : "loaded";
}

absl::StatusOr<WakeUpTimes> MeasureWakeUp(int64_t tokens, HostLoad load,
                                          const HostCostRuns& runs) {
  const ResultDirectory directory;
  ASSIGN_OR_RETURN(const std::string out, directory.File("wake-up"));
  RETURN_IF_ERROR(RunMeasurement(
      1, load, {out},
      [&](int, TcpRendezvous&) { return TimeWakeUps(tokens, runs, out); },
      "the wake-up"));
  ASSIGN_OR_RETURN(const auto numbers, ReadNumbers({out}));
  if (numbers[0].size() < 2) return absl::DataLossError(out + " is short");
  return WakeUpTimes{numbers[0][0], numbers[0][1]};
}

absl::StatusOr<MessageCosts> MeasureMessageCosts(HostLoad load,
                                                 const HostCostRuns& runs) {
  const ResultDirectory directory;
  ASSIGN_OR_RETURN(const std::string out, directory.File("messages"));
  const std::vector<std::string> results = {out + ".0", out + ".1"};
  RETURN_IF_ERROR(RunMeasurement(
      2, load, results,
      [&](int rank, TcpRendezvous& rendezvous) {
        return TimeMessages(rank, rendezvous, runs, out);
      },
      "messages"));
  ASSIGN_OR_RETURN(const auto numbers, ReadNumbers(results));
  if (numbers[0].size() < 2) return absl::DataLossError(out + ".0 is short");
  return MessageCosts{numbers[0][0], numbers[0][1] + numbers[1][0]};
}

double CoRunningTimes::Slowdown() const {
  if (processes < 2 || alone <= 0) return 0;
  return std::max(0.0, (together / alone - 1) / (processes - 1));
}

absl::StatusOr<CoRunningTimes> MeasureCoRunning(const HostCostRuns& runs) {
  const ResultDirectory directory;
  CoRunningTimes times;
  times.processes = HostCores();
  ASSIGN_OR_RETURN(times.alone, TimeTogether(1, runs, directory));
  if (times.processes < 2) {
    times.together = times.alone;
    return times;
  }
  ASSIGN_OR_RETURN(times.together,
                   TimeTogether(times.processes, runs, directory));
  return times;
}

absl::StatusOr<chimera::v1::HostCosts> MeasureHostCosts(
    const HostCostRuns& runs, int repeats) {
  if (repeats < 1 || runs.runs < 1 || runs.sleep_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("host cost measurements need repeats >= 1 (got ", repeats,
                     "), runs >= 1 (got ", runs.runs,
                     ") and sleep_ms >= 0 (got ", runs.sleep_ms, ")"));
  }
  // Repeats interleave the measurements, so that a spell of a slower host
  // moves each figure by one sample at most.
  std::vector<double> wake_up, posting, receiving, co_running;
  for (int repeat = 0; repeat < repeats; ++repeat) {
    ASSIGN_OR_RETURN(const WakeUpTimes wake,
                     MeasureWakeUp(kOpTokens, HostLoad::kAlone, runs));
    wake_up.push_back(wake.Cost());
    ASSIGN_OR_RETURN(const MessageCosts messages,
                     MeasureMessageCosts(HostLoad::kLoaded, runs));
    posting.push_back(messages.posting);
    receiving.push_back(messages.receiving);
    ASSIGN_OR_RETURN(const CoRunningTimes together, MeasureCoRunning(runs));
    co_running.push_back(together.Slowdown());
  }
  chimera::v1::HostCosts costs;
  costs.set_wake_up_seconds(std::max(0.0, Median(wake_up)));
  costs.set_message_post_seconds(std::max(0.0, Median(posting)));
  costs.set_message_receive_seconds(std::max(0.0, Median(receiving)));
  costs.set_co_running_slowdown(Median(co_running));
  return costs;
}

}  // namespace chimera::worker
