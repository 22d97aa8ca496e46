// Measured bubble ratios against the simulator's prediction, per scheme and
// per worker. For every scheme, runs a small GPT's pipeline with one forked,
// single-threaded process per worker (the integration tests' harness,
// tests/integration/worker/pipeline_job.h), takes the mean measured forward
// and backward time of every model stage (per whole micro-batch), feeds those
// to schedule::Simulate and prints, per worker, the measured bubble ratio
// (bubble / step time, mean over the measured steps) next to the simulated
// one (idle / makespan). Transfers and allreduces cost nothing in the
// simulation; the measured optimizer step is given to it.
//
//   bubble_benchmark [--depth 4] [--steps 5] [--warmup 1]
//
// A benchmark: it prints markdown tables (docs/runtime-measurements.md) and
// never passes or fails on time; it exits 1 only when a run fails.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/schedule/generator.h"
#include "coordinator/schedule/simulator.h"
#include "tests/integration/worker/pipeline_job.h"

namespace chimera::worker {
namespace {

using schedule::Instruction;
using schedule::OpKind;
using schedule::Scheme;
using testing::PipelineJob;
using testing::PipelineMeasurements;

constexpr absl::Duration kRunDeadline = absl::Minutes(5);
constexpr absl::Duration kOpTimeout = absl::Seconds(60);

struct Flags {
  int depth = 4;
  int steps = 5;
  int warmup = 1;
};

// Big enough that one op takes milliseconds (timer and scheduler noise stay
// small), small enough that all schemes run in a minute on two cores.
ModelConfig BenchGpt() {
  ModelConfig config;
  config.num_layers = 8;
  config.hidden_size = 128;
  config.ffn_size = 512;
  config.num_heads = 4;
  config.vocab_size = 256;
  config.seq_length = 64;
  config.dtype = at::kFloat;
  return config;
}

std::vector<std::pair<std::string, schedule::ScheduleParams>> Schemes(
    int depth) {
  std::vector<std::pair<std::string, schedule::ScheduleParams>> schemes;
  const auto add = [&](Scheme scheme, int chunks) {
    schedule::ScheduleParams params;
    params.scheme = scheme;
    params.depth = depth;
    params.micro_batches = depth;
    params.chunks = chunks;
    std::string name = schedule::SchemeName(scheme);
    if (chunks > 1) absl::StrAppend(&name, " (", chunks, " chunks)");
    schemes.emplace_back(std::move(name), params);
  };
  add(Scheme::kGpipe, 1);
  add(Scheme::kOneFOneB, 1);
  add(Scheme::kGems, 1);
  add(Scheme::kChimera, 1);
  add(Scheme::kMixPipe, 1);
  add(Scheme::kInterleaved, 2);
  add(Scheme::kBreadthFirst, 2);
  return schemes;
}

// Mean measured FORWARD / BACKWARD seconds per whole micro-batch of every
// model stage, and of OPTIMIZER_STEP, over the steps after the warm-up.
schedule::CostModel MeasuredCosts(const schedule::Schedule& schedule,
                                  const PipelineMeasurements& measured,
                                  int warmup) {
  const int stages = schedule.topology.NumModelStages();
  std::vector<double> forward(stages), backward(stages);
  std::vector<int> forwards(stages), backwards(stages);
  double optimizer = 0;
  int optimizer_steps = 0;
  for (size_t rank = 0; rank < measured.ranks.size(); ++rank) {
    const std::vector<Instruction>& program =
        schedule.workers[rank].instructions;
    for (size_t step = warmup; step < measured.ranks[rank].size(); ++step) {
      const std::vector<double>& seconds = measured.ranks[rank][step].op_seconds;
      for (size_t i = 0; i < program.size(); ++i) {
        const Instruction& inst = program[i];
        const int stage =
            schedule.topology.ModelStage({inst.chunk, inst.stage});
        if (inst.op == OpKind::kForward) {
          forward[stage] += seconds[i];
          forwards[stage] += static_cast<int>(inst.micro_batches.size());
        } else if (inst.op == OpKind::kBackward) {
          // A part of a halved backward is 1/num_parts of a micro-batch.
          backward[stage] += seconds[i] * inst.num_parts;
          ++backwards[stage];
        } else if (inst.op == OpKind::kOptimizerStep) {
          optimizer += seconds[i];
          ++optimizer_steps;
        }
      }
    }
  }
  schedule::CostModel costs;
  for (int stage = 0; stage < stages; ++stage) {
    costs.stage_forward.push_back(forward[stage] / forwards[stage]);
    costs.stage_backward.push_back(backward[stage] / backwards[stage]);
  }
  costs.optimizer_step = optimizer_steps > 0 ? optimizer / optimizer_steps : 0;
  return costs;
}

PipelineJob JobFor(schedule::Schedule schedule, const Flags& flags) {
  PipelineJob job;
  job.executor.model = BenchGpt();
  const int stages = schedule.topology.NumModelStages();
  const int64_t layers = job.executor.model.num_layers;
  for (int i = 0; i < stages; ++i) {
    job.executor.partition.push_back({i * layers / stages,
                                      (i + 1) * layers / stages});
  }
  job.executor.micro_batch_size = 4;
  job.executor.seed = 3;
  job.executor.optimizer.kind = OptimizerKind::kAdamW;
  job.executor.optimizer.lr = 1e-4;
  job.executor.p2p_timeout = kOpTimeout;
  job.executor.collective_timeout = kOpTimeout;
  job.data.vocab_size = BenchGpt().vocab_size;
  job.data.sample_length = BenchGpt().seq_length + 1;
  job.steps = flags.warmup + flags.steps;
  job.connect_timeout = kOpTimeout;
  job.schedule = std::move(schedule);
  return job;
}

absl::Status RunScheme(const std::string& name,
                       const schedule::ScheduleParams& params,
                       const Flags& flags) {
  ASSIGN_OR_RETURN(schedule::Schedule schedule,
                   schedule::GenerateSchedule(params));
  const PipelineJob job = JobFor(schedule, flags);
  ASSIGN_OR_RETURN(PipelineMeasurements measured,
                   testing::MeasurePipeline(job, kRunDeadline));
  const schedule::CostModel costs =
      MeasuredCosts(schedule, measured, flags.warmup);
  ASSIGN_OR_RETURN(schedule::SimulationResult simulated,
                   schedule::Simulate(schedule, costs));

  std::printf("\n### %s, D = %d, N = %d\n\n", name.c_str(), params.depth,
              params.micro_batches);
  std::printf("stage costs (ms, forward/backward per micro-batch):");
  for (size_t s = 0; s < costs.stage_forward.size(); ++s) {
    std::printf(" %.1f/%.1f", 1e3 * costs.stage_forward[s],
                1e3 * costs.stage_backward[s]);
  }
  std::printf("; optimizer step %.1f ms\n\n", 1e3 * costs.optimizer_step);
  std::printf(
      "| worker | measured bubble | simulated bubble | measured step (ms) | "
      "simulated step (ms) |\n|---|---|---|---|---|\n");
  double measured_sum = 0;
  double step_sum = 0;
  for (size_t rank = 0; rank < measured.ranks.size(); ++rank) {
    double ratio = 0;
    double step_seconds = 0;
    const std::vector<StepMetrics>& steps = measured.ranks[rank];
    for (size_t step = flags.warmup; step < steps.size(); ++step) {
      ratio += steps[step].bubble_seconds / steps[step].step_seconds;
      step_seconds += steps[step].step_seconds;
    }
    ratio /= flags.steps;
    step_seconds /= flags.steps;
    measured_sum += ratio;
    step_sum += step_seconds;
    std::printf("| %zu | %.3f | %.3f | %.1f | %.1f |\n", rank, ratio,
                simulated.workers[rank].bubble_ratio, 1e3 * step_seconds,
                1e3 * simulated.makespan);
  }
  const double workers = static_cast<double>(measured.ranks.size());
  std::printf("| mean | %.3f | %.3f | %.1f | %.1f |\n", measured_sum / workers,
              simulated.bubble_ratio, 1e3 * step_sum / workers,
              1e3 * simulated.makespan);
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace chimera::worker

int main(int argc, char** argv) {
  chimera::worker::Flags flags;
  CLI::App app{"Measured vs simulated bubble ratios of every scheme"};
  app.add_option("--depth", flags.depth, "Pipeline depth D (N = D)")
      ->check(CLI::Range(2, 16));
  app.add_option("--steps", flags.steps, "Measured steps")
      ->check(CLI::Range(1, 1000));
  app.add_option("--warmup", flags.warmup, "Steps run before measuring")
      ->check(CLI::Range(0, 1000));
  CLI11_PARSE(app, argc, argv);
  const chimera::worker::ModelConfig model = chimera::worker::BenchGpt();
  std::printf(
      "GPT %lld blocks, hidden %lld, FFN %lld, %lld heads, vocabulary %lld, "
      "sequence %lld, float32, micro-batch 4; one single-threaded process "
      "per worker; %d measured steps after %d warm-up\n",
      static_cast<long long>(model.num_layers),
      static_cast<long long>(model.hidden_size),
      static_cast<long long>(model.ffn_size),
      static_cast<long long>(model.num_heads),
      static_cast<long long>(model.vocab_size),
      static_cast<long long>(model.seq_length), flags.steps, flags.warmup);
  int exit_code = 0;
  for (const auto& [name, params] : chimera::worker::Schemes(flags.depth)) {
    const absl::Status status =
        chimera::worker::RunScheme(name, params, flags);
    if (!status.ok()) {
      std::fprintf(stderr, "%s: %s\n", name.c_str(),
                   status.ToString().c_str());
      exit_code = 1;
    }
  }
  return exit_code;
}
