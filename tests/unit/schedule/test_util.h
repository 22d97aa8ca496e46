// Helpers shared by the schedule engine tests.
#ifndef CHIMERA_TESTS_UNIT_SCHEDULE_TEST_UTIL_H_
#define CHIMERA_TESTS_UNIT_SCHEDULE_TEST_UTIL_H_

#include "coordinator/schedule/generator.h"
#include "coordinator/schedule/simulator.h"
#include "coordinator/schedule/validator.h"
#include "gtest/gtest.h"

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

}  // namespace chimera::schedule::testing

#endif  // CHIMERA_TESTS_UNIT_SCHEDULE_TEST_UTIL_H_
