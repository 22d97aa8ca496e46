// One rank of a small training job inside a forked test process: joins the
// Gloo groups of the schedule, runs its program for a few steps with
// ProgramExecutor, checks each step's metrics are plausible and writes its
// parameters and losses as a TrainingRecord for the parent to compare, and
// (with metrics_dir) every step's StepMetrics for tests and benchmarks that
// compare memory or timing across ranks.
//
//   RunForkedRanks(world, deadline, [&](int rank, TcpRendezvous& rendezvous) {
//     return RunPipelineRank(job, RankRecordPath(dir, rank), rank, rendezvous);
//   });
//
// or, for what each rank measured (tests and bench/ programs):
//
//   ASSIGN_OR_RETURN(PipelineMeasurements m,
//                    MeasurePipeline(job, scratch_dir, deadline));
//   m.ranks[r][s].memory_peak_bytes;  // rank r, step s
#ifndef CHIMERA_WORKER_HARNESS_PIPELINE_JOB_H_
#define CHIMERA_WORKER_HARNESS_PIPELINE_JOB_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "schedule/program.h"
#include "worker/comm/tcp_rendezvous.h"
#include "worker/model/model_config.h"
#include "worker/runtime/data_source.h"
#include "worker/runtime/program_executor.h"
#include "worker/runtime/step_metrics.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker::harness {

// A pipeline of forked ranks: every rank runs `spec` (spec.max_steps steps,
// joining within spec.timeouts.rendezvous) on its share of `schedule`.
struct PipelineJob {
  schedule::Schedule schedule;
  TaskSpec spec;
  // When set, rank r writes its metrics of every step to
  // RankMetricsPath(metrics_dir, r) (step_metrics_record.h).
  std::string metrics_dir;
  // When set, the ranks checkpoint under this root, as job "ck": each saves
  // what it writes of its stages (StagesWrittenBy) after its last step, and
  // with first_step > 0 they start from the checkpoint of that step and
  // run steps [first_step, spec.max_steps).
  std::string checkpoint_root;
  int64_t first_step = 0;
  // When set, rank r lowers its CPU priority by nice_increments[r]
  // (LowerCpuPriority) before it starts, as the task of a planned job does
  // by spec.nice_increment; spec.nice_increment itself is ignored here.
  std::vector<int> nice_increments;
};

// The base every forked-pipeline test and benchmark adjusts: `model`
// on `schedule` with micro-batches of `micro_batch_size` samples (each
// replicated stage's replicas run a slice of them: the size must divide by
// Topology::SlicesPerMicroBatch), its blocks split evenly over the model
// stages, synthetic
// samples of the model's shape, `seed` for the parameters and the data, and
// `op_timeout` bounding each transfer, collective and the joining. Callers
// set the optimizer, the steps and whatever else they vary.
PipelineJob MakePipelineJob(schedule::Schedule schedule,
                            const ModelConfig& model, int micro_batch_size,
                            uint64_t seed, absl::Duration op_timeout);

// "<dir>/rank-<rank>.bin".
std::string RankRecordPath(const std::string& dir, int rank);

// Runs `rank` of `job` on one LibTorch thread; writes no TrainingRecord when
// `record_path` is empty. INTERNAL when a step's metrics
// are implausible (a loss on a rank without the last stage, negative bubble
// time, ...); otherwise the first error of joining, running or writing.
absl::Status RunPipelineRank(const PipelineJob& job,
                             const std::string& record_path, int rank,
                             TcpRendezvous& rendezvous);

// Every rank's StepMetrics, by rank then step.
struct PipelineMeasurements {
  std::vector<std::vector<StepMetrics>> ranks;
};

// Runs every rank of `job` in forked processes (RunForkedRanks, killed at
// `deadline`) and collects their metrics through `scratch_dir`, an empty
// directory the caller owns (job.metrics_dir is replaced by it). INTERNAL
// naming the ranks that failed; DATA_LOSS when a rank's metrics do not
// cover job.spec.max_steps.
absl::StatusOr<PipelineMeasurements> MeasurePipeline(
    PipelineJob job, const std::string& scratch_dir, absl::Duration deadline);

// Runs `copies` independent copies of the one-worker `job` at once, each in
// a forked process, and collects each copy's metrics as a rank: what that
// many processes training alone reach together on this machine, the
// yardstick of a pipeline of as many workers. INVALID_ARGUMENT unless `job`
// has one worker; otherwise as MeasurePipeline.
absl::StatusOr<PipelineMeasurements> MeasureCopiesAtOnce(
    const PipelineJob& job, int copies, const std::string& scratch_dir,
    absl::Duration deadline);

}  // namespace chimera::worker::harness

#endif  // CHIMERA_WORKER_HARNESS_PIPELINE_JOB_H_
