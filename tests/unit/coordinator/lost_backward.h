// A schedule generator with a bug no worker could survive: rank `rank`'s
// first BACKWARD left out, so its peer would wait for the gradient forever.
// What the coordinator's validation must catch before anything starts.
#ifndef CHIMERA_TESTS_UNIT_COORDINATOR_LOST_BACKWARD_H_
#define CHIMERA_TESTS_UNIT_COORDINATOR_LOST_BACKWARD_H_

#include <algorithm>

#include "absl/status/statusor.h"
#include "coordinator/job_launcher.h"
#include "schedule/generator.h"

namespace chimera::coordinator {

inline ScheduleGenerator LosesABackwardOf(int rank) {
  return [rank](const schedule::ScheduleParams& params)
             -> absl::StatusOr<schedule::Schedule> {
    absl::StatusOr<schedule::Schedule> generated =
        schedule::GenerateSchedule(params);
    if (!generated.ok()) return generated;
    auto& instructions = generated->workers.at(rank).instructions;
    instructions.erase(std::find_if(
        instructions.begin(), instructions.end(), [](const auto& instruction) {
          return instruction.op == schedule::OpKind::kBackward;
        }));
    return generated;
  };
}

}  // namespace chimera::coordinator

#endif  // CHIMERA_TESTS_UNIT_COORDINATOR_LOST_BACKWARD_H_
