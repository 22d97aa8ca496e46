#include "coordinator/job_launcher.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/field_errors.h"
#include "common/status_macros.h"
#include "planner/analytic_profile.h"
#include "planner/model_profile.h"
#include "planner/plan_params.h"
#include "planner/plan_search.h"
#include "schedule/params_proto.h"
#include "schedule/program_proto.h"
#include "schedule/rank_schedule.h"
#include "schedule/validator.h"

namespace chimera::coordinator {
namespace {

std::string ScheduleName(const chimera::v1::Plan& plan) {
  return absl::StrCat("the ", plan.scheme(), " schedule for W=", plan.width(),
                      " D=", plan.depth(), " N=", plan.micro_batches());
}

// A job that restarted and may go on with fewer workers than it asks for.
bool MayShrink(const chimera::v1::Job& job) {
  const auto& resources = job.manifest().spec().resources();
  return job.status().restarts() > 0 && resources.min_workers() > 0 &&
         resources.min_workers() < resources.workers();
}

int FewestToStart(const chimera::v1::Job& job) {
  return MayShrink(job) ? job.manifest().spec().resources().min_workers()
                        : planner::MinimumWorkers(job.manifest());
}

// Whether `job` left `worker` out, in the incarnation it runs now: its
// task hung or straggled in one of the job's runs
// (JobStatus.left_out_workers).
bool LeftOutBy(const chimera::v1::Job& job,
               const chimera::v1::WorkerInfo& worker) {
  return absl::c_any_of(job.status().left_out_workers(),
                        [&worker](const auto& left_out) {
                          return left_out.worker_id() == worker.worker_id() &&
                                 left_out.incarnation() == worker.incarnation();
                        });
}

}  // namespace

int WorkersToStart(const chimera::v1::Job& job, int idle) {
  const int full = planner::WorkersToUse(job.manifest(), idle);
  if (full > 0 || !MayShrink(job)) return full;
  return idle >= FewestToStart(job) ? idle : 0;
}

chimera::v1::ClusterLinks DefaultLinks() {
  chimera::v1::ClusterLinks links;
  for (chimera::v1::LinkSpec* link :
       {links.mutable_intra_node(), links.mutable_inter_node()}) {
    link->set_latency_seconds(kDefaultLinkLatencySeconds);
    link->set_bandwidth_bytes_per_second(kDefaultLinkBandwidth);
    link->set_collective_latency_seconds(kDefaultLinkCollectiveLatencySeconds);
  }
  return links;
}

std::string DeviceKindOf(const chimera::v1::TrainJob& job) {
  const std::string& device = job.spec().resources().device();
  return device.empty() ? "cpu" : device;
}

absl::Status ValidateJobProfile(const chimera::v1::TrainJob& job,
                                const chimera::v1::ModelProfile& profile) {
  if (profile.layers().empty() && profile.api_version().empty()) {
    return absl::OkStatus();
  }
  const FieldErrors found =
      planner::ValidateProfile(profile, job.spec().model().num_layers());
  FieldErrors errors;
  for (const FieldError& error : found.errors()) {
    errors.Add(absl::StrCat("profile.", error.path), error.message);
  }
  // A profile measured on a CPU says nothing of a GPU, and the reverse.
  const std::string device = DeviceKindOf(job);
  if ((device == "gpu") != absl::StartsWith(profile.device(), "cuda")) {
    errors.Add("profile.device",
               absl::StrCat("'", profile.device(), "' is not a ", device,
                            " device, as the job's spec.resources.device"));
  }
  return errors.ToStatus();
}

const chimera::v1::Device* DeviceOfKind(const chimera::v1::WorkerInfo& worker,
                                        const std::string& kind) {
  for (const chimera::v1::Device& device : worker.devices()) {
    if (device.kind() == kind) return &device;
  }
  return nullptr;
}

std::optional<int> DeviceIndex(const chimera::v1::WorkerInfo& worker,
                               const std::string& kind) {
  if (const chimera::v1::Device* device = DeviceOfKind(worker, kind)) {
    return device->index();
  }
  return std::nullopt;
}

absl::StatusOr<Launch> PrepareLaunch(chimera::v1::Plan plan,
                                     const ScheduleGenerator& generate) {
  ASSIGN_OR_RETURN(schedule::ScheduleParams params,
                   schedule::ScheduleParamsOf(plan));
  ASSIGN_OR_RETURN(schedule::Schedule schedule, generate(params));
  // The workers run what they are sent: this is the last place a wrong
  // program can be caught before it deadlocks or trains wrong weights.
  if (absl::Status valid = schedule::ValidateSchedule(schedule); !valid.ok()) {
    return absl::InternalError(absl::StrCat(ScheduleName(plan),
                                            " is invalid: ", valid.message()));
  }
  Launch launch;
  launch.programs = schedule::ToProto(schedule);
  launch.outline = schedule::ToProto(schedule::OutlineOf(schedule));
  for (chimera::v1::WorkerProgram& program : launch.programs) {
    for (chimera::v1::StageReplica& replica : *program.mutable_stages()) {
      const auto& range = plan.partition(
          schedule.topology.ModelStage({replica.chunk(), replica.stage()}));
      replica.set_first_layer(range.first_layer());
      replica.set_num_layers(range.num_layers());
    }
  }
  launch.plan = std::move(plan);
  return launch;
}

void PlaceOnWorkers(const std::vector<chimera::v1::WorkerInfo>& workers,
                    const std::string& device_kind, chimera::v1::Plan* plan) {
  plan->clear_placement();
  std::map<std::string, int> node_index;
  for (size_t rank = 0; rank < workers.size(); ++rank) {
    const chimera::v1::WorkerInfo& info = workers[rank];
    const int node =
        node_index.emplace(info.node(), node_index.size()).first->second;
    chimera::v1::Placement* placed = plan->add_placement();
    placed->set_rank(static_cast<int>(rank));
    placed->set_node(node);
    placed->set_device(DeviceIndex(info, device_kind).value_or(0));
  }
}

JobLauncher::JobLauncher(const WorkerRegistry* workers, LaunchOptions options)
    : workers_(workers), options_(std::move(options)) {}

chimera::v1::Cluster JobLauncher::ClusterOf(
    const std::vector<std::string>& worker_ids,
    const std::string& device_kind) const {
  std::map<std::string, int> per_node;
  int64_t memory = 0;
  // CPU workers of one node share its cores: the fewest any reports (0 if
  // one does not).
  std::optional<int> cores;
  for (const std::string& id : worker_ids) {
    absl::StatusOr<chimera::v1::WorkerInfo> info = workers_->Get(id);
    if (!info.ok()) continue;
    ++per_node[info->node()];
    if (memory == 0 || info->memory_bytes() < memory)
      memory = info->memory_bytes();
    cores = std::min(cores.value_or(info->cpu_cores()), info->cpu_cores());
  }
  int devices_per_node = 0;
  for (const auto& [node, count] : per_node)
    devices_per_node = std::max(devices_per_node, count);
  chimera::v1::Cluster cluster;
  cluster.mutable_metadata()->set_name("registered-workers");
  auto* spec = cluster.mutable_spec();
  spec->set_nodes(static_cast<int>(per_node.size()));
  spec->set_devices_per_node(devices_per_node);
  spec->mutable_device()->set_memory_bytes(memory);
  spec->mutable_device()->set_peak_flops(options_.device_peak_flops);
  if (device_kind == "cpu") {
    spec->mutable_device()->set_cores_per_node(cores.value_or(0));
    spec->mutable_device()->set_co_running_slowdown(
        options_.cpu_co_running_slowdown);
    spec->mutable_device()->set_wake_up_seconds(options_.cpu_wake_up_seconds);
    spec->mutable_device()->set_message_post_seconds(
        options_.cpu_message_post_seconds);
    spec->mutable_device()->set_message_receive_seconds(
        options_.cpu_message_receive_seconds);
  }
  *spec->mutable_links() = options_.links;
  return cluster;
}

absl::StatusOr<std::vector<chimera::v1::Plan>> JobLauncher::SearchPlans(
    chimera::v1::TrainJob manifest, const chimera::v1::ModelProfile& profile,
    const std::vector<std::string>& worker_ids, int top_k,
    std::function<bool()> cancelled) const {
  const chimera::v1::Cluster cluster =
      ClusterOf(worker_ids, DeviceKindOf(manifest));
  // Workers left open: as many of these as the job can use.
  auto* resources = manifest.mutable_spec()->mutable_resources();
  if (resources->workers() == 0) {
    resources->set_workers(planner::WorkersToUse(manifest, worker_ids.size()));
  }
  const chimera::v1::ModelProfile costs =
      profile.layers().empty()
          ? planner::AnalyticProfile(manifest.spec().model(),
                                     cluster.spec().device())
          : profile;
  ASSIGN_OR_RETURN(planner::SearchResult result,
                   planner::SearchPlans(manifest, cluster, costs,
                                        {top_k, std::move(cancelled)}));
  std::vector<chimera::v1::Plan> plans;
  for (const planner::Evaluation& evaluation : result.ranked)
    plans.push_back(evaluation.plan);
  return plans;
}

std::vector<chimera::v1::WorkerInfo> JobLauncher::Registered(
    const std::string& device_kind) const {
  std::vector<chimera::v1::WorkerInfo> registered;
  for (chimera::v1::WorkerInfo& worker : workers_->List()) {
    if (worker.state() != chimera::v1::WORKER_STATE_DEAD &&
        (device_kind.empty() || DeviceIndex(worker, device_kind).has_value())) {
      registered.push_back(std::move(worker));
    }
  }
  return registered;
}

absl::StatusOr<std::vector<chimera::v1::Plan>> JobLauncher::PlansOnRegistered(
    const chimera::v1::TrainJob& manifest, int top_k,
    std::function<bool()> cancelled) const {
  std::vector<std::string> alive;
  for (const chimera::v1::WorkerInfo& worker : Registered("")) {
    alive.push_back(worker.worker_id());
  }
  if (alive.empty()) {
    return absl::FailedPreconditionError(
        "no workers are registered to plan for");
  }
  return SearchPlans(manifest, chimera::v1::ModelProfile(), alive, top_k,
                     std::move(cancelled));
}

absl::Status JobLauncher::CheckFitsRegistered(
    const chimera::v1::TrainJob& manifest,
    const chimera::v1::ModelProfile& profile,
    std::function<bool()> cancelled) const {
  if (!planner::FixedPlan(manifest)) return absl::OkStatus();
  const std::string device = DeviceKindOf(manifest);
  std::vector<std::string> registered;
  for (const chimera::v1::WorkerInfo& worker : Registered(device)) {
    registered.push_back(worker.worker_id());
  }
  const int needed = planner::MinimumWorkers(manifest);
  if (static_cast<int>(registered.size()) < needed) return absl::OkStatus();
  registered.resize(needed);
  const absl::StatusOr<std::vector<chimera::v1::Plan>> searched =
      SearchPlans(manifest, profile, registered, 1, std::move(cancelled));
  // Only a verdict counts: a search cut short leaves it to the start.
  if (!absl::IsFailedPrecondition(searched.status())) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("spec.parallelism: on the ", needed, " registered ", device,
                   " workers, ", searched.status().message()));
}

