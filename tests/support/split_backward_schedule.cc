#include "tests/support/split_backward_schedule.h"

#include <utility>
#include <vector>

namespace chimera::testing {
namespace {

using schedule::Instruction;
using schedule::OpKind;

std::vector<Instruction> DeferWeights(std::vector<Instruction> program) {
  std::vector<Instruction> in_place;
  std::vector<Instruction> weights;
  std::vector<Instruction> begins;
  std::vector<Instruction> ends;
  std::vector<Instruction> steps;
  for (Instruction& inst : program) {
    switch (inst.op) {
      case OpKind::kBackward: {
        Instruction weight = inst;
        weight.op = OpKind::kBackwardWeight;
        weight.recompute = false;
        weights.push_back(std::move(weight));
        inst.op = OpKind::kBackwardInput;
        in_place.push_back(std::move(inst));
        break;
      }
      case OpKind::kAllreduceBegin:
        begins.push_back(std::move(inst));
        break;
      case OpKind::kAllreduceEnd:
        ends.push_back(std::move(inst));
        break;
      case OpKind::kOptimizerStep:
        steps.push_back(std::move(inst));
        break;
      default:
        in_place.push_back(std::move(inst));
    }
  }
  for (auto* tail : {&weights, &begins, &ends, &steps}) {
    for (Instruction& inst : *tail) in_place.push_back(std::move(inst));
  }
  return in_place;
}

}  // namespace

schedule::Schedule DeferEveryWeightGradient(schedule::Schedule schedule) {
  for (schedule::WorkerProgram& worker : schedule.workers) {
    worker.instructions = DeferWeights(std::move(worker.instructions));
  }
  return schedule;
}

}  // namespace chimera::testing
