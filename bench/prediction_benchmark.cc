// How well the planner predicts a real run. For each job file (whose
// parallelism is fixed), it profiles the job's model in this process
// (`chimera-worker profile`'s measurement: per layer, forward and backward
// at each micro-batch size, single-threaded as the job's workers run), lets
// the planner predict the job's step time and bubble on a cluster file that
// describes this machine, once from that measured profile and once from the
// analytic model, runs the job for real (one forked single-threaded process
// per worker, the worker's harness), and prints predicted,
// measured and the error.
//
//   prediction_benchmark --cluster examples/clusters/local-cpu.yaml
//       --job examples/bench/bert-gpipe-d2.yaml [--job ...] [--steps 3]
//       [--warmup 1]
//
// A benchmark: it prints a markdown table (docs/planner.md) and where each
// measured rank's step went, and where the simulator, from the measured
// profile, says it goes, never passes or fails on accuracy, and exits 1
// only when a job or the cluster cannot be used.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/pipeline_runs.h"
#include "common/status_macros.h"
#include "jobspec/job_file.h"
#include "planner/analytic_profile.h"
#include "planner/cluster_file.h"
#include "planner/plan_evaluator.h"
#include "planner/plan_params.h"
#include "schedule/simulator.h"
#include "tests/support/temp_dir.h"
#include "worker/profile/profiler.h"