std::vector<std::string> JobLauncher::IdleWorkersOffering(
    const chimera::v1::Job& job) const {
  const std::string device = DeviceKindOf(job.manifest());
  std::vector<std::string> offering;
  for (const std::string& id : workers_->IdleWorkers()) {
    absl::StatusOr<chimera::v1::WorkerInfo> info = workers_->Get(id);
    if (info.ok() && DeviceIndex(*info, device).has_value() &&
        !LeftOutBy(job, *info)) {
      offering.push_back(id);
    }
  }
  return offering;
}

std::vector<std::string> JobLauncher::IdleWorkersFor(
    const chimera::v1::Job& job) const {
  std::vector<std::string> offering = IdleWorkersOffering(job);
  offering.resize(WorkersToStart(job, offering.size()));
  return offering;
}

std::string JobLauncher::WhyWaiting(const chimera::v1::Job& job) const {
  const std::string device = DeviceKindOf(job.manifest());
  const std::vector<chimera::v1::WorkerInfo> registered = Registered(device);
  const auto left_out = absl::c_count_if(
      registered,
      [&job](const auto& worker) { return LeftOutBy(job, worker); });
  const auto idle = absl::c_count_if(registered, [&job](const auto& worker) {
    return worker.state() == chimera::v1::WORKER_STATE_IDLE &&
           !LeftOutBy(job, worker);
  });
  const int needed = FewestToStart(job);
  return absl::StrCat(
      "needs ", needed, " idle ", device, " worker", needed == 1 ? "" : "s",
      " (", registered.size(), " registered, ",
      registered.size() - idle - left_out, " busy",
      left_out > 0 ? absl::StrCat(", ", left_out, " left out by this job") : "",
      ")");
}

