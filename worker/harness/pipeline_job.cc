#include "worker/harness/pipeline_job.h"

#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/directory.h"
#include "common/status_macros.h"
#include "worker/comm/gloo_communicator.h"
#include "worker/harness/forked_ranks.h"
#include "worker/harness/step_metrics_record.h"
#include "worker/harness/training_record.h"
#include "worker/runtime/checkpoint.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/cpu_priority.h"
#include "worker/runtime/gradient_sync.h"
#include "worker/runtime/host_memory.h"

namespace chimera::worker::harness {
namespace {

absl::Status CheckMetrics(const StepMetrics& metrics,
                          const ProgramExecutor& executor,
                          size_t instructions) {
  std::string problem;
  if (metrics.has_loss != executor.holds_last_stage()) {
    problem = "has_loss disagrees with holding the last stage";
  } else if (!(metrics.step_seconds > 0) || metrics.busy_seconds < 0 ||
             metrics.bubble_seconds < 0 ||
             metrics.busy_seconds > metrics.step_seconds) {
    problem = "step, busy and bubble times do not add up";
  } else if (metrics.op_seconds.size() != instructions) {
    problem = "not one time per instruction";
  } else if (metrics.memory_peak_bytes < metrics.memory_current_bytes ||
             metrics.memory_current_bytes <= 0) {
    problem = "memory peak below current usage";
  } else if (metrics.peak_stashed_slices < 1) {
    problem = "nothing was ever stashed";
  } else if (metrics.has_loss != (metrics.samples > 0)) {
    problem = "samples counted without a loss, or a loss without samples";
  }
  if (problem.empty()) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("step ", metrics.step, " metrics: ", problem));
}

// Runs `rank` of `job` with `comm` (null for a program with no transfer or
// allreduce), as RunPipelineRank describes; writes every step's metrics to
// `metrics_path` unless it is empty.
absl::Status RunRank(const PipelineJob& job, int rank, Communicator* comm,
                     const std::string& record_path,
                     const std::string& metrics_path) {
  LimitComputeThreads(1);
  RetainFreedHostMemory();
  if (static_cast<size_t>(rank) < job.nice_increments.size()) {
    RETURN_IF_ERROR(LowerCpuPriority(job.nice_increments[rank]));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
                   DataSource::Open(job.spec.data));
  ASSIGN_OR_RETURN(
      std::unique_ptr<ProgramExecutor> executor,
      ProgramExecutor::Create(schedule::RankScheduleOf(job.schedule, rank),
                              job.spec, *data, comm));
  std::optional<CheckpointDir> checkpoints;
  if (!job.checkpoint_root.empty()) {
    ASSIGN_OR_RETURN(const Directory root,
                     Directory::OpenRoot(job.checkpoint_root));
    ASSIGN_OR_RETURN(checkpoints, CheckpointDir::Open(root, "ck", 0, true));
  }
  if (job.first_step > 0) {
    RETURN_IF_ERROR(checkpoints->Load(*executor, job.first_step));
  }
  const size_t instructions = job.schedule.workers[rank].instructions.size();
  std::vector<double> losses;
  std::vector<StepMetrics> steps;
  for (int64_t step = job.first_step; step < job.spec.max_steps; ++step) {
    ASSIGN_OR_RETURN(StepMetrics metrics, executor->RunStep(step));
    RETURN_IF_ERROR(CheckMetrics(metrics, *executor, instructions));
    losses.push_back(metrics.loss);
    steps.push_back(std::move(metrics));
  }
  RETURN_IF_ERROR(executor->DrainPipeline(job.spec.max_steps - 1));
  if (checkpoints) {
    RETURN_IF_ERROR(
        checkpoints->Save(*executor, job.spec.max_steps,
                          StagesWrittenBy(schedule::OutlineOf(job.schedule),
                                          rank, job.spec.sharding)));
  }
  if (!metrics_path.empty()) {
    RETURN_IF_ERROR(WriteStepMetrics(metrics_path, steps));
  }
  if (record_path.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(executor->GatherReleasedParameters());
  return WriteTrainingRecord(record_path, executor->NamedParameters(), losses);
}

// What the forked processes of a run measured, from `dir`: one entry per
// process, each covering `steps` steps.
absl::StatusOr<PipelineMeasurements> Collect(const std::vector<RankExit>& exits,
                                             const std::string& dir,
                                             int steps) {
  std::string failures;
  for (const RankExit& exit : exits) {
    if (exit.ok()) continue;
    std::ostringstream description;
    description << exit;
    absl::StrAppend(&failures, failures.empty() ? "" : "; ", description.str());
  }
  if (!failures.empty()) {
    return absl::InternalError(absl::StrCat(
        "pipeline ranks failed (their errors are on stderr): ", failures));
  }
  PipelineMeasurements measurements;
  for (size_t rank = 0; rank < exits.size(); ++rank) {
    ASSIGN_OR_RETURN(
        measurements.ranks.emplace_back(),
        ReadStepMetrics(RankMetricsPath(dir, static_cast<int>(rank))));
    if (static_cast<int>(measurements.ranks.back().size()) != steps) {
      return absl::DataLossError(absl::StrCat("rank ", rank, " reported ",
                                              measurements.ranks.back().size(),
                                              " steps of ", steps));
    }
  }
  return measurements;
}

}  // namespace

PipelineJob MakePipelineJob(schedule::Schedule schedule,
                            const ModelConfig& model, int micro_batch_size,
                            uint64_t seed, absl::Duration op_timeout) {
  PipelineJob job;
  job.spec.model = model;
  job.spec.partition =
      Partition::Even(model.num_layers, schedule.topology.NumModelStages())
          .value();
  job.spec.micro_batch_size =
      micro_batch_size / schedule.topology.SlicesPerMicroBatch();
  job.spec.seed = seed;
  job.spec.max_steps = 1;
  job.spec.timeouts = Timeouts::Every(op_timeout);
  job.spec.data.vocab_size = model.vocab_size;
  job.spec.data.sample_length = SampleLength(model);
  job.spec.data.seed = seed;
  job.schedule = std::move(schedule);
  return job;
}

std::string RankRecordPath(const std::string& dir, int rank) {
  return absl::StrCat(dir, "/rank-", rank, ".bin");
}

absl::Status RunPipelineRank(const PipelineJob& job,
                             const std::string& record_path, int rank,
                             TcpRendezvous& rendezvous) {
  GlooOptions gloo;
  gloo.rank = rank;
  gloo.world_size = static_cast<int>(job.schedule.workers.size());
  gloo.groups = GradientGroups(schedule::OutlineOf(job.schedule),
                               job.spec.model.tie_embeddings);
  gloo.timeout = job.spec.timeouts.rendezvous;
  ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
                   CreateGlooCommunicator(rendezvous, gloo));
  return RunRank(
      job, rank, comm.get(), record_path,
      job.metrics_dir.empty() ? "" : RankMetricsPath(job.metrics_dir, rank));
}

absl::StatusOr<PipelineMeasurements> MeasurePipeline(
    PipelineJob job, const std::string& scratch_dir, absl::Duration deadline) {
  job.metrics_dir = scratch_dir;
  const int world = static_cast<int>(job.schedule.workers.size());
  return Collect(RunForkedRanks(world, deadline,
                                [&](int rank, TcpRendezvous& rendezvous) {
                                  return RunPipelineRank(job, "", rank,
                                                         rendezvous);
                                }),
                 scratch_dir, job.spec.max_steps);
}

absl::StatusOr<PipelineMeasurements> MeasureCopiesAtOnce(
    const PipelineJob& job, int copies, const std::string& scratch_dir,
    absl::Duration deadline) {
  if (job.schedule.workers.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("copies of a job run alone: it has ",
                     job.schedule.workers.size(), " workers, not 1"));
  }
  return Collect(RunForkedRanks(copies, deadline,
                                [&](int copy, TcpRendezvous&) {
                                  // Each copy is rank 0 of its own one-worker
                                  // job.
                                  return RunRank(
                                      job, 0, nullptr, "",
                                      RankMetricsPath(scratch_dir, copy));
                                }),
                 scratch_dir, job.spec.max_steps);
}

}  // namespace chimera::worker::harness
