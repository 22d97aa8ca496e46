// Pipeline throughput against one process training the whole model. For
// each job file (whose parallelism is fixed), runs the job's pipeline with
// one forked, single-threaded process per worker (the worker's harness,
// worker/harness/pipeline_job.h) and, in the same run,
// one single-threaded process training the whole model on the same
// micro-batch size and mini-batch (a depth-1 pipeline: gradient accumulation
// over the job's W·N micro-batches, the same executor and optimizer). The
// ideal for P worker processes is min(P, cores) times the single process's
// samples/s. Every process runs single-threaded for real: LibTorch's pools
// and the BLAS's own threads (LimitComputeThreads).
//
//   throughput_benchmark --job examples/bench/bert-chimera-d2.yaml
//       [--job ...] [--steps 3] [--warmup 1] [--cpu-priorities]
//
// samples/s of a run: samples of the measured steps over the sum of their
// step times, a step lasting as long as its slowest rank.
//
// P cores do not always give P times one core: processes computing at once
// share the memory bus and caches (and vCPUs may be hyperthreads of one
// core). So it also runs min(P, cores) copies of that single process at once
// (no more compute at once however many ranks share the cores; more copies
// would measure what time-slicing them costs, which the pipeline's ranks,
// waiting for each other much of a step, do not pay alike) and reports how
// many times one copy's samples/s they reach together ("scaling"), and the
// pipeline against that achievable throughput (scaling x single). The
// schedule's own bound is below that by the time its order leaves the cores
// idle (ScheduleBoundAtMeasuredCosts: the programs simulated, steps back to
// back, on this machine's cores at the CPU time each op took in the run,
// communication free); the pipeline is set against that bound too. Where ranks
// outnumber the cores, --cpu-priorities runs the pipeline again with each rank
// yielding the cores to the busier ones (cpu_priority.h), as the tasks of a
// planned job do. A benchmark: it prints a markdown table
// (docs/runtime-measurements.md), never passes or fails on time, and exits 1
// only when a job cannot be run.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench/pipeline_runs.h"
#include "common/status_macros.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "schedule/step_unrolling.h"
#include "tests/support/temp_dir.h"
#include "worker/harness/pipeline_job.h"
#include "worker/runtime/cpu_priority.h"
#include "worker/standalone/standalone.h"