std::optional<std::string> JobLauncher::TooFewLeft(
    const chimera::v1::Job& job) const {
  if (!MayShrink(job)) return std::nullopt;
  const std::string device = DeviceKindOf(job.manifest());
  const std::vector<chimera::v1::WorkerInfo> registered = Registered(device);
  const size_t left = registered.size() -
                      absl::c_count_if(registered, [&job](const auto& worker) {
                        return LeftOutBy(job, worker);
                      });
  const int needed = job.manifest().spec().resources().min_workers();
  if (left >= static_cast<size_t>(needed)) return std::nullopt;
  return absl::StrCat(job.status().restart_cause(), "; ", left, " ", device,
                      " worker", left == 1 ? " is" : "s are",
                      " left and spec.resources.minWorkers is ", needed);
}

absl::StatusOr<Launch> JobLauncher::LaunchFor(
    const chimera::v1::TrainJob& manifest,
    const chimera::v1::ModelProfile& profile,
    const std::vector<std::string>& worker_ids,
    const std::function<bool()>& cancelled) const {
  // What the job leaves open, the planner chooses for these workers, also
  // where the job fixes scheme, pipeline and data. Where no variant fits in
  // the workers' memory the search says so, naming it, and the job fails
  // before any worker allocates (rather than by running out of memory).
  const int asked = manifest.spec().resources().workers();
  const int given = static_cast<int>(worker_ids.size());
  ASSIGN_OR_RETURN(
      std::vector<chimera::v1::Plan> searched,
      SearchPlans(
          given < asked ? planner::ShrunkJob(manifest, given) : manifest,
          profile, worker_ids, 1, cancelled));
  return PrepareLaunch(std::move(searched.front()), options_.generate_schedule);
}

