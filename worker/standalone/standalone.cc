#include "worker/standalone/standalone.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "common/field_errors.h"
#include "coordinator/planner/plan_params.h"
#include "coordinator/schedule/generator.h"
#include "jobspec/job_file.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/comm/tcp_rendezvous.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/program_executor.h"

namespace chimera::worker {
namespace {

// The group every rank joins to sum the per-step summary.
constexpr char kSummaryGroup[] = "all-ranks";

absl::Status ParseStore(const std::string& store, StandaloneRun& run) {
  const size_t colon = store.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(store.substr(colon + 1), &port) || port < 1 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--store '", store, "' must be HOST:PORT with a port in [1, 65535]"));
  }
  run.store_host = store.substr(0, colon);
  run.store_port = port;
  return absl::OkStatus();
}

// The plan of a job that fixes its parallelism; in standalone mode nothing
// chooses what the job leaves open, so every such field is named.
absl::StatusOr<chimera::v1::Plan> StandalonePlan(const chimera::v1::TrainJob& job) {
  if (std::optional<chimera::v1::Plan> plan = planner::FixedPlan(job)) return *plan;
  const auto& parallelism = job.spec().parallelism();
  FieldErrors errors;
  auto required = [&](bool present, absl::string_view field) {
    if (!present) {
      errors.Add(absl::StrCat("spec.parallelism.", field),
                 "required in standalone mode, where no planner chooses it");
    }
  };
  required(!parallelism.schedule().empty(), "schedule");
  required(parallelism.has_pipeline(), "pipeline");
  required(parallelism.has_data(), "data");
  required(parallelism.has_micro_batches() || job.spec().training().micro_batch_size() > 0,
           "microBatches");
  return errors.ToStatus();
}

// Lowest rank that holds a replica of the model's last stage.
int ReportingRank(const schedule::Schedule& schedule) {
  const int last = schedule.topology.NumModelStages() - 1;
  for (const schedule::WorkerProgram& program : schedule.workers) {
    for (const schedule::StageRef& ref : program.stages) {
      if (schedule.topology.ModelStage(ref) == last) return program.rank;
    }
  }
  return 0;
}

}  // namespace

absl::StatusOr<StandaloneRun> PrepareStandalone(const StandaloneFlags& flags) {
  StandaloneRun run;
  RETURN_IF_ERROR(ParseStore(flags.store, run));
  if (flags.steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--steps is ", flags.steps, "; it must be >= 0"));
  }
  ASSIGN_OR_RETURN(const chimera::v1::TrainJob job,
                   jobspec::LoadJobFile(flags.job_path));
  ASSIGN_OR_RETURN(const chimera::v1::Plan plan, StandalonePlan(job));
  ASSIGN_OR_RETURN(run.task, TaskOptionsFor(job, plan));
  const int world = schedule::WorkerCount(run.task.schedule);
  if (flags.world != world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world is ", flags.world, "; the job's spec.parallelism needs data ",
        run.task.schedule.width, " x pipeline ", run.task.schedule.depth, " = ",
        world, " ranks"));
  }
  if (flags.rank < 0 || flags.rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank is ", flags.rank, "; it must be in [0, ", world, ")"));
  }
  run.rank = flags.rank;
  ASSIGN_OR_RETURN(run.schedule, schedule::GenerateSchedule(run.task.schedule));
  run.steps = flags.steps > 0 ? flags.steps : run.task.max_steps;
  run.reporting_rank = ReportingRank(run.schedule);
  return run;
}

absl::Status RunStandalone(const StandaloneRun& run, std::ostream& out) {
  at::set_num_threads(run.task.threads);
  const int world = static_cast<int>(run.schedule.workers.size());
  ASSIGN_OR_RETURN(
      std::unique_ptr<TcpRendezvous> rendezvous,
      run.rank == 0 ? TcpRendezvous::Host(run.store_host, run.store_port, world)
                    : TcpRendezvous::Join(run.store_host, run.store_port));
  GlooOptions gloo;
  gloo.rank = run.rank;
  gloo.world_size = world;
  gloo.groups = GradientGroups(run.schedule);
  CommGroup& summary_group = gloo.groups.emplace_back();
  summary_group.name = kSummaryGroup;
  for (int rank = 0; rank < world; ++rank) summary_group.ranks.push_back(rank);
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(*rendezvous, gloo));
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(run.task.data));

  ExecutorOptions options;
  options.model = run.task.model;
  options.partition = run.task.partition;
  options.seed = run.task.seed;
  options.micro_batch_size = run.task.micro_batch_size;
  options.optimizer = run.task.optimizer;
  ASSIGN_OR_RETURN(std::unique_ptr<ProgramExecutor> executor,
                   ProgramExecutor::Create(run.schedule, run.rank, options,
                                           *data, comm.get()));
  for (int64_t step = 0; step < run.steps; ++step) {
    ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
    const at::Tensor summary = at::tensor(
        {metrics.loss, metrics.bubble_seconds / metrics.step_seconds},
        at::TensorOptions(at::kDouble));
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> sum,
                     comm->AllReduceSum(summary, kSummaryGroup));
    RETURN_IF_ERROR(sum->Wait(kDefaultCollectiveTimeout));
    if (run.rank != run.reporting_rank) continue;
    out << absl::StrFormat(
               "step %d loss %.6f step_seconds %.4f bubble_ratio %.3f "
               "peak_memory_bytes %d",
               step + 1, summary[0].item<double>(), metrics.step_seconds,
               summary[1].item<double>() / world, metrics.memory_peak_bytes)
        << std::endl;
  }
  return comm->Barrier(kDefaultCollectiveTimeout);
}

}  // namespace chimera::worker
