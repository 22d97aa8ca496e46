#include "schedule/parameter_residency.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace chimera::schedule {
namespace {

enum class Residency { kReleased, kGathering, kGathered };

// One fully sharded stage as the program runs.
struct StageState {
  Residency residency = Residency::kReleased;
  bool sum_begun = false;
};

// What is wrong with running `op` on a stage in `state`; empty when
// nothing. Moves `state` on as the op does.
std::string Apply(OpKind op, StageState& state) {
  const Residency was = state.residency;
  switch (op) {
    case OpKind::kAllGatherBegin:
      state.residency = Residency::kGathering;
      if (state.sum_begun) {
        return "gathers after its gradients' sum began; every member of the "
               "group must run the gathers first";
      }
      return was == Residency::kReleased
                 ? ""
                 : "begins a gather while its parameters are gathered or "
                   "being gathered (no RELEASE_PARAMS since)";
    case OpKind::kAllGatherEnd:
      state.residency = Residency::kGathered;
      return "";
    case OpKind::kReleaseParams:
      state.residency = Residency::kReleased;
      return was == Residency::kGathered
                 ? ""
                 : "releases parameters it has not gathered (no "
                   "ALLGATHER_END since the last release)";
    case OpKind::kShardStep:
      return was == Residency::kReleased
                 ? ""
                 : "steps its shard while a gathered copy of its parameters "
                   "is held, which the update would leave stale";
    case OpKind::kReduceScatterBegin:
    case OpKind::kAllreduceBegin:
      state.sum_begun = true;
      return "";
    default:
      if (IsCompute(op) && was != Residency::kGathered) {
        return "computes with the stage while its parameters are not "
               "gathered (sharding full: no ALLGATHER_END since the last "
               "RELEASE_PARAMS)";
      }
      return "";
  }
}

}  // namespace

std::set<int> FullyShardedStages(const Topology& topology,
                                 const std::vector<Instruction>& program) {
  std::set<int> stages;
  for (const Instruction& inst : program) {
    if (inst.op == OpKind::kReleaseParams) {
      stages.insert(topology.ModelStage({inst.chunk, inst.stage}));
    }
  }
  return stages;
}

std::vector<std::string> ParameterResidencyProblems(
    const Topology& topology, const std::vector<Instruction>& program) {
  std::map<int, StageState> states;
  for (int stage : FullyShardedStages(topology, program)) states[stage];
  std::vector<std::string> problems;
  if (states.empty()) return problems;
  for (size_t i = 0; i < program.size(); ++i) {
    const Instruction& inst = program[i];
    if (inst.op == OpKind::kOptimizerStep) continue;
    const auto state =
        states.find(topology.ModelStage({inst.chunk, inst.stage}));
    if (state == states.end()) continue;
    std::string problem = Apply(inst.op, state->second);
    if (!problem.empty()) {
      problems.push_back(
          absl::StrCat("#", i, " ", DescribeInstruction(inst), " ", problem));
    }
  }
  for (const auto& [stage, state] : states) {
    if (state.residency != Residency::kReleased) {
      problems.push_back(absl::StrCat(
          "ends with the parameters of model stage ", stage,
          " gathered; the next step starts from the shards (RELEASE_PARAMS)"));
    }
  }
  return problems;
}

}  // namespace chimera::schedule
