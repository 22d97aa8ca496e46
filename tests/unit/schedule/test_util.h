// Helpers shared by the schedule engine tests.
#ifndef CHIMERA_TESTS_UNIT_SCHEDULE_TEST_UTIL_H_
#define CHIMERA_TESTS_UNIT_SCHEDULE_TEST_UTIL_H_

#include <algorithm>

#include "gtest/gtest.h"
#include "schedule/generator.h"
#include "schedule/simulator.h"
#include "schedule/validator.h"

namespace chimera::schedule::testing {

inline ScheduleParams Params(Scheme scheme, int depth, int micro_batches) {
  ScheduleParams params;
  params.scheme = scheme;
  params.depth = depth;
  params.micro_batches = micro_batches;
  return params;
}

// Generates, validates and returns the schedule; fails the test otherwise.
inline Schedule MustGenerate(const ScheduleParams& params) {
  absl::StatusOr<Schedule> schedule = GenerateSchedule(params);
  EXPECT_TRUE(schedule.ok()) << schedule.status();
  if (!schedule.ok()) return Schedule();
  absl::Status valid = ValidateSchedule(*schedule);
  EXPECT_TRUE(valid.ok()) << valid;
  return *std::move(schedule);
}

inline SimulationResult MustSimulate(const Schedule& schedule,
                                     double forward = 1, double backward = 2) {
  CostModel costs;
  costs.forward = forward;
  costs.backward = backward;
  absl::StatusOr<SimulationResult> result = Simulate(schedule, costs);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : SimulationResult();
}

// Idle time between a worker's first and last compute op: the bubbles that
// are neither start-up nor drain.
inline double InteriorIdle(const Schedule& schedule,
                           const SimulationResult& result, int rank) {
  const auto& program = schedule.workers[rank].instructions;
  const auto& timings = result.workers[rank].timings;
  double first = -1, last = 0, busy = 0;
  for (size_t i = 0; i < program.size(); ++i) {
    if (!IsCompute(program[i].op)) continue;
    if (first < 0) first = timings[i].start;
    last = timings[i].end;
    busy += timings[i].end - timings[i].start;
  }
  return first < 0 ? 0 : last - first - busy;
}

// Most micro-batches of one chunk stashed at once on `rank` (forward run,
// backward not finished), from the program order alone.
inline int PeakStashedPerChunk(const Schedule& schedule, int rank, int chunk) {
  int stashed = 0, peak = 0;
  for (const Instruction& inst : schedule.workers[rank].instructions) {
    if (inst.chunk != chunk) continue;
    if (inst.op == OpKind::kForward) {
      stashed += static_cast<int>(inst.micro_batches.size());
      peak = std::max(peak, stashed);
    } else if (inst.op == OpKind::kBackward &&
               inst.part == inst.num_parts - 1) {
      --stashed;
    }
  }
  return peak;
}

}  // namespace chimera::schedule::testing

#endif  // CHIMERA_TESTS_UNIT_SCHEDULE_TEST_UTIL_H_
