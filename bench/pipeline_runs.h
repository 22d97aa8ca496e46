// What the benchmarks that run a job's pipeline for real share: the harness
// job for a loaded job file, the samples/s, step time and bubble of the
// measured steps, and where each rank's step time went.
//
//   ASSIGN_OR_RETURN(StandaloneRun run, LoadStandaloneJob(path, site));
//   ASSIGN_OR_RETURN(PipelineMeasurements m,
//                    MeasurePipeline(HarnessJob(run, run.schedule, 1 + 3),
//                                    scratch.path(), kRunDeadline));
//   StepFigures figures = FiguresOf(m, /*warmup=*/1);
#ifndef CHIMERA_BENCH_PIPELINE_RUNS_H_
#define CHIMERA_BENCH_PIPELINE_RUNS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "schedule/program.h"
#include "worker/harness/pipeline_job.h"
#include "worker/standalone/standalone.h"

namespace chimera::bench {

// Starts this benchmark again, from the top, with the environment of a
// single-threaded worker's task process (ComputeThreadsEnvironment(1)) and
// the BLAS core the CPU calls for (SettleBlasCore) unless it already has
// them: OpenBLAS sizes its thread pool when it loads, and ranks
// forked from a process whose pool was sized for every core stayed 15 %
// slower although each limited itself to one thread (measured: Chimera D = 2
// BERT steps 1.97 s against 1.71 s). Call first thing in main.
void RestartWithSingleThreadedPools(char** argv);

// What every such benchmark is told: the job files (their parallelism
// fixed) and how many steps to measure after how many warm-up steps.
struct RunFlags {
  std::vector<std::string> jobs;
  int steps = 3;
  int warmup = 1;
};
// --job (repeatable, required), --steps and --warmup.
void AddRunFlags(CLI::App& app, RunFlags& flags);

// Runs RUN_JOB on every job file in turn (it prints the job's table row and
// returns where its steps went), then prints those breakdowns. A job that
// cannot run is named on stderr and the others still run; 1 when one could
// not, else 0: the benchmark's exit code.
int RunEveryJob(
    const std::vector<std::string>& jobs,
    const std::function<absl::StatusOr<std::string>(const std::string&)>&
        run_job);

// A whole run, its processes killed after this.
inline constexpr absl::Duration kRunDeadline = absl::Minutes(10);

// The harness job of RUN's task on SCHEDULE for STEPS steps, every transfer,
// collective and the joining bounded by two minutes.
worker::harness::PipelineJob HarnessJob(const worker::StandaloneRun& run,
                                        schedule::Schedule schedule, int steps);

struct StepFigures {
  double samples_per_second = 0;
  // Mean over the measured steps of the slowest rank's step time.
  double step_seconds = 0;
  // Mean over ranks and measured steps of bubble / step time.
  double bubble_ratio = 0;
};

// The figures of the steps after the first WARMUP.
StepFigures FiguresOf(const worker::harness::PipelineMeasurements& measured,
                      int warmup);

// "LABEL rank R: step S s; OP SECONDS ...": one rank's step and the seconds
// of each op kind in it, as one line.
std::string OpSecondsLine(const std::string& label, int rank, double step,
                          const std::map<std::string, double>& seconds);

// Which time of an op: from its start to its end, or the CPU time its thread
// spent on it (its work, without waiting for a core).
enum class OpClock { kWall, kCpu };

// Calls `visit(rank, instruction, seconds)` for each instruction of each
// rank in each step after the first WARMUP, its seconds on `clock`.
template <typename Visit>
void ForEachMeasuredOp(const schedule::Schedule& schedule,
                       const worker::harness::PipelineMeasurements& measured,
                       int warmup, Visit visit,
                       OpClock clock = OpClock::kWall) {
  for (size_t rank = 0; rank < measured.ranks.size(); ++rank) {
    const auto& program = schedule.workers[rank].instructions;
    const auto& steps = measured.ranks[rank];
    for (size_t s = warmup; s < steps.size(); ++s) {
      const std::vector<double>& seconds = clock == OpClock::kWall
                                               ? steps[s].op_seconds
                                               : steps[s].op_cpu_seconds;
      for (size_t i = 0; i < program.size(); ++i) {
        visit(rank, program[i], seconds[i]);
      }
    }
  }
}

// One OpSecondsLine per rank, of the mean seconds per measured step on
// `clock` (the step itself always on the wall clock).
std::string Breakdown(const std::string& label,
                      const schedule::Schedule& schedule,
                      const worker::harness::PipelineMeasurements& measured,
                      int warmup, OpClock clock = OpClock::kWall);

}  // namespace chimera::bench

#endif  // CHIMERA_BENCH_PIPELINE_RUNS_H_
