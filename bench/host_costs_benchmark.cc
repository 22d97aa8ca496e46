// What a CPU worker process pays on this host beyond its profiled compute,
// the CPU terms of the cluster model's device (proto/chimera/v1/cluster.proto)
// that docs/planner.md calls the wake-up, the posting, the receiving cost
// and the co-running slowdown (worker/profile/host_costs.h says how each is
// measured). The wake-up at three op sizes and the message costs alone and
// on a loaded host (one busy process per core beside the measured ones),
// where a rank of a local job with more ranks than cores pays more for
// both; a cluster file takes the loaded figures for such workers, and
// `chimera run` measures them with `chimera-worker host-costs`.
//
//   host_costs_benchmark [--runs 100] [--sleep-ms 5]
//
// A benchmark: it prints markdown tables and the cluster file's fields; it
// never passes or fails on time and exits 1 only when a run fails.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>

#include "absl/status/statusor.h"
#include "bench/pipeline_runs.h"
#include "common/host_cores.h"
#include "common/status_macros.h"
#include "worker/profile/host_costs.h"

namespace chimera::worker {
namespace {

// Tokens per run: ops of about 0.1, 0.5 and 2 ms on a current core.
constexpr int64_t kTokenCounts[] = {64, 256, 1024};
constexpr HostLoad kLoads[] = {HostLoad::kAlone, HostLoad::kLoaded};

// Prints the wake-up rows; returns the loaded host's at the middle size.
absl::StatusOr<double> PrintWakeUps(const HostCostRuns& runs) {
  std::printf(
      "MLP forward and backward (hidden 64, 4x FFN), median microseconds:\n\n"
      "| host | tokens | back to back | after a sleep | wake-up cost |\n"
      "|---|---|---|---|---|\n");
  double loaded_middle = 0;
  for (const HostLoad load : kLoads) {
    for (size_t size = 0; size < std::size(kTokenCounts); ++size) {
      ASSIGN_OR_RETURN(const WakeUpTimes times,
                       MeasureWakeUp(kTokenCounts[size], load, runs));
      if (load == HostLoad::kLoaded && size == 1) loaded_middle = times.Cost();
      std::printf("| %s | %lld | %.1f | %.1f | %.1f |\n", HostLoadName(load),
                  static_cast<long long>(kTokenCounts[size]),
                  1e6 * times.back_to_back, 1e6 * times.after_sleep,
                  1e6 * times.Cost());
    }
  }
  return loaded_middle;
}

// Prints the message rows; returns the loaded host's.
absl::StatusOr<MessageCosts> PrintMessageCosts(const HostCostRuns& runs) {
  std::printf(
      "\nA Gloo send of 16 KiB on loopback, its receiver waiting, "
      "microseconds: the sender's posting call (median), and the CPU time of "
      "both processes per message beyond that call (mean):\n\n"
      "| host | posting cost | receiving cost |\n|---|---|---|\n");
  MessageCosts loaded;
  for (const HostLoad load : kLoads) {
    ASSIGN_OR_RETURN(const MessageCosts costs, MeasureMessageCosts(load, runs));
    if (load == HostLoad::kLoaded) loaded = costs;
    std::printf("| %s | %.1f | %.1f |\n", HostLoadName(load),
                1e6 * costs.posting, 1e6 * costs.receiving);
  }
  return loaded;
}

absl::StatusOr<CoRunningTimes> PrintCoRunning(const HostCostRuns& runs) {
  ASSIGN_OR_RETURN(const CoRunningTimes times, MeasureCoRunning(runs));
  std::printf(
      "\nThe MLP over 256 tokens, median microseconds, in one process and in "
      "one process per core at once:\n\n"
      "| alone | %d at once | co-running slowdown |\n|---|---|---|\n"
      "| %.1f | %.1f | %.3f |\n",
      times.processes, 1e6 * times.alone, 1e6 * times.together,
      times.Slowdown());
  return times;
}

absl::Status Run(const HostCostRuns& runs) {
  std::printf(
      "%d cores; single-threaded processes; %d runs each, sleeping %d ms "
      "before each run after a sleep and each send\n\n",
      HostCores(), runs.runs, runs.sleep_ms);
  ASSIGN_OR_RETURN(const double wake_up, PrintWakeUps(runs));
  ASSIGN_OR_RETURN(const MessageCosts messages, PrintMessageCosts(runs));
  ASSIGN_OR_RETURN(const CoRunningTimes co_running, PrintCoRunning(runs));
  std::printf(
      "\nFor a cluster file whose CPU workers outnumber this host's cores "
      "(the loaded rows):\n  device: {wakeUpSeconds: %.1e, messagePostSeconds: "
      "%.1e, messageReceiveSeconds: %.1e, coRunningSlowdown: %.2f}\n",
      std::max(0.0, wake_up), std::max(0.0, messages.posting),
      std::max(0.0, messages.receiving), co_running.Slowdown());
  return absl::OkStatus();
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::bench::RestartWithSingleThreadedPools(argv);
  chimera::worker::HostCostRuns runs;
  runs.runs = 100;
  CLI::App app{
      "What a CPU worker process loses after a sleep, a message costs its "
      "host and computing beside other workers costs it, for a cluster "
      "file's wakeUpSeconds, messagePostSeconds, messageReceiveSeconds and "
      "coRunningSlowdown"};
  app.add_option("--runs", runs.runs, "Timed runs per measurement")
      ->check(CLI::Range(10, 100000));
  app.add_option("--sleep-ms", runs.sleep_ms,
                 "Milliseconds slept before each run after a sleep and each "
                 "send")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  const absl::Status status = chimera::worker::Run(runs);
  if (!status.ok()) {
    std::fprintf(stderr, "host_costs_benchmark: %s\n",
                 status.ToString().c_str());
    return 1;
  }
  return 0;
}