absl::Status JobLauncher::Place(const std::vector<std::string>& worker_ids,
                                const chimera::v1::TrainJob& manifest,
                                chimera::v1::Plan* plan) const {
  std::vector<chimera::v1::WorkerInfo> infos;
  for (const std::string& worker : worker_ids) {
    ASSIGN_OR_RETURN(infos.emplace_back(), workers_->Get(worker));
  }
  PlaceOnWorkers(infos, DeviceKindOf(manifest), plan);
  return absl::OkStatus();
}

std::vector<chimera::v1::Assignment> JobLauncher::StartsFor(
    const chimera::v1::Job& job, int attempt, Launch launch) const {
  std::vector<chimera::v1::Assignment> starts(launch.programs.size());
  for (size_t rank = 0; rank < starts.size(); ++rank) {
    chimera::v1::StartTask* start = starts[rank].mutable_start();
    start->set_job_id(job.id());
    start->set_attempt(attempt);
    start->set_start_step(job.status().checkpoint_step());
    *start->mutable_manifest() = job.manifest();
    *start->mutable_plan() = job.plan();
    start->set_rank(static_cast<int>(rank));
    *start->mutable_program() = std::move(launch.programs[rank]);
    *start->mutable_outline() = launch.outline;
    start->mutable_rendezvous()->set_timeout_ms(
        absl::ToInt64Milliseconds(options_.collective_timeout));
  }
  return starts;
}

}  // namespace chimera::coordinator
