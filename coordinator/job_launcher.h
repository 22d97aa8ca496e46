// What a queued job starts with, prepared off the coordinator's lock: the
// workers as the planner's cluster, the plan its search chose, and every
// rank's program, generated from that plan at the job's full width and
// proven by the schedule validator before any worker hears of it. A
// schedule the validator refuses starts nothing; the job fails with the
// validator's words. Then each rank's start: its program and the schedule's
// outline.
//
//   JobLauncher launcher(&registry, options);
//   ASSIGN_OR_RETURN(Launch launch, launcher.LaunchFor(manifest, workers, {}));
//   RETURN_IF_ERROR(launcher.Place(workers, manifest, &launch.plan));
//   std::vector<chimera::v1::Assignment> starts =
//       launcher.StartsFor(job, attempt, std::move(launch));  // rank order
#ifndef CHIMERA_COORDINATOR_JOB_LAUNCHER_H_
#define CHIMERA_COORDINATOR_JOB_LAUNCHER_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"
#include "chimera/v1/profile.pb.h"
#include "chimera/v1/program.pb.h"
#include "chimera/v1/service.pb.h"
#include "coordinator/worker_registry.h"
#include "schedule/generator.h"

namespace chimera::coordinator {

// What the planner assumes of every link between workers unless told
// (chimera-coordinator --link-latency, --link-bandwidth,
// --link-collective-latency): workers on one host, messages over Gloo's
// TCP and allreduces through shared memory, as measured by
// bench/bubble_benchmark on a 2-core machine.
inline constexpr double kDefaultLinkLatencySeconds = 1e-4;
inline constexpr double kDefaultLinkBandwidth = 2e9;
inline constexpr double kDefaultLinkCollectiveLatencySeconds = 5e-5;
chimera::v1::ClusterLinks DefaultLinks();

// What the planner assumes a CPU worker process loses unless told
// (chimera-coordinator --cpu-wake-up, --cpu-message-post,
// --cpu-message-receive): each compute op after a wait for a message, and
// each message it posts and receives, as bench/host_costs_benchmark
// measured them on a 2-core machine.
inline constexpr double kDefaultCpuWakeUpSeconds = 2.5e-4;
inline constexpr double kDefaultCpuMessagePostSeconds = 1e-4;
inline constexpr double kDefaultCpuMessageReceiveSeconds = 3e-4;

// Turns a plan's schedule parameters into the programs of every rank:
// schedule::GenerateSchedule, or in tests one that breaks its output.
using ScheduleGenerator = std::function<absl::StatusOr<schedule::Schedule>(
    const schedule::ScheduleParams&)>;

struct Launch {
  chimera::v1::Plan plan;
  // One per rank, in rank order, each with the layers of the model stages
  // it holds.
  std::vector<chimera::v1::WorkerProgram> programs;
  // What every rank is told of the others' programs.
  chimera::v1::ScheduleOutline outline;
};

// Generates `plan`'s schedule with `generate` for every data-parallel
// replica and validates it whole. An invalid schedule is INTERNAL (a
// generator's bug, not the job's): "the <scheme> schedule for W=.. D=..
// N=.. is invalid: <what the validator found>".
absl::StatusOr<Launch> PrepareLaunch(
    chimera::v1::Plan plan,
    const ScheduleGenerator& generate = schedule::GenerateSchedule);

// "cpu" or "gpu": what each of the job's workers computes on.
std::string DeviceKindOf(const chimera::v1::TrainJob& job);

// OK for an empty `profile` (the job is planned from the analytic model) or
// one that describes `job`'s model on its kind of device; else
// INVALID_ARGUMENT naming the profile's field ("profile.layers: has 4
// blocks; the job's model has 8").
absl::Status ValidateJobProfile(const chimera::v1::TrainJob& job,
                                const chimera::v1::ModelProfile& profile);

// `worker`'s first device of `kind` ("cpu", "gpu"); nullptr when it has none.
const chimera::v1::Device* DeviceOfKind(const chimera::v1::WorkerInfo& worker,
                                        const std::string& kind);

// The index of `worker`'s first device of `kind`; none when it has none.
std::optional<int> DeviceIndex(const chimera::v1::WorkerInfo& worker,
                               const std::string& kind);

// Sets `plan`'s placement: rank i on workers[i], its node numbered in order
// of first appearance, its device that worker's first of `device_kind` (0
// when it has none).
void PlaceOnWorkers(const std::vector<chimera::v1::WorkerInfo>& workers,
                    const std::string& device_kind, chimera::v1::Plan* plan);

// How many of `idle` workers offering its device `job` starts on: its
// full count (planner::WorkersToUse), or after a restart, when fewer are
// idle, all of them down to spec.resources.minWorkers. 0: it must wait.
int WorkersToStart(const chimera::v1::Job& job, int idle);

struct LaunchOptions {
  // What the planner assumes about the workers' devices and links when a job
  // leaves its parallelism open (memory comes from the workers' reports).
  double device_peak_flops = 1e11;
  chimera::v1::ClusterLinks links = DefaultLinks();
  // CPU workers of one host: how much longer a compute op runs for each
  // other worker of the host computing at the same time (a cluster file's
  // coRunningSlowdown, docs/planner.md).
  double cpu_co_running_slowdown = 0;
  // CPU workers: what a compute op after a wait loses, and what posting and
  // receiving a message cost (a cluster file's wakeUpSeconds,
  // messagePostSeconds, messageReceiveSeconds).
  double cpu_wake_up_seconds = kDefaultCpuWakeUpSeconds;
  double cpu_message_post_seconds = kDefaultCpuMessagePostSeconds;
  double cpu_message_receive_seconds = kDefaultCpuMessageReceiveSeconds;
  // Told to workers: joining the store and every collective.
  absl::Duration collective_timeout = absl::Seconds(120);
  // Turns a started job's plan into every rank's program, which is then
  // validated whole. Tests give one that breaks its output.
  ScheduleGenerator generate_schedule = schedule::GenerateSchedule;
};

// Reads the registry (which has a lock of its own) and nothing else: it
// holds no state of the coordinator's and can run on any thread.
class JobLauncher {
 public:
  // `workers` must outlive the launcher.
  JobLauncher(const WorkerRegistry* workers, LaunchOptions options);