namespace chimera::bench {
namespace {

struct Flags : RunFlags {
  std::string cluster;
};

// Signed relative error of PREDICTED against MEASURED, in percent.
double ErrorPercent(double predicted, double measured) {
  return 100 * (predicted - measured) / measured;
}

absl::StatusOr<chimera::v1::Plan> PlanOf(const chimera::v1::TrainJob& job) {
  std::optional<chimera::v1::Plan> plan = planner::FixedPlan(job);
  if (!plan) {
    return absl::InvalidArgumentError(
        "the job must fix spec.parallelism (schedule, pipeline, data, "
        "microBatches) for its plan to be predicted as it runs");
  }
  return *std::move(plan);
}

absl::StatusOr<chimera::v1::Prediction> Predict(
    const chimera::v1::TrainJob& job, const chimera::v1::Cluster& cluster,
    const chimera::v1::ModelProfile& profile) {
  ASSIGN_OR_RETURN(const chimera::v1::Plan plan, PlanOf(job));
  return planner::PredictPlan({job, cluster.spec(), profile}, plan);
}

// Where the simulator says each rank's step goes, by op kind, in the
// measured breakdown's form: "LABEL predicted rank R: step S s; OP SECONDS".
absl::StatusOr<std::string> PredictedBreakdown(
    const std::string& label, const chimera::v1::TrainJob& job,
    const chimera::v1::Cluster& cluster,
    const chimera::v1::ModelProfile& profile) {
  ASSIGN_OR_RETURN(const chimera::v1::Plan plan, PlanOf(job));
  ASSIGN_OR_RETURN(const planner::Candidate candidate, planner::CandidateOf(plan));
  ASSIGN_OR_RETURN(const planner::SimulationInputs inputs,
                   planner::PrepareSimulation({job, cluster.spec(), profile},
                                              candidate));
  ASSIGN_OR_RETURN(const schedule::SimulationResult result,
                   schedule::Simulate(inputs.program, inputs.costs));
  std::string text;
  for (const schedule::WorkerResult& worker : result.workers) {
    const auto& program = inputs.program.workers[worker.rank].instructions;
    std::map<std::string, double> seconds;
    for (size_t i = 0; i < program.size(); ++i) {
      seconds[schedule::OpName(program[i].op)] +=
          worker.timings[i].end - worker.timings[i].start;
    }
    absl::StrAppend(&text, OpSecondsLine(label + " predicted", worker.rank,
                                         result.makespan, seconds));
  }
  return text;
}

// Prints the job's table row; returns where its ranks' steps went.
absl::StatusOr<std::string> RunJob(const std::string& path,
                                   const chimera::v1::Cluster& cluster,
                                   const Flags& flags) {
  // Data paths are relative to the current directory, as `chimera run`'s.
  worker::TaskSite site;
  ASSIGN_OR_RETURN(site.roots, worker::WorkerRootsFrom("", ""));
  ASSIGN_OR_RETURN(const chimera::v1::TrainJob job,
                   jobspec::LoadJobFile(path, {.data_root = site.roots.data}));
  ASSIGN_OR_RETURN(const worker::StandaloneRun run,
                   worker::LoadStandaloneJob(path, site));

  ASSIGN_OR_RETURN(const chimera::v1::ModelProfile measured_profile,
                   worker::ProfileJob(job, /*gpu_index=*/0, site.roots.data));
  ASSIGN_OR_RETURN(const chimera::v1::Prediction from_profile,
                   Predict(job, cluster, measured_profile));
  ASSIGN_OR_RETURN(const chimera::v1::Prediction from_analytic,
                   Predict(job, cluster,
                           planner::AnalyticProfile(job.spec().model(),
                                                    cluster.spec().device())));

  const chimera::testing::TempDir scratch;
  ASSIGN_OR_RETURN(
      const worker::harness::PipelineMeasurements measured,
      worker::harness::MeasurePipeline(
          HarnessJob(run, run.schedule, flags.warmup + flags.steps),
          scratch.path(), kRunDeadline));
  const StepFigures real = FiguresOf(measured, flags.warmup);

  const schedule::ScheduleParams& params = run.params;
  std::printf(
      "| %s | %s | %d | %d | %zu | %.3f | %.3f | %+.1f%% | %.3f | %+.1f%% | "
      "%.2f | %.2f |\n",
      path.c_str(), schedule::SchemeName(params.scheme).c_str(), params.depth,
      params.micro_batches, run.schedule.workers.size(), real.step_seconds,
      from_profile.iteration_seconds(),
      ErrorPercent(from_profile.iteration_seconds(), real.step_seconds),
      from_analytic.iteration_seconds(),
      ErrorPercent(from_analytic.iteration_seconds(), real.step_seconds),
      real.bubble_ratio, from_profile.bubble_ratio());
  std::fflush(stdout);
  ASSIGN_OR_RETURN(const std::string predicted,
                   PredictedBreakdown(path, job, cluster, measured_profile));
  return Breakdown(path, run.schedule, measured, flags.warmup) +
         Breakdown(path + " (CPU time)", run.schedule, measured, flags.warmup,
                   OpClock::kCpu) +
         predicted;
}

}  // namespace
}  // namespace chimera::bench

int main(int argc, char** argv) {
  chimera::bench::RestartWithSingleThreadedPools(argv);
  chimera::bench::Flags flags;
  CLI::App app{"The planner's predicted step time against a real run"};
  app.add_option("--cluster", flags.cluster,
                 "Cluster file describing this machine (cores, links)")
      ->required();
  chimera::bench::AddRunFlags(app, flags);
  CLI11_PARSE(app, argc, argv);

  chimera::v1::Cluster cluster;
  const chimera::FieldErrors errors =
      chimera::planner::LoadClusterFile(flags.cluster, &cluster);
  if (!errors.empty()) {
    std::fprintf(stderr, "%s: %s\n", flags.cluster.c_str(),
                 errors.ToStatus().ToString().c_str());
    return 1;
  }
  std::printf(
      "cluster %s; one single-threaded process per worker; %d measured steps "
      "after %d warm-up\n\n"
      "| job | scheme | D | N | P | measured step s | predicted, measured "
      "profile | error | predicted, analytic profile | error | measured bubble "
      "| predicted bubble |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      flags.cluster.c_str(), flags.steps, flags.warmup);
  return chimera::bench::RunEveryJob(flags.jobs, [&](const std::string& job) {
    return chimera::bench::RunJob(job, cluster, flags);
  });
}
