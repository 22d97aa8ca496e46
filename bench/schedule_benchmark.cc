// What `chimera schedule` spends its time on, phase by phase, per scheme up
// to D = 64, N = 512 (the size the planner explores): generation,
// validation, simulation, and writing each output format. Every phase but
// the one measured is done once, before its loop; the serialisation rows
// report the output's size.
#include <functional>
#include <string>

#include "benchmark/benchmark.h"
#include "schedule/csv_io.h"
#include "schedule/generator.h"
#include "schedule/json_report.h"
#include "schedule/simulator.h"
#include "schedule/timeline.h"
#include "schedule/validator.h"

namespace chimera::schedule {
namespace {

ScheduleParams ParamsOf(const benchmark::State& state) {
  ScheduleParams params;
  params.scheme = static_cast<Scheme>(state.range(0));
  params.depth = static_cast<int>(state.range(1));
  params.micro_batches = static_cast<int>(state.range(2));
  params.chunks = 2;
  params.concat = Concat::kDirect;
  return params;
}

size_t InstructionCount(const Schedule& schedule) {
  size_t instructions = 0;
  for (const WorkerProgram& w : schedule.workers) {
    instructions += w.instructions.size();
  }
  return instructions;
}

// The state's schedule, or why not (the benchmark is skipped with it).
absl::StatusOr<Schedule> Generated(benchmark::State& state) {
  absl::StatusOr<Schedule> schedule = GenerateSchedule(ParamsOf(state));
  if (!schedule.ok()) {
    state.SkipWithError(std::string(schedule.status().message()).c_str());
  } else {
    state.SetLabel(SchemeName(ParamsOf(state).scheme));
    state.counters["instructions"] =
        static_cast<double>(InstructionCount(*schedule));
  }
  return schedule;
}

void BM_Generate(benchmark::State& state) {
  if (!Generated(state).ok()) return;
  for (auto _ : state) {
    benchmark::DoNotOptimize(GenerateSchedule(ParamsOf(state)));
  }
}

void BM_Validate(benchmark::State& state) {
  const absl::StatusOr<Schedule> schedule = Generated(state);
  if (!schedule.ok()) return;
  for (auto _ : state) benchmark::DoNotOptimize(ValidateSchedule(*schedule));
}

void BM_Simulate(benchmark::State& state) {
  const absl::StatusOr<Schedule> schedule = Generated(state);
  if (!schedule.ok()) return;
  for (auto _ : state) {
    benchmark::DoNotOptimize(Simulate(*schedule, CostModel()));
  }
}

using Writer =
    std::function<std::string(const Schedule&, const SimulationResult&)>;

// One output format written from a simulated schedule; its size in bytes.
void Serialise(benchmark::State& state, const Writer& write) {
  const absl::StatusOr<Schedule> schedule = Generated(state);
  if (!schedule.ok()) return;
  const absl::StatusOr<SimulationResult> result =
      Simulate(*schedule, CostModel());
  if (!result.ok()) {
    state.SkipWithError(std::string(result.status().message()).c_str());
    return;
  }
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string output = write(*schedule, *result);
    bytes = output.size();
    benchmark::DoNotOptimize(output);
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}

void BM_WriteText(benchmark::State& state) {
  Serialise(state, [](const Schedule& s, const SimulationResult& r) {
    return TextTimeline(s, r, "benchmark", "time units");
  });
}

void BM_WriteJson(benchmark::State& state) {
  Serialise(state, [](const Schedule& s, const SimulationResult& r) {
    return JsonReport(s, r, "benchmark");
  });
}

void BM_WriteCsv(benchmark::State& state) {
  Serialise(state, [](const Schedule& s, const SimulationResult&) {
    return WriteScheduleCsv(s);
  });
}

void BM_WriteSvg(benchmark::State& state) {
  Serialise(state, [](const Schedule& s, const SimulationResult& r) {
    return SvgTimeline(s, r, "benchmark");
  });
}

void EveryScheme(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"scheme", "D", "N"})
      ->ArgsProduct({{static_cast<int>(Scheme::kGpipe),
                      static_cast<int>(Scheme::kOneFOneB),
                      static_cast<int>(Scheme::kChimera),
                      static_cast<int>(Scheme::kMixPipe),
                      static_cast<int>(Scheme::kInterleaved),
                      static_cast<int>(Scheme::kBreadthFirst),
                      static_cast<int>(Scheme::kZbV)},
                     {8, 64},
                     {64, 512}})
      ->Unit(benchmark::kMillisecond);
}

// The largest schedule, the one the output formats are sized for.
void LargestChimera(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"scheme", "D", "N"})
      ->Args({static_cast<int>(Scheme::kChimera), 64, 512})
      ->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Generate)->Apply(EveryScheme);
BENCHMARK(BM_Validate)->Apply(EveryScheme);
BENCHMARK(BM_Simulate)->Apply(EveryScheme);
BENCHMARK(BM_WriteText)->Apply(LargestChimera);
BENCHMARK(BM_WriteJson)->Apply(LargestChimera);
BENCHMARK(BM_WriteCsv)->Apply(LargestChimera);
BENCHMARK(BM_WriteSvg)->Apply(LargestChimera);

}  // namespace
}  // namespace chimera::schedule

BENCHMARK_MAIN();
