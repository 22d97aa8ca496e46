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
//       [--job ...] [--steps 3] [--warmup 1]
//
// samples/s of a run: samples of the measured steps over the sum of their
// step times, a step lasting as long as its slowest rank.
//
// P cores do not always give P times one core: processes computing at once
// share the memory bus and caches (and vCPUs may be hyperthreads of one
// core). So it also runs P copies of that single process at once and
// reports how many times one copy's samples/s they reach together
// ("P-process scaling"), and the pipeline against that achievable
// throughput (scaling x single). A benchmark: it prints a markdown table
// (docs/runtime-measurements.md), never passes or fails on time, and exits 1
// only when a job cannot be run.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "bench/pipeline_runs.h"
#include "common/status_macros.h"
#include "schedule/generator.h"
#include "tests/support/temp_dir.h"
#include "worker/harness/pipeline_job.h"
#include "worker/standalone/standalone.h"

namespace chimera::worker {
namespace {

using harness::PipelineJob;
using harness::PipelineMeasurements;

using bench::Breakdown;
using bench::FiguresOf;
using bench::HarnessJob;
using bench::kRunDeadline;
using bench::StepFigures;

using Flags = bench::RunFlags;

int OnlineCores() {
  return std::max(1, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
}

// Prints the job's table row; returns the per-op breakdown.
absl::StatusOr<std::string> RunJob(const std::string& path,
                                   const Flags& flags) {
  // Data paths are relative to the current directory, as `chimera run`'s.
  TaskSite site;
  ASSIGN_OR_RETURN(site.roots, WorkerRootsFrom("", ""));
  ASSIGN_OR_RETURN(const StandaloneRun run, LoadStandaloneJob(path, site));
  const schedule::ScheduleParams& params = run.params;
  const int workers = static_cast<int>(run.schedule.workers.size());
  const chimera::testing::TempDir scratch[3];
  ASSIGN_OR_RETURN(
      PipelineMeasurements pipelined,
      harness::MeasurePipeline(
          HarnessJob(run, run.schedule, flags.warmup + flags.steps),
          scratch[0].path(), kRunDeadline));

  // The whole model in one process: the same samples per step.
  schedule::ScheduleParams single_params;
  single_params.scheme = schedule::Scheme::kOneFOneB;
  single_params.micro_batches = params.width * params.micro_batches;
  ASSIGN_OR_RETURN(schedule::Schedule single_schedule,
                   schedule::GenerateSchedule(single_params));
  PipelineJob single_job =
      HarnessJob(run, single_schedule, flags.warmup + flags.steps);
  ASSIGN_OR_RETURN(single_job.spec.partition,
                   Partition::Even(run.spec.model.num_layers, 1));
  ASSIGN_OR_RETURN(
      PipelineMeasurements single,
      harness::MeasurePipeline(single_job, scratch[1].path(), kRunDeadline));

  ASSIGN_OR_RETURN(PipelineMeasurements copies,
                   harness::MeasureCopiesAtOnce(
                       single_job, workers, scratch[2].path(), kRunDeadline));

  const StepFigures pipeline = FiguresOf(pipelined, flags.warmup);
  const StepFigures one = FiguresOf(single, flags.warmup);
  const double ideal =
      std::min(workers, OnlineCores()) * one.samples_per_second;
  const double scaling =
      FiguresOf(copies, flags.warmup).samples_per_second /
      one.samples_per_second;
  std::printf(
      "| %s | %s | %d | %d | %d | %.2f | %.3f | %.2f | %.2f | %.0f%% | %.2f | "
      "%.0f%% |\n",
      path.c_str(), schedule::SchemeName(params.scheme).c_str(), params.depth,
      params.micro_batches, workers, pipeline.samples_per_second,
      pipeline.bubble_ratio, one.samples_per_second, ideal,
      100 * pipeline.samples_per_second / ideal, scaling,
      100 * pipeline.samples_per_second / (scaling * one.samples_per_second));
  std::fflush(stdout);
  return Breakdown(path, run.schedule, pipelined, flags.warmup) +
         Breakdown(absl::StrCat(path, " (single process)"), single_schedule,
                   single, flags.warmup);
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::bench::RestartWithSingleThreadedPools(argv);
  chimera::worker::Flags flags;
  CLI::App app{"Pipeline samples/s against one process on the whole model"};
  chimera::bench::AddRunFlags(app, flags);
  CLI11_PARSE(app, argc, argv);
  std::printf(
      "one single-threaded process per worker; %d measured steps after %d "
      "warm-up; %d cores\n\n"
      "| job | scheme | D | N | P | pipelined samples/s | pipelined bubble | "
      "single-process samples/s | ideal (min(P, cores) x single) | of ideal | "
      "P-process "
      "scaling | "
      "of achievable (scaling x single) |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      flags.steps, flags.warmup, chimera::worker::OnlineCores());
  return chimera::bench::RunEveryJob(flags.jobs, [&](const std::string& job) {
    return chimera::worker::RunJob(job, flags);
  });
}
