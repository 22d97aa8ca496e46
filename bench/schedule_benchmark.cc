// Generation + validation + simulation of one schedule, per scheme, up to
// D = 64, N = 512 (the size the planner explores).
#include "benchmark/benchmark.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace chimera::schedule {
namespace {

void BM_GenerateValidateSimulate(benchmark::State& state) {
  ScheduleParams params;
  params.scheme = static_cast<Scheme>(state.range(0));
  params.depth = static_cast<int>(state.range(1));
  params.micro_batches = static_cast<int>(state.range(2));
  params.chunks = 2;
  size_t instructions = 0;
  for (auto _ : state) {
    absl::StatusOr<Schedule> schedule = GenerateSchedule(params);
    if (!schedule.ok()) {
      state.SkipWithError(std::string(schedule.status().message()).c_str());
      return;
    }
    if (absl::Status valid = ValidateSchedule(*schedule); !valid.ok()) {
      state.SkipWithError(std::string(valid.message()).c_str());
      return;
    }
    absl::StatusOr<SimulationResult> result = Simulate(*schedule, CostModel());
    benchmark::DoNotOptimize(result);
    instructions = 0;
    for (const WorkerProgram& w : schedule->workers) {
      instructions += w.instructions.size();
    }
  }
  state.SetLabel(SchemeName(params.scheme));
  state.counters["instructions"] = static_cast<double>(instructions);
}

BENCHMARK(BM_GenerateValidateSimulate)
    ->ArgNames({"scheme", "D", "N"})
    ->ArgsProduct({{static_cast<int>(Scheme::kGpipe),
                    static_cast<int>(Scheme::kOneFOneB),
                    static_cast<int>(Scheme::kChimera),
                    static_cast<int>(Scheme::kMixPipe),
                    static_cast<int>(Scheme::kInterleaved),
                    static_cast<int>(Scheme::kBreadthFirst)},
                   {8, 64},
                   {64, 512}})
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace chimera::schedule

BENCHMARK_MAIN();
