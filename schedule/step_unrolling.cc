#include "schedule/step_unrolling.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::schedule {
namespace {

absl::Status CheckOneStep(const Schedule& schedule, int steps) {
  const Topology& topology = schedule.topology;
  if (topology.steps != 1) {
    return absl::InvalidArgumentError(
        "only a schedule of one step (as generated) unrolls into steps");
  }
  if (steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps to unroll: ", steps, " must be >= 1"));
  }
  const int n = topology.micro_batches;
  if (int64_t{steps} * n > std::numeric_limits<int>::max() / 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(steps, " steps of ", n, " micro-batches are too many"));
  }
  const int lowest = topology.repeating ? -n : 0;
  for (const WorkerProgram& worker : schedule.workers) {
    for (const Instruction& inst : worker.instructions) {
      for (int mb : inst.micro_batches) {
        if (mb < lowest || mb >= n || (mb < 0) != ActsOnPreviousStep(inst)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "rank ", worker.rank, ": ", DescribeInstruction(inst),
              ": a step's micro-batches lie in [", lowest, ", ", n,
              "), all of one op in the same step"));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

bool ActsOnPreviousStep(const Instruction& inst) {
  return !inst.micro_batches.empty() && inst.micro_batches[0] < 0;
}

absl::StatusOr<Schedule> UnrollSteps(const Schedule& schedule, int steps) {
  if (absl::Status status = CheckOneStep(schedule, steps); !status.ok()) {
    return status;
  }
  const int n = schedule.topology.micro_batches;
  Schedule out;
  out.topology = schedule.topology;
  out.topology.repeating = false;
  out.topology.steps = steps;
  out.topology.micro_batches = steps * n;
  for (const WorkerProgram& worker : schedule.workers) {
    WorkerProgram& unrolled = out.workers.emplace_back();
    unrolled.rank = worker.rank;
    unrolled.stages = worker.stages;
    // Step `steps` is the drain: the last step's micro-batches only.
    for (int step = 0; step <= steps; ++step) {
      for (const Instruction& inst : worker.instructions) {
        const bool previous = ActsOnPreviousStep(inst);
        if (step == 0 && previous) continue;
        if (step == steps && !previous) continue;
        Instruction& copy = unrolled.instructions.emplace_back(inst);
        for (int& mb : copy.micro_batches) mb += step * n;
      }
    }
  }
  return out;
}

absl::StatusOr<SteadyStep> SimulateSteadyStep(const Schedule& schedule,
                                              const CostModel& costs) {
  ASSIGN_OR_RETURN(const Schedule two, UnrollSteps(schedule, 2));
  ASSIGN_OR_RETURN(const Schedule three, UnrollSteps(schedule, 3));
  ASSIGN_OR_RETURN(const SimulationResult shorter, Simulate(two, costs));
  ASSIGN_OR_RETURN(const SimulationResult longer, Simulate(three, costs));
  SteadyStep step;
  step.seconds = longer.makespan - shorter.makespan;
  for (size_t r = 0; r < longer.workers.size(); ++r) {
    const double busy = longer.workers[r].busy - shorter.workers[r].busy;
    step.worker_bubble_ratios.push_back(
        BubbleRatio(step.seconds - busy, step.seconds));
    step.bubble_ratio += step.worker_bubble_ratios.back();
  }
  step.bubble_ratio /= static_cast<double>(longer.workers.size());
  return step;
}

absl::StatusOr<SimulationResult> SimulateStep(const Schedule& schedule,
                                              const CostModel& costs) {
  if (!schedule.topology.repeating) return Simulate(schedule, costs);
  ASSIGN_OR_RETURN(const Schedule one, UnrollSteps(schedule, 1));
  ASSIGN_OR_RETURN(SimulationResult result, Simulate(one, costs));
  ASSIGN_OR_RETURN(const SteadyStep steady,
                   SimulateSteadyStep(schedule, costs));
  result.makespan = steady.seconds;
  result.bubble_ratio = steady.bubble_ratio;
  for (size_t rank = 0; rank < result.workers.size(); ++rank) {
    result.workers[rank].bubble_ratio = steady.worker_bubble_ratios[rank];
  }
  return result;
}

}  // namespace chimera::schedule
