// What a CPU worker process pays on this host beyond its profiled compute:
// the CPU terms of the cluster model's device (proto/chimera/v1/cluster.proto,
// docs/planner.md), measured in forked single-threaded processes.
//
// - wake-up: how much longer a compute op runs right after its process slept
//   (as a pipeline rank sleeps in a receive) than back to back;
// - message posting: how long the sender's Gloo send call takes, its
//   receiver waiting, as a pipeline's sends are posted;
// - message receiving: the CPU time a message costs both processes (Gloo's
//   I/O threads, the kernel's work on their behalf, waking the receiver)
//   beyond the sender's posting call;
// - co-running: how much longer an op runs while every core computes one.
//
// Each alone, or on a loaded host: one busy process per core beside the
// measured ones, as the ranks of a local job that outnumber its cores run.
// `chimera-worker host-costs` writes MeasureHostCosts's figures
// (proto/chimera/v1/host_costs.proto) for `chimera run`'s planner;
// bench/host_costs_benchmark prints the tables.
//
//   ASSIGN_OR_RETURN(chimera::v1::HostCosts costs, MeasureHostCosts({}));
//
// The caller must not have run LibTorch work on more than one thread before
// (the processes are forked).
#ifndef CHIMERA_WORKER_PROFILE_HOST_COSTS_H_
#define CHIMERA_WORKER_PROFILE_HOST_COSTS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "chimera/v1/host_costs.pb.h"

namespace chimera::worker {

struct HostCostRuns {
  // Timed runs per measurement (>= 1).
  int runs = 30;
  // Milliseconds slept before each run after a sleep and before each send.
  int sleep_ms = 5;
};

// Whether a measurement runs alone on the host or beside one busy process
// per core.
enum class HostLoad { kAlone, kLoaded };
const char* HostLoadName(HostLoad load);

// Median seconds of a small MLP's forward and backward (hidden 64, 4x FFN,
// as the quick start's model) over `tokens`, back to back and right after
// a sleep, runs close in time, so that the host's drifting speed cancels.
struct WakeUpTimes {
  double back_to_back = 0;
  double after_sleep = 0;
  double Cost() const { return after_sleep - back_to_back; }
};
absl::StatusOr<WakeUpTimes> MeasureWakeUp(int64_t tokens, HostLoad load,
                                          const HostCostRuns& runs);

// Seconds per 16 KiB message (the quick start's activation): the sender's
// posting call (median), and the CPU time of both processes beyond it (mean).
struct MessageCosts {
  double posting = 0;
  double receiving = 0;
};
absl::StatusOr<MessageCosts> MeasureMessageCosts(HostLoad load,
                                                 const HostCostRuns& runs);

// Median seconds of the MLP's forward and backward in one process alone and
// in one process per core computing at once.
struct CoRunningTimes {
  double alone = 0;
  double together = 0;
  int processes = 1;
  // The cluster model's coRunningSlowdown: the slowdown for each other
  // process computing at once (0 on one core, never negative).
  double Slowdown() const;
};
absl::StatusOr<CoRunningTimes> MeasureCoRunning(const HostCostRuns& runs);

// The cluster model's CPU terms for worker processes that fill this host's
// cores, each the median of `repeats` measurements (>= 1), none negative. The
// message costs are a loaded host's, where waking a receiver costs more. The
// wake-up is measured alone: on a loaded host the scheduler favours a process
// that slept over one that ran back to back, which the cluster model's sharing
// of cores already holds, and which would hide the slower start after a sleep.
absl::StatusOr<chimera::v1::HostCosts> MeasureHostCosts(
    const HostCostRuns& runs, int repeats = 3);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_PROFILE_HOST_COSTS_H_