namespace chimera::worker {
namespace {

using harness::PipelineJob;
using harness::PipelineMeasurements;

using bench::Breakdown;
using bench::FiguresOf;
using bench::ForEachMeasuredOp;
using bench::HarnessJob;
using bench::kRunDeadline;
using bench::OpClock;
using bench::StepFigures;

using Flags = bench::RunFlags;

int OnlineCores() {
  return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

// Mean seconds per whole micro-batch (or per step, for an update) of one op
// kind of one model stage, over the ranks and measured steps that ran it.
class MeanCosts {
 public:
  void Add(int model_stage, schedule::OpKind op, double seconds) {
    auto& [sum, count] = costs_[{model_stage, op}];
    sum += seconds;
    ++count;
  }
  // Per model stage, 0 where it never ran.
  std::vector<double> Of(schedule::OpKind op, int model_stages) const {
    std::vector<double> means(model_stages, 0.0);
    for (const auto& [key, sum_count] : costs_) {
      if (key.second == op) {
        means[key.first] = sum_count.first / sum_count.second;
      }
    }
    return means;
  }

 private:
  std::map<std::pair<int, schedule::OpKind>, std::pair<double, int>> costs_;
};

// Each rank's compute (forwards, backwards and updates) per measured step, in
// CPU seconds.
std::vector<double> ComputeSecondsOfEachRank(
    const schedule::Schedule& schedule, const PipelineMeasurements& measured,
    int warmup) {
  std::vector<double> seconds(measured.ranks.size(), 0.0);
  ForEachMeasuredOp(
      schedule, measured, warmup,
      [&](size_t rank, const schedule::Instruction& inst,
          double measured_seconds) {
        if (schedule::IsCompute(inst.op) || schedule::UpdatesWeights(inst.op)) {
          seconds[rank] += measured_seconds;
        }
      },
      OpClock::kCpu);
  const size_t steps =
      measured.ranks.empty() ? 0 : measured.ranks[0].size() - warmup;
  for (double& rank_seconds : seconds) {
    rank_seconds /= std::max<size_t>(1, steps);
  }
  return seconds;
}

// The ranks' compute together per measured step, in CPU seconds.
double ComputeSecondsPerStep(const schedule::Schedule& schedule,
                             const PipelineMeasurements& measured, int warmup) {
  const std::vector<double> ranks =
      ComputeSecondsOfEachRank(schedule, measured, warmup);
  return std::accumulate(ranks.begin(), ranks.end(), 0.0);
}

// The schedule's bound: its samples/s, and the share of the cores it keeps
// computing.
struct ScheduleBound {
  double cores_busy = 0;
  double samples_per_second = 0;
};

// The most the schedule itself allows: its programs simulated, steps back to
// back as the run takes them (SimulateSteadyStep: a step may start on one
// rank before another has finished the last), on this machine's cores,
// shared by the ranks, with each model stage's forward, backward (whole or in
// its halves) and shard step and each rank's optimizer step at the CPU time the
// pipelined ranks spent on them (not their wall time, which holds the waits for
// a core of ranks that outnumber the cores, and so depends on how the kernel
// shared the cores), scaled by what the one process computes in a step against
// what the ranks computed together (processes computing at once share the
// memory bus), and nothing else taking time: no transfers, no collectives. Its
// samples/s, times the scaling's share of the cores used (what the memory bus
// allows), is the bound; `cores_busy` the share of the cores its
// simulation keeps computing. nullopt for a recomputing job, whose backward
// times hold a forward the simulator would add again.
std::optional<ScheduleBound> ScheduleBoundAtMeasuredCosts(
    const schedule::Schedule& schedule, const PipelineMeasurements& measured,
    int warmup, double single_compute_seconds, double samples_per_step,
    int cores, double scaling) {
  const schedule::Topology& topology = schedule.topology;
  const double alone = single_compute_seconds /
                       ComputeSecondsPerStep(schedule, measured, warmup);
  MeanCosts costs;
  double optimizer_sum = 0;
  int optimizer_count = 0;
  bool recomputes = false;
  ForEachMeasuredOp(
      schedule, measured, warmup,
      [&](size_t, const schedule::Instruction& inst, double measured_seconds) {
        const double seconds = alone * measured_seconds;
        const int model_stage = topology.ModelStage({inst.chunk, inst.stage});
        recomputes |= inst.recompute;
        if (inst.op == schedule::OpKind::kOptimizerStep) {
          optimizer_sum += seconds;
          ++optimizer_count;
        } else if (inst.op == schedule::OpKind::kShardStep) {
          costs.Add(model_stage, inst.op, seconds);
        } else if (schedule::IsCompute(inst.op)) {
          costs.Add(model_stage, inst.op,
                    seconds * inst.num_parts / inst.micro_batches.size());
        }
      },
      OpClock::kCpu);
  if (recomputes) return std::nullopt;
  const int stages = topology.NumModelStages();
  schedule::CostModel model;
  model.stage_forward = costs.Of(schedule::OpKind::kForward, stages);
  model.stage_backward = costs.Of(schedule::OpKind::kBackward, stages);
  model.stage_backward_input =
      costs.Of(schedule::OpKind::kBackwardInput, stages);
  model.stage_backward_weight =
      costs.Of(schedule::OpKind::kBackwardWeight, stages);
  model.stage_shard_step = costs.Of(schedule::OpKind::kShardStep, stages);
  if (optimizer_count > 0) {
    model.optimizer_step = optimizer_sum / optimizer_count;
  }
  const int ranks = static_cast<int>(schedule.workers.size());
  model.node_of_rank.assign(ranks, 0);
  model.cores_per_node = cores;
  const absl::StatusOr<schedule::SteadyStep> step =
      schedule::SimulateSteadyStep(schedule, model);
  if (!step.ok() || step->seconds <= 0) return std::nullopt;
  const int used_cores = std::min(ranks, cores);
  return ScheduleBound{(1 - step->bubble_ratio) * ranks / used_cores,
                       scaling / used_cores * samples_per_step / step->seconds};
}

// What a pipeline run of one job is set against: the single process on the
// whole model, and how min(P, cores) copies of it scale together.
struct Yardsticks {
  schedule::Schedule single_schedule;
  PipelineMeasurements single;
  double single_samples_per_second = 0;
  double scaling = 0;
};

// Prints the table row of `pipelined`, a run of `run`'s pipeline, labelled
// `label`.
void PrintRow(const std::string& label, const StandaloneRun& run,
              const PipelineMeasurements& pipelined, const Yardsticks& yard,
              const Flags& flags) {
  const schedule::ScheduleParams& params = run.params;
  const int workers = static_cast<int>(run.schedule.workers.size());
  const StepFigures pipeline = FiguresOf(pipelined, flags.warmup);
  const double one = yard.single_samples_per_second;
  const double ideal = std::min(workers, OnlineCores()) * one;
  const double achievable = yard.scaling * one;
  const std::optional<ScheduleBound> bound = ScheduleBoundAtMeasuredCosts(
      run.schedule, pipelined, flags.warmup,
      ComputeSecondsPerStep(yard.single_schedule, yard.single, flags.warmup),
      pipeline.samples_per_second * pipeline.step_seconds, OnlineCores(),
      yard.scaling);
  const std::string bound_columns =
      bound ? absl::StrFormat(
                  "%.2f | %.2f | %.0f%%", bound->cores_busy,
                  bound->samples_per_second,
                  100 * pipeline.samples_per_second / bound->samples_per_second)
            : "- | - | -";
  std::printf(
      "| %s | %s | %d | %d | %d | %.2f | %.3f | %.2f | %.2f | %.0f%% | %.2f | "
      "%.0f%% | %s |\n",
      label.c_str(), schedule::SchemeName(params.scheme).c_str(), params.depth,
      params.micro_batches, workers, pipeline.samples_per_second,
      pipeline.bubble_ratio, one, ideal,
      100 * pipeline.samples_per_second / ideal, yard.scaling,
      100 * pipeline.samples_per_second / achievable, bound_columns.c_str());
  std::fflush(stdout);
}

absl::StatusOr<Yardsticks> MeasureYardsticks(const StandaloneRun& run,
                                             const Flags& flags) {
  const chimera::testing::TempDir scratch[2];
  Yardsticks yard;
  // The whole model in one process: the same samples per step.
  schedule::ScheduleParams single_params;
  single_params.scheme = schedule::Scheme::kOneFOneB;
  single_params.micro_batches = run.params.width * run.params.micro_batches;
  ASSIGN_OR_RETURN(yard.single_schedule,
                   schedule::GenerateSchedule(single_params));
  PipelineJob single_job =
      HarnessJob(run, yard.single_schedule, flags.warmup + flags.steps);
  // Replicated stages run slices; the single process, whole micro-batches.
  single_job.spec.micro_batch_size *=
      run.schedule.topology.SlicesPerMicroBatch();
  ASSIGN_OR_RETURN(single_job.spec.partition,
                   Partition::Even(run.spec.model.num_layers, 1));
  ASSIGN_OR_RETURN(
      yard.single,
      harness::MeasurePipeline(single_job, scratch[0].path(), kRunDeadline));
  ASSIGN_OR_RETURN(PipelineMeasurements copies,
                   harness::MeasureCopiesAtOnce(
                       single_job,
                       std::min(static_cast<int>(run.schedule.workers.size()),
                                OnlineCores()),
                       scratch[1].path(), kRunDeadline));
  yard.single_samples_per_second =
      FiguresOf(yard.single, flags.warmup).samples_per_second;
  yard.scaling = FiguresOf(copies, flags.warmup).samples_per_second /
                 yard.single_samples_per_second;
  return yard;
}

// Prints the job's table row (and with --cpu-priorities a second one);
// returns the per-op breakdown.
absl::StatusOr<std::string> RunJob(const std::string& path, const Flags& flags,
                                   bool cpu_priorities) {
  // Data paths are relative to the current directory, as `chimera run`'s.
  TaskSite site;
  ASSIGN_OR_RETURN(site.roots, WorkerRootsFrom("", ""));
  ASSIGN_OR_RETURN(const StandaloneRun run, LoadStandaloneJob(path, site));
  PipelineJob job = HarnessJob(run, run.schedule, flags.warmup + flags.steps);
  const chimera::testing::TempDir scratch[2];
  ASSIGN_OR_RETURN(
      PipelineMeasurements pipelined,
      harness::MeasurePipeline(job, scratch[0].path(), kRunDeadline));
  ASSIGN_OR_RETURN(const Yardsticks yard, MeasureYardsticks(run, flags));
  PrintRow(path, run, pipelined, yard, flags);
  std::string breakdown =
      Breakdown(path, run.schedule, pipelined, flags.warmup) +
      Breakdown(absl::StrCat(path, " (single process)"), yard.single_schedule,
                yard.single, flags.warmup);
  if (!cpu_priorities) return breakdown;

  // Again, each rank yielding the cores as a planned task does, by its
  // compute in the run above where a planned one goes by its prediction.
  job.nice_increments = NiceIncrements(
      ComputeSecondsOfEachRank(run.schedule, pipelined, flags.warmup),
      /*threads_per_rank=*/1, OnlineCores());
  if (std::all_of(job.nice_increments.begin(), job.nice_increments.end(),
                  [](int increment) { return increment == 0; })) {
    return breakdown;  // the run above is already what a planned job runs
  }
  const std::string label = absl::StrCat(
      path, " (nice ", absl::StrJoin(job.nice_increments, ","), ")");
  ASSIGN_OR_RETURN(
      const PipelineMeasurements yielding,
      harness::MeasurePipeline(job, scratch[1].path(), kRunDeadline));
  PrintRow(label, run, yielding, yard, flags);
  return breakdown + Breakdown(label, run.schedule, yielding, flags.warmup);
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::bench::RestartWithSingleThreadedPools(argv);
  chimera::worker::Flags flags;
  CLI::App app{"Pipeline samples/s against one process on the whole model"};
  chimera::bench::AddRunFlags(app, flags);
  bool cpu_priorities = false;
  app.add_flag("--cpu-priorities", cpu_priorities,
               "Run each job's pipeline a second time, each rank lowering its "
               "CPU priority by its nice increment from the first run's "
               "compute per rank (as a planned job's tasks do from their "
               "plan's prediction), and print that as a second row; not "
               "where no rank yields (every rank has a core, or their "
               "compute is even)");
  CLI11_PARSE(app, argc, argv);
  std::printf(
      "one single-threaded process per worker; %d measured steps after %d "
      "warm-up; %d cores\n\n"
      "| job | scheme | D | N | P | pipelined samples/s | pipelined bubble | "
      "single-process samples/s | ideal (min(P, cores) x single) | of ideal | "
      "scaling (min(P, cores) copies) | "
      "of achievable (scaling x single) | cores busy in the schedule's bound | "
      "schedule's bound samples/s | of bound |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      flags.steps, flags.warmup, chimera::worker::OnlineCores());
  return chimera::bench::RunEveryJob(flags.jobs, [&](const std::string& job) {
    return chimera::worker::RunJob(job, flags, cpu_priorities);
  });
}
