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
  // The collectives and the optimizer steps: each round of collectives
  // keeps its BEGINs before its ENDs in the original order.
  std::vector<Instruction> syncs;
  for (Instruction& inst : program) {
    if (inst.op == OpKind::kBackward) {
      Instruction weight = inst;
      weight.op = OpKind::kBackwardWeight;
      weight.recompute = false;
      weights.push_back(std::move(weight));
      inst.op = OpKind::kBackwardInput;
      in_place.push_back(std::move(inst));
    } else if (schedule::CollectiveOf(inst.op) ||
               schedule::UpdatesWeights(inst.op)) {
      syncs.push_back(std::move(inst));
    } else {
      in_place.push_back(std::move(inst));
    }
  }
  for (auto* tail : {&weights, &syncs}) {
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
