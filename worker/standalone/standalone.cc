#include "worker/standalone/standalone.h"

#include <ATen/ATen.h>

#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/directory.h"
#include "common/field_errors.h"
#include "common/status_macros.h"
#include "jobspec/job_file.h"
#include "net/server_address.h"
#include "planner/plan_params.h"
#include "schedule/generator.h"
#include "schedule/params_proto.h"
#include "schedule/rank_schedule.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/task_runner.h"

namespace chimera::worker {
namespace {

// The group every rank joins to sum the per-step summary.
constexpr char kSummaryGroup[] = "all-ranks";

absl::Status ParseStore(const std::string& store, StandaloneRun& run) {
  const absl::StatusOr<net::ServerAddress> address = net::ParseDialAddress(store);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--store: ", address.status().message()));
  }
  run.store_host = address->host;
  run.store_port = address->port;
  return absl::OkStatus();
}

// The plan of a job that fixes its parallelism; in standalone mode nothing
// chooses what the job leaves open, so every such field is named.
absl::StatusOr<chimera::v1::Plan> StandalonePlan(
    const chimera::v1::TrainJob& job) {
  if (std::optional<chimera::v1::Plan> plan = planner::FixedPlan(job))
    return *plan;
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
  required(parallelism.has_micro_batches() ||
               job.spec().training().micro_batch_size() > 0,
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

absl::StatusOr<StandaloneRun> LoadStandaloneJob(const std::string& job_path,
                                                const TaskSite& site) {
  StandaloneRun run;
  ASSIGN_OR_RETURN(
      const chimera::v1::TrainJob job,
      jobspec::LoadJobFile(job_path, {.data_root = site.roots.data}));
  ASSIGN_OR_RETURN(const chimera::v1::Plan plan, StandalonePlan(job));
  // A standalone plan places no rank, so every rank counts as sharing this
  // host, and the rank given does not matter.
  ASSIGN_OR_RETURN(run.spec, TaskSpecFor(job, plan, /*rank=*/0,
                                         job.metadata().name(), site));
  ASSIGN_OR_RETURN(run.params, schedule::ScheduleParamsOf(plan));
  ASSIGN_OR_RETURN(run.schedule, schedule::GenerateSchedule(run.params));
  // What the coordinator checks before a launch, for the same reason.
  RETURN_IF_ERROR(schedule::ValidateSchedule(run.schedule));
  run.steps = run.spec.max_steps;
  run.reporting_rank = ReportingRank(run.schedule);
  return run;
}

namespace {

// --gpu-transport: empty or "nccl" for NCCL, "gloo" for Gloo staged through
// host memory.
absl::StatusOr<GpuTransport> ParseGpuTransport(const std::string& name) {
  if (name.empty() || name == "nccl") return GpuTransport::kNccl;
  if (name == "gloo") return GpuTransport::kHostStagedGloo;
  return absl::InvalidArgumentError(
      absl::StrCat("--gpu-transport is '", name, "'; use nccl or gloo"));
}

// The latest complete checkpoint of `spec`'s job; none when its directory
// does not exist or cannot be opened (RunTask says why, should it matter).
std::optional<int64_t> LatestCheckpoint(const TaskSpec& spec) {
  absl::StatusOr<Directory> root = Directory::OpenRoot(spec.checkpoints.root);
  if (!root.ok()) return std::nullopt;
  absl::StatusOr<CheckpointDir> checkpoints = CheckpointDir::Open(
      *root, spec.checkpoints.dir, /*attempt=*/0, /*create=*/false);
  if (!checkpoints.ok()) return std::nullopt;
  return checkpoints->LatestComplete(spec.model.num_layers);
}

// Whether `run` can --resume: the job checkpoints, and its latest complete
// checkpoint is before the run's last step.
absl::Status CheckResumable(const StandaloneRun& run) {
  if (run.spec.checkpoints.every == 0) {
    return absl::InvalidArgumentError(
        "--resume: the job writes no checkpoints "
        "(spec.training.checkpointEvery is 0)");
  }
  const std::optional<int64_t> latest = LatestCheckpoint(run.spec);
  if (!latest) {
    return absl::FailedPreconditionError(
        absl::StrCat("--resume: no complete checkpoint in '",
                     run.spec.checkpoints.dir, "'"));
  }
  if (*latest >= run.steps) {
    return absl::InvalidArgumentError(
        absl::StrCat("--resume: the latest checkpoint is of step ", *latest,
                     "; the run ends at step ", run.steps,
                     " (--steps, spec.training.maxSteps)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<StandaloneRun> PrepareStandalone(const StandaloneFlags& flags) {
  StandaloneRun parsed;
  RETURN_IF_ERROR(ParseStore(flags.store, parsed));
  if (flags.steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--steps is ", flags.steps, "; it must be >= 0"));
  }
  if (!(flags.timeout_seconds > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--timeout is ", flags.timeout_seconds, "; it must be > 0 seconds"));
  }
  ASSIGN_OR_RETURN(const GpuTransport transport,
                   ParseGpuTransport(flags.gpu_transport));
  if (flags.rank < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rank is ", flags.rank, "; it must be >= 0"));
  }
  if (flags.gpu < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu is ", flags.gpu, "; it must be a CUDA device index >= 0"));
  }
  ASSIGN_OR_RETURN(WorkerRoots roots,
                   WorkerRootsFrom(flags.data_root, flags.checkpoint_root));
  const TaskSite site{.roots = std::move(roots),
                      .gpu_index = flags.gpu >= 0 ? flags.gpu : flags.rank,
                      .timeout = absl::Seconds(flags.timeout_seconds)};
  ASSIGN_OR_RETURN(StandaloneRun run, LoadStandaloneJob(flags.job_path, site));
  const int world = schedule::WorkerCount(run.params);
  if (flags.world != world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--world is ", flags.world, "; the job's spec.parallelism needs data ",
        run.params.width, " x ", world / run.params.width,
        run.params.replication.empty() ? " pipeline stages"
                                       : " workers per pipeline (replication)",
        " = ", world, " ranks"));
  }
  if (flags.rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank is ", flags.rank, "; it must be in [0, ", world, ")"));
  }
  if (!flags.gpu_transport.empty() && !run.spec.gpu()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpu-transport is '", flags.gpu_transport,
        "'; only gpu jobs choose a transport (spec.resources.device is cpu)"));
  }
  run.gpu_transport = transport;
  run.rank = flags.rank;
  run.store_host = parsed.store_host;
  run.store_port = parsed.store_port;
  if (flags.steps > 0) run.steps = flags.steps;
  if (flags.resume) RETURN_IF_ERROR(CheckResumable(run));
  run.resume = flags.resume;
  return run;
}

namespace {

// What each rank contributes to a step's line, in slot order.
enum RankFigure {
  kBubbleRatio,
  kPeakMemory,
  kWeights,
  kGradients,
  kOptimizer,
  kActivations,
  kProcessPeakMemory,
  kRankFigures,
};

// "12,34": byte counts carried as doubles (exact below 2^53).
std::string Bytes(const std::vector<double>& counts) {
  return absl::StrJoin(counts, ",", [](std::string* text, double bytes) {
    absl::StrAppend(text, static_cast<int64_t>(bytes));
  });
}

// "W0/G0/O0/A0,W1/G1/O1/A1": each rank's memory split.
template <typename OfRanks>
std::string MemorySplits(const OfRanks& of_ranks, int world) {
  const std::vector<double> parts[] = {of_ranks(kWeights), of_ranks(kGradients),
                                       of_ranks(kOptimizer),
                                       of_ranks(kActivations)};
  std::vector<std::string> ranks;
  for (int rank = 0; rank < world; ++rank) {
    ranks.push_back(absl::StrJoin(
        parts, "/", [rank](std::string* text, const std::vector<double>& part) {
          absl::StrAppend(text, static_cast<int64_t>(part[rank]));
        }));
  }
  return absl::StrJoin(ranks, ",");
}

std::vector<double> RankFigures(const StepMetrics& metrics) {
  std::vector<double> figures(kRankFigures);
  figures[kBubbleRatio] =
      schedule::BubbleRatio(metrics.bubble_seconds, metrics.step_seconds);
  figures[kPeakMemory] = static_cast<double>(metrics.memory_peak_bytes);
  figures[kWeights] = static_cast<double>(metrics.weights_bytes);
  figures[kGradients] = static_cast<double>(metrics.gradients_bytes);
  figures[kOptimizer] = static_cast<double>(metrics.optimizer_bytes);
  figures[kActivations] = static_cast<double>(metrics.activations_bytes);
  figures[kProcessPeakMemory] =
      static_cast<double>(metrics.memory_process_peak_bytes);
  return figures;
}

// Gathers each step's loss (summed) and every rank's RankFigures over all
// ranks, and prints them on the reporting rank:
//   step S loss L step_seconds T bubble_ratio B peak_memory_bytes M
//   rank_bubble_ratios B0,B1,... rank_peak_memory_bytes M0,M1,...
//   rank_memory_split_bytes W0/G0/O0/A0,W1/G1/O1/A1,...
//   rank_process_peak_memory_bytes P0,P1,...
// where B is the mean over ranks, M the reporting rank's own peak, the split
// is weights/gradients/optimizer/activations at the step's peak, and P the
// process's peak over its whole life.
class StepPrinter : public TaskObserver {
 public:
  StepPrinter(const StandaloneRun& run, std::ostream& out)
      : run_(run), out_(out), device_(run.spec.device) {}

  absl::Status OnStep(const StepMetrics& metrics, Communicator& comm) override {
    const int world = static_cast<int>(run_.schedule.workers.size());
    // [loss, then each figure for every rank]: a sum in which every rank
    // fills its own slots gathers them.
    std::vector<double> slots(1 + kRankFigures * world, 0.0);
    slots[0] = metrics.loss;
    const std::vector<double> own = RankFigures(metrics);
    for (int figure = 0; figure < kRankFigures; ++figure) {
      slots[1 + figure * world + run_.rank] = own[figure];
    }
    at::Tensor summary =
        at::tensor(slots, at::TensorOptions(at::kDouble)).to(device_);
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> sum,
                     comm.AllReduceSum(summary, kSummaryGroup));
    RETURN_IF_ERROR(sum->Wait(run_.spec.timeouts.collective));
    if (run_.rank != run_.reporting_rank) return absl::OkStatus();
    summary = summary.cpu();
    const double* gathered = summary.data_ptr<double>();
    auto of_ranks = [&](RankFigure figure) {
      return std::vector<double>(gathered + 1 + figure * world,
                                 gathered + 1 + (figure + 1) * world);
    };
    const std::vector<double> bubbles = of_ranks(kBubbleRatio);
    out_ << absl::StrFormat(
                "step %d loss %.12g step_seconds %.4f bubble_ratio %.3f "
                "peak_memory_bytes %d rank_bubble_ratios %s "
                "rank_peak_memory_bytes %s rank_memory_split_bytes %s "
                "rank_process_peak_memory_bytes %s",
                metrics.step + 1, gathered[0], metrics.step_seconds,
                std::accumulate(bubbles.begin(), bubbles.end(), 0.0) / world,
                metrics.memory_peak_bytes,
                absl::StrJoin(bubbles, ",",
                              [](std::string* text, double ratio) {
                                absl::StrAppendFormat(text, "%.3f", ratio);
                              }),
                Bytes(of_ranks(kPeakMemory)), MemorySplits(of_ranks, world),
                Bytes(of_ranks(kProcessPeakMemory)))
         << std::endl;
    return absl::OkStatus();
  }

 private:
  const StandaloneRun& run_;
  std::ostream& out_;
  // Where the communicator reduces the summary: the ranks' compute device.
  const c10::Device device_;
};

}  // namespace

absl::Status RunStandalone(const StandaloneRun& run, std::ostream& out) {
  TaskRunOptions options;
  options.spec = run.spec;
  options.schedule = schedule::RankScheduleOf(run.schedule, run.rank);
  options.gpu_transport = run.gpu_transport;
  options.store_host = run.store_host;
  options.store_port = run.store_port;
  options.start_over = !run.resume;
  options.last_step = run.steps;
  CommGroup& everyone = options.extra_groups.emplace_back();
  everyone.name = kSummaryGroup;
  for (int rank = 0; rank < static_cast<int>(run.schedule.workers.size());
       ++rank) {
    everyone.ranks.push_back(rank);
  }
  StepPrinter printer(run, out);
  return RunTask(options, printer);
}

}  // namespace chimera::worker
