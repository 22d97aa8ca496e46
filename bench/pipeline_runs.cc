#include "bench/pipeline_runs.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedule/simulator.h"
#include "worker/runtime/blas_core.h"
#include "worker/runtime/compute_threads.h"
#include "worker/runtime/task_spec.h"

namespace chimera::bench {

using worker::StepMetrics;
using worker::harness::PipelineJob;
using worker::harness::PipelineMeasurements;

constexpr absl::Duration kOpTimeout = absl::Minutes(2);

void RestartWithSingleThreadedPools(char** argv) {
  worker::SettleBlasCore(worker::ComputeThreadsEnvironment(1), argv);
}

void AddRunFlags(CLI::App& app, RunFlags& flags) {
  app.add_option("--job", flags.jobs,
                 "Job file with fixed parallelism (repeatable)")
      ->required();
  app.add_option("--steps", flags.steps, "Measured steps")
      ->check(CLI::Range(1, 1000));
  app.add_option("--warmup", flags.warmup, "Steps run before measuring")
      ->check(CLI::Range(0, 1000));
}

int RunEveryJob(
    const std::vector<std::string>& jobs,
    const std::function<absl::StatusOr<std::string>(const std::string&)>&
        run_job) {
  int exit_code = 0;
  std::string breakdowns;
  for (const std::string& job : jobs) {
    const absl::StatusOr<std::string> breakdown = run_job(job);
    if (!breakdown.ok()) {
      std::fprintf(stderr, "%s: %s\n", job.c_str(),
                   breakdown.status().ToString().c_str());
      exit_code = 1;
      continue;
    }
    breakdowns += *breakdown;
  }
  std::printf("\nseconds per step by op kind:\n%s", breakdowns.c_str());
  return exit_code;
}

PipelineJob HarnessJob(const worker::StandaloneRun& run,
                       schedule::Schedule schedule, int steps) {
  PipelineJob job;
  job.schedule = std::move(schedule);
  job.spec = run.spec;
  job.spec.max_steps = steps;
  job.spec.timeouts = worker::Timeouts::Every(kOpTimeout);
  return job;
}

StepFigures FiguresOf(const PipelineMeasurements& measured, int warmup) {
  double samples = 0;
  double seconds = 0;
  double bubble = 0;
  const size_t steps = measured.ranks.front().size();
  for (size_t step = warmup; step < steps; ++step) {
    double slowest = 0;
    for (const std::vector<StepMetrics>& rank : measured.ranks) {
      samples += static_cast<double>(rank[step].samples);
      slowest = std::max(slowest, rank[step].step_seconds);
      bubble += schedule::BubbleRatio(rank[step].bubble_seconds,
                                      rank[step].step_seconds);
    }
    seconds += slowest;
  }
  const double measured_steps = static_cast<double>(steps - warmup);
  return {
      samples / seconds, seconds / measured_steps,
      bubble / (measured_steps * static_cast<double>(measured.ranks.size()))};
}

std::string OpSecondsLine(const std::string& label, int rank, double step,
                          const std::map<std::string, double>& seconds) {
  std::string line = absl::StrCat(label, " rank ", rank, ": step ",
                                  absl::SixDigits(step), " s;");
  for (const auto& [op, total] : seconds) {
    absl::StrAppend(&line, " ", op, " ", absl::SixDigits(total));
  }
  return line + "\n";
}

std::string Breakdown(const std::string& label,
                      const schedule::Schedule& schedule,
                      const PipelineMeasurements& measured, int warmup,
                      OpClock clock) {
  std::vector<std::map<std::string, double>> seconds(measured.ranks.size());
  ForEachMeasuredOp(
      schedule, measured, warmup,
      [&](size_t rank, const schedule::Instruction& inst, double op_seconds) {
        seconds[rank][schedule::OpName(inst.op)] += op_seconds;
      },
      clock);
  std::string text;
  for (size_t rank = 0; rank < measured.ranks.size(); ++rank) {
    const std::vector<StepMetrics>& steps = measured.ranks[rank];
    double step = 0;
    for (size_t s = warmup; s < steps.size(); ++s)
      step += steps[s].step_seconds;
    const double count = static_cast<double>(steps.size() - warmup);
    for (auto& [op, total] : seconds[rank]) total /= count;
    absl::StrAppend(&text, OpSecondsLine(label, static_cast<int>(rank),
                                         step / count, seconds[rank]));
  }
  return text;
}

}  // namespace chimera::bench