  // The registered workers `worker_ids` (those still known) as the
  // planner's cluster: nodes, devices per node, the least memory and cores
  // any reports, and the options' device and links.
  chimera::v1::Cluster ClusterOf(const std::vector<std::string>& worker_ids,
                                 const std::string& device_kind) const;

  // The `top_k` best plans for `manifest` on `worker_ids`, best first,
  // predicted from `profile` (ValidateJobProfile) or where it is empty from
  // the analytic model; a manifest that leaves its worker count open uses
  // as many as it can. FAILED_PRECONDITION naming the memory where no
  // variant fits, CANCELLED once `cancelled` (asked between candidates)
  // says so.
  absl::StatusOr<std::vector<chimera::v1::Plan>> SearchPlans(
      chimera::v1::TrainJob manifest, const chimera::v1::ModelProfile& profile,
      const std::vector<std::string>& worker_ids, int top_k,
      std::function<bool()> cancelled) const;

  // The `top_k` best plans for `manifest` on every registered worker that
  // is not dead (a dry run); FAILED_PRECONDITION when there is none.
  absl::StatusOr<std::vector<chimera::v1::Plan>> PlansOnRegistered(
      const chimera::v1::TrainJob& manifest, int top_k,
      std::function<bool()> cancelled) const;

  // FAILED_PRECONDITION naming the memory when `manifest` fixes its
  // parallelism and, on as many registered workers of its device as it
  // needs, no variant of its plan fits; OK when too few are registered to
  // say, or `cancelled` stops the search first (its start decides then).
  absl::Status CheckFitsRegistered(const chimera::v1::TrainJob& manifest,
                                   const chimera::v1::ModelProfile& profile,
                                   std::function<bool()> cancelled) const;

  // Idle workers offering the job's device, in registration order, but for
  // those the job left out (JobStatus.left_out_workers).
  std::vector<std::string> IdleWorkersOffering(
      const chimera::v1::Job& job) const;
  // As many of those as the job starts on (WorkersToStart; none: it must
  // wait).
  std::vector<std::string> IdleWorkersFor(const chimera::v1::Job& job) const;
  // What a job for which IdleWorkersFor found none waits for: "needs 8 idle
  // cpu workers (4 registered, 2 busy)", and how many it left out.
  std::string WhyWaiting(const chimera::v1::Job& job) const;
  // Why a restarted job that may shrink cannot go on at all: fewer workers
  // of its device are registered (busy or not, but not left out
  // by it) than its spec.resources.minWorkers. None while it may still
  // start, or wait for busy ones.
  std::optional<std::string> TooFewLeft(const chimera::v1::Job& job) const;

  // The best plan's launch on `worker_ids` (PrepareLaunch), re-planned as
  // planner::ShrunkJob where they are fewer than the job asks for:
  // SearchPlans' errors, or INTERNAL where the validator refuses the
  // schedule.
  absl::StatusOr<Launch> LaunchFor(
      const chimera::v1::TrainJob& manifest,
      const chimera::v1::ModelProfile& profile,
      const std::vector<std::string>& worker_ids,
      const std::function<bool()>& cancelled) const;

  // PlaceOnWorkers with the registry's view of `worker_ids`; NOT_FOUND for
  // a worker it no longer knows.
  absl::Status Place(const std::vector<std::string>& worker_ids,
                     const chimera::v1::TrainJob& manifest,
                     chimera::v1::Plan* plan) const;

  // Every rank's start of `attempt` of `job` (which holds its placed plan),
  // in rank order: the job, its plan, the rank's program and the outline,
  // the checkpoint to resume from and the workers' timeout.
  std::vector<chimera::v1::Assignment> StartsFor(const chimera::v1::Job& job,
                                                 int attempt,
                                                 Launch launch) const;

 private:
  // The registered workers, not dead, of `device_kind` (any when empty).
  std::vector<chimera::v1::WorkerInfo> Registered(
      const std::string& device_kind) const;

  const WorkerRegistry* const workers_;
  const LaunchOptions options_;
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_JOB_LAUNCHER_H_
