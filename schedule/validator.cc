#include "schedule/validator.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "schedule/joint_execution.h"
#include "schedule/parameter_residency.h"
#include "schedule/step_unrolling.h"

namespace chimera::schedule {
namespace {

constexpr int kMaxParts = 32;
// A repeating schedule is validated over this many steps and the drain:
// the first step, one that follows a step, and one the drain follows.
constexpr int kValidatedSteps = 3;

// Collects problems; keeps the first kMaxReportedProblems.
class Problems {
 public:
  void Add(std::string problem) {
    if (count_++ < kMaxReportedProblems) list_.push_back(std::move(problem));
  }
  bool empty() const { return count_ == 0; }
  absl::Status ToStatus(absl::string_view what) const {
    if (count_ == 0) return absl::OkStatus();
    std::string more =
        count_ > kMaxReportedProblems
            ? absl::StrCat(" (and ", count_ - kMaxReportedProblems, " more)")
            : "";
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", absl::StrJoin(list_, "; "), more));
  }

 private:
  int count_ = 0;
  std::vector<std::string> list_;
};

std::string Where(int rank, size_t index, const Instruction& inst) {
  return absl::StrCat("rank ", rank, " #", index, " ",
                      DescribeInstruction(inst));
}

// Per (dp, chunk, stage, micro-batch) bookkeeping shared by the checks.
class Grid {
 public:
  explicit Grid(const Topology& topology) : topology_(topology) {}
  size_t size() const {
    return static_cast<size_t>(topology_.width) * topology_.num_chunks *
           topology_.depth * topology_.micro_batches;
  }
  size_t Index(int dp, StageRef ref, int mb) const {
    return ((static_cast<size_t>(dp) * topology_.num_chunks + ref.chunk) *
                topology_.depth +
            ref.stage) *
               topology_.micro_batches +
           mb;
  }

 private:
  const Topology& topology_;
};

// Parts of one backward (or its received gradient) that are done.
struct PartSet {
  uint32_t mask = 0;
  int num_parts = 0;
  bool Full() const {
    return num_parts > 0 &&
           mask == (num_parts >= 32 ? ~0u : (1u << num_parts) - 1);
  }
  // Whether slice `part` of `num_parts` is available.
  bool Covers(int part, int parts) const {
    return Full() || (num_parts == parts && (mask >> part & 1u));
  }
  void Add(int part, int parts) {
    num_parts = parts;
    mask |= 1u << part;
  }
};

// First of all: every check sizes its tables by these.
absl::Status CheckTopology(const Topology& topology) {
  if (topology.depth < 1 || topology.num_chunks < 1 ||
      topology.micro_batches < 1 || topology.width < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology: depth ", topology.depth, ", chunks ", topology.num_chunks,
        ", micro-batches ", topology.micro_batches, ", width ", topology.width,
        " must all be >= 1"));
  }
  if (topology.steps < 1 || topology.micro_batches % topology.steps != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology: ", topology.steps, " steps must be >= 1 and divide its ",
        topology.micro_batches, " micro-batches"));
  }
  if (topology.repeating && (!topology.Asynchronous() || topology.steps != 1)) {
    return absl::InvalidArgumentError(
        "topology: only an asynchronous schedule repeats one step");
  }
  return CheckReplication(topology);
}

// What validating allocates and walks grows with the topology's sizes, while
// a schedule read from a file may claim any: refuse sizes its programs cannot
// cover before building anything of that size. Every stage replica must be
// held by a program, and every micro-batch must pass forward through at
// least `depth` stages of each data-parallel replica.
absl::Status CheckProgramsCoverTopology(const Schedule& schedule) {
  const Topology& topology = schedule.topology;
  int64_t held = 0;
  int64_t forwards = 0;
  for (const WorkerProgram& w : schedule.workers) {
    held += static_cast<int64_t>(w.stages.size());
    for (const Instruction& inst : w.instructions) {
      if (inst.op == OpKind::kForward) {
        forwards += static_cast<int64_t>(inst.micro_batches.size());
      }
    }
  }
  const int64_t replicas = int64_t{topology.width} * topology.num_chunks *
                           topology.depth;
  if (replicas > held) {
    return absl::InvalidArgumentError(absl::StrCat(
        "width ", topology.width, " x chunks ", topology.num_chunks,
        " x depth ", topology.depth, " = ", replicas,
        " stage replicas, but the programs hold only ", held));
  }
  const int64_t needed =
      int64_t{topology.width} * topology.depth * topology.micro_batches;
  if (needed > forwards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "width ", topology.width, " x depth ", topology.depth, " x ",
        topology.micro_batches, " micro-batches needs at least ", needed,
        " forwards, but the programs run only ", forwards));
  }
  return absl::OkStatus();
}

bool InRange(const Topology& topology, StageRef ref) {
  return ref.chunk >= 0 && ref.chunk < topology.num_chunks && ref.stage >= 0 &&
         ref.stage < topology.depth;
}

// Which rank of each data-parallel replica holds each stage, as the programs
// declare it. Every later check looks stages up here, so it is built, and
// proven complete, first.
class StageOwners {
 public:
  // Problems: a program whose rank is not its index, a stage out of range,
  // held twice within a replica, or held by no rank of some replica.
  static absl::StatusOr<StageOwners> Of(const Schedule& schedule) {
    const Topology& topology = schedule.topology;
    if (static_cast<int>(schedule.workers.size()) != topology.NumWorkers()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "schedule has ", schedule.workers.size(),
          " worker programs, want width ", topology.width, " x depth ",
          topology.depth, " = ", topology.NumWorkers()));
    }
    StageOwners owners(topology);
    Problems problems;
    for (int r = 0; r < topology.NumWorkers(); ++r) {
      const WorkerProgram& w = schedule.workers[r];
      if (w.rank != r) {
        problems.Add(absl::StrCat("program ", r, " says rank ", w.rank));
      }
      for (const StageRef& ref : w.stages) owners.Hold(r, ref, problems);
    }
    owners.CheckAllHeld(problems);
    RETURN_IF_ERROR(problems.ToStatus("invalid placement"));
    owners.CountGroups(schedule.workers);
    return owners;
  }

  // The rank of data-parallel replica `dp` that runs micro-batch `mb` on
  // `ref`: the one holding it, or with replicated stages the replica owning
  // the slice.
  int Owner(int dp, StageRef ref, int mb) const {
    return owner_[Slot(dp, ref, topology_.SliceOwner(ref.stage, mb))];
  }
  bool Holds(int rank, StageRef ref) const {
    const int replica = topology_.ReplicaIndexOf(rank);
    return replica < topology_.ReplicasOf(ref.stage) &&
           owner_[Slot(DpRank(topology_, rank), ref, replica)] == rank;
  }
  // Ranks holding a replica of `model_stage`: the size of its allreduce.
  int GroupSize(int model_stage) const { return group_size_[model_stage]; }

 private:
  explicit StageOwners(const Topology& topology)
      : topology_(topology),
        owner_(static_cast<size_t>(topology.width) * topology.num_chunks *
                   topology.WorkersPerPipeline(),
               -1) {}

  // Replica `replica` of `ref` in data-parallel replica `dp`; the replicas
  // of stage s follow those of the stages before it, as ranks do.
  size_t Slot(int dp, StageRef ref, int replica) const {
    return (static_cast<size_t>(dp) * topology_.num_chunks + ref.chunk) *
               topology_.WorkersPerPipeline() +
           topology_.RankOf(0, ref.stage, replica);
  }

  void Hold(int rank, StageRef ref, Problems& problems) {
    if (!InRange(topology_, ref)) {
      problems.Add(absl::StrCat("rank ", rank, " holds chunk ", ref.chunk,
                                " stage ", ref.stage, ", outside chunks [0, ",
                                topology_.num_chunks, ") stages [0, ",
                                topology_.depth, ")"));
      return;
    }
    if (!topology_.replication.empty() &&
        topology_.PositionOf(rank) != ref.stage) {
      problems.Add(absl::StrCat("rank ", rank, " holds stage ", ref.stage,
                                ", but with a replication the ranks of "
                                "position ",
                                topology_.PositionOf(rank),
                                " hold that stage alone"));
      return;
    }
    int& owner = owner_[Slot(DpRank(topology_, rank), ref,
                             topology_.ReplicaIndexOf(rank))];
    if (owner >= 0) {
      problems.Add(absl::StrCat("chunk ", ref.chunk, " stage ", ref.stage,
                                " is held by both rank ", owner, " and rank ",
                                rank));
    }
    owner = rank;
  }

  void CheckAllHeld(Problems& problems) const {
    for (int dp = 0; dp < topology_.width; ++dp) {
      for (int c = 0; c < topology_.num_chunks; ++c) {
        for (int st = 0; st < topology_.depth; ++st) {
          for (int k = 0; k < topology_.ReplicasOf(st); ++k) {
            if (owner_[Slot(dp, {c, st}, k)] >= 0) continue;
            problems.Add(
                absl::StrCat("no rank of data-parallel replica ", dp,
                             " holds chunk ", c, " stage ", st,
                             topology_.replication.empty()
                                 ? ""
                                 : absl::StrCat(" (replica ", k, ")")));
          }
        }
      }
    }
  }

  // Only once every held stage is known to be in range.
  void CountGroups(const std::vector<WorkerProgram>& workers) {
    group_size_.assign(topology_.NumModelStages(), 0);
    for (const WorkerProgram& w : workers) {
      std::vector<bool> counted(topology_.NumModelStages(), false);
      for (const StageRef& ref : w.stages) {
        int m = topology_.ModelStage(ref);
        if (!counted[m]) ++group_size_[m];
        counted[m] = true;
      }
    }
  }

  const Topology& topology_;
  std::vector<int> owner_;
  std::vector<int> group_size_;
};

// A count per (rank, model stage): of weight gradients (BACKWARD or
// BACKWARD_WEIGHT), of gradient sums, of updates.
using StageCounts = std::map<std::pair<int, int>, int>;
// (rank, model stage) pairs.
using StageKeys = std::set<std::pair<int, int>>;

absl::Status DependencyError(const ExecutionStep& step, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "data dependency: ", Where(step.rank, step.index, *step.inst), " ", why));
}

// Follows the programs step by step in an order a real run could take
// (JointExecution): each op checks that what it reads exists by the time it
// runs and records what it produces, one method per op.
class DependencyTracker {
 public:
  // `expected_backwards`: the weight gradients (BACKWARD or BACKWARD_WEIGHT)
  // each rank's program computes per model stage, all of which must precede
  // its allreduce and optimizer step.
  // `full_stages`: those a rank keeps only its shard of between uses.
  DependencyTracker(const Schedule& schedule, const StageOwners& owners,
                    const StageCounts& expected_backwards,
                    const StageKeys& full_stages)
      : schedule_(schedule),
        topology_(schedule.topology),
        owners_(owners),
        expected_backwards_(expected_backwards),
        full_stages_(full_stages),
        grid_(schedule.topology),
        forward_done_(grid_.size(), 0),
        activation_arrived_(grid_.size(), 0),
        input_done_(grid_.size()),
        gradient_arrived_(grid_.size()) {}

  absl::Status Step(const ExecutionStep& step) {
    switch (step.inst->op) {
      case OpKind::kForward:
        return Forward(step);
      case OpKind::kBackward:
      case OpKind::kBackwardInput:
      case OpKind::kBackwardWeight:
        return Backward(step);
      case OpKind::kSendAct:
        return SendActivation(step);
      case OpKind::kRecvAct:
        ReceiveActivation(step);
        break;
      case OpKind::kSendGrad:
        return SendGradient(step);
      case OpKind::kRecvGrad:
        ReceiveGradient(step);
        break;
      case OpKind::kAllreduceBegin:
      case OpKind::kReduceScatterBegin:
        return BeginSum(step);
      case OpKind::kAllreduceEnd:
      case OpKind::kReduceScatterEnd:
        ++sums_ended_[StageKey(step)];
        break;
      case OpKind::kShardStep:
        return ShardStep(step);
      case OpKind::kAllGatherBegin:
        return BeginGather(step);
      case OpKind::kAllGatherEnd:
      case OpKind::kReleaseParams:
        break;
      case OpKind::kOptimizerStep:
        return OptimizerStep(step);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Forward(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    const int dp = DpRank(topology_, step.rank);
    const StageRef ref{inst.chunk, inst.stage};
    std::optional<StageRef> prev = topology_.Prev(ref);
    for (int mb : inst.micro_batches) {
      if (prev) {
        bool local = owners_.Owner(dp, *prev, mb) == step.rank;
        bool ready = local ? forward_done_[grid_.Index(dp, *prev, mb)]
                           : activation_arrived_[grid_.Index(dp, ref, mb)];
        if (!ready) {
          return DependencyError(
              step, absl::StrCat(
                        "runs before its input activation of micro-batch ", mb,
                        local ? " is computed by this rank's forward of the "
                                "previous stage"
                              : " is received (no earlier RECV_ACT)"));
        }
      }
      forward_done_[grid_.Index(dp, ref, mb)] = 1;
    }
    return absl::OkStatus();
  }

  // BACKWARD is B and W at once. B needs the forward and the output
  // gradient (the next stage's input half); W needs its own B, which is what
  // keeps the stash and the autograd graph alive until W: nothing between
  // them may free what B left.
  absl::Status Backward(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    const int dp = DpRank(topology_, step.rank);
    const StageRef ref{inst.chunk, inst.stage};
    const size_t index = grid_.Index(dp, ref, inst.micro_batches[0]);
    if (ComputesInputGradient(inst.op)) {
      RETURN_IF_ERROR(CheckInputHalfReady(step, dp, ref, index));
      input_done_[index].Add(inst.part, inst.num_parts);
    } else if (!input_done_[index].Covers(inst.part, inst.num_parts)) {
      return DependencyError(
          step, "runs before the BACKWARD_INPUT of its micro-batch on this "
                "stage");
    }
    if (ComputesWeightGradient(inst.op)) {
      const std::pair<int, int> key = StageKey(step);
      if (sums_begun_[key] > sums_ended_[key]) {
        return DependencyError(
            step,
            "computes a weight gradient while the stage's gradients "
            "are being summed");
      }
      ++backwards_done_[key];
    }
    return absl::OkStatus();
  }

  absl::Status CheckInputHalfReady(const ExecutionStep& step, int dp,
                                   StageRef ref, size_t index) const {
    const Instruction& inst = *step.inst;
    const int mb = inst.micro_batches[0];
    if (!forward_done_[index]) {
      return DependencyError(
          step, "runs before the forward of its micro-batch on this stage");
    }
    if (std::optional<StageRef> next = topology_.Next(ref)) {
      bool local = owners_.Owner(dp, *next, mb) == step.rank;
      const PartSet& have = local ? input_done_[grid_.Index(dp, *next, mb)]
                                  : gradient_arrived_[index];
      if (!have.Covers(inst.part, inst.num_parts)) {
        return DependencyError(
            step, local ? "runs before this rank's backward (input half) of "
                          "the next stage"
                        : "runs before its output gradient is received (no "
                          "earlier RECV_GRAD)");
      }
    }
    return absl::OkStatus();
  }

  absl::Status SendActivation(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    const int dp = DpRank(topology_, step.rank);
    for (int mb : inst.micro_batches) {
      if (!forward_done_[grid_.Index(dp, {inst.chunk, inst.stage}, mb)]) {
        return DependencyError(
            step, absl::StrCat("sends the activation of micro-batch ", mb,
                               " before computing it"));
      }
    }
    return absl::OkStatus();
  }

  void ReceiveActivation(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    const int dp = DpRank(topology_, step.rank);
    for (int mb : inst.micro_batches) {
      activation_arrived_[grid_.Index(dp, {inst.chunk, inst.stage}, mb)] = 1;
    }
  }

  absl::Status SendGradient(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    if (!input_done_[grid_.Index(DpRank(topology_, step.rank),
                                 {inst.chunk, inst.stage},
                                 inst.micro_batches[0])]
             .Covers(inst.part, inst.num_parts)) {
      return DependencyError(step, "sends a gradient before computing it");
    }
    return absl::OkStatus();
  }

  void ReceiveGradient(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    gradient_arrived_[grid_.Index(DpRank(topology_, step.rank),
                                  {inst.chunk, inst.stage},
                                  inst.micro_batches[0])]
        .Add(inst.part, inst.num_parts);
  }

  // The gradients' sum (an allreduce or a reduce-scatter) reads all those
  // its update applies.
  absl::Status BeginSum(const ExecutionStep& step) {
    const std::pair<int, int> key = StageKey(step);
    if (const int due = BackwardsBeforeUpdate(step, key);
        backwards_done_[key] != due) {
      return DependencyError(
          step, absl::StrCat(
                    "begins the ", CollectiveName(*CollectiveOf(step.inst->op)),
                    " after ", backwards_done_[key], " of the ", due,
                    " weight gradients (BACKWARD or BACKWARD_WEIGHT) it "
                    "sums on this model stage"));
    }
    ++sums_begun_[key];
    return absl::OkStatus();
  }

  // A shard is stepped with the group's summed gradients, and gathered once
  // stepped. Every compute op of the stage precedes its sum, so none sees
  // the stage between its shard step and its gather's end. A fully sharded
  // stage gathers before its uses instead (ParameterResidencyProblems), and
  // its first gather of a step brings the previous step's updates.
  absl::Status ShardStep(const ExecutionStep& step) {
    if (sums_ended_[StageKey(step)] == 0) {
      return DependencyError(
          step, "steps its shard before the gradients' sum has ended");
    }
    shard_stepped_.insert(StageKey(step));
    return absl::OkStatus();
  }

  absl::Status BeginGather(const ExecutionStep& step) {
    if (full_stages_.count(StageKey(step)) == 0 &&
        shard_stepped_.count(StageKey(step)) == 0) {
      return DependencyError(
          step, "gathers the shards before stepping its own (SHARD_STEP)");
    }
    return absl::OkStatus();
  }

  absl::Status OptimizerStep(const ExecutionStep& step) {
    for (const StageRef& held : schedule_.workers[step.rank].stages) {
      const std::pair<int, int> key{step.rank, topology_.ModelStage(held)};
      if (const int due = BackwardsBeforeUpdate(step, key);
          backwards_done_[key] != due) {
        return DependencyError(
            step,
            absl::StrCat("runs after ", backwards_done_[key],
                         " weight gradients of chunk ", held.chunk, " stage ",
                         held.stage, ", not the ", due, " it applies"));
      }
      // One sum ended for each update so far and this one.
      if (owners_.GroupSize(key.second) > 1 &&
          sums_ended_[key] <= updates_[key]) {
        return DependencyError(
            step,
            absl::StrCat("runs before the gradients' sum of chunk ", held.chunk,
                         " stage ", held.stage, " has ended"));
      }
    }
    for (const StageRef& held : schedule_.workers[step.rank].stages) {
      ++updates_[{step.rank, topology_.ModelStage(held)}];
    }
    return absl::OkStatus();
  }

  // All the stage's weight gradients, or for an asynchronous update (or its
  // sum) those of the micro-batches up to the one it names, each of which
  // passes through every stage once.
  int BackwardsBeforeUpdate(const ExecutionStep& step,
                            const std::pair<int, int>& key) const {
    if (step.inst->micro_batches.empty()) return ExpectedBackwards(key);
    return ExpectedBackwards(key) / topology_.micro_batches *
           (step.inst->micro_batches[0] + 1);
  }

  // (rank, model stage) of the step's instruction.
  std::pair<int, int> StageKey(const ExecutionStep& step) const {
    return {step.rank,
            topology_.ModelStage({step.inst->chunk, step.inst->stage})};
  }

  int ExpectedBackwards(const std::pair<int, int>& key) const {
    auto it = expected_backwards_.find(key);
    return it == expected_backwards_.end() ? 0 : it->second;
  }

  const Schedule& schedule_;
  const Topology& topology_;
  const StageOwners& owners_;
  const StageCounts& expected_backwards_;
  const StageKeys& full_stages_;
  Grid grid_;
  std::vector<uint8_t> forward_done_;
  std::vector<uint8_t> activation_arrived_;
  // Parts whose input gradient is computed (BACKWARD or BACKWARD_INPUT).
  std::vector<PartSet> input_done_;
  std::vector<PartSet> gradient_arrived_;
  // Weight halves done (BACKWARD or BACKWARD_WEIGHT).
  StageCounts backwards_done_;
  // Per (rank, model stage): its gradients' sums begun and ended, and its
  // updates (OPTIMIZER_STEP).
  StageCounts sums_begun_;
  StageCounts sums_ended_;
  StageCounts updates_;
  // (rank, model stage) whose shard is stepped.
  StageKeys shard_stepped_;
};

class Validator {
 public:
  // `owners` must have passed StageOwners::Of for `schedule`.
  Validator(const Schedule& schedule, const StageOwners& owners)
      : schedule_(schedule),
        topology_(schedule.topology),
        owners_(owners),
        grid_(schedule.topology) {}

  absl::Status Run() {
    RETURN_IF_ERROR(CheckInstructions());
    RETURN_IF_ERROR(CheckCoverage());
    RETURN_IF_ERROR(CheckMatching());
    return CheckExecution();
  }

 private:
  absl::Status CheckInstructions() const {
    Problems problems;
    for (int r = 0; r < topology_.NumWorkers(); ++r) {
      const auto& program = schedule_.workers[r].instructions;
      for (size_t i = 0; i < program.size(); ++i) {
        CheckInstructionFields(r, i, program[i], problems);
      }
      if (topology_.Asynchronous()) CheckUpdatesOnce(r, program, problems);
    }
    return problems.ToStatus("invalid instructions");
  }

  // Each update the asynchronous rule calls for runs once on every rank.
  void CheckUpdatesOnce(int rank, const std::vector<Instruction>& program,
                        Problems& problems) const {
    std::vector<int> updates(topology_.micro_batches, 0);
    for (const Instruction& inst : program) {
      if (inst.op != OpKind::kOptimizerStep || inst.micro_batches.size() != 1)
        continue;
      const int mb = inst.micro_batches[0];
      if (mb >= 0 && mb < topology_.micro_batches) ++updates[mb];
    }
    for (int mb = 0; mb < topology_.micro_batches; ++mb) {
      const int expected = topology_.UpdatesAfter(mb) ? 1 : 0;
      if (updates[mb] == expected) continue;
      problems.Add(absl::StrCat("rank ", rank, " updates ", updates[mb],
                                " times after micro-batch ", mb, ", not ",
                                expected));
    }
  }

  // Stops at the first problem that makes the remaining fields meaningless
  // (a stage out of range or not held here, a bad micro-batch count).
  void CheckInstructionFields(int rank, size_t index, const Instruction& inst,
                              Problems& problems) const {
    if (inst.op == OpKind::kOptimizerStep) {
      CheckUpdatePoint(rank, index, inst, problems);
      return;
    }
    if (CollectiveOf(inst.op) == Collective::kAllreduce) {
      CheckUpdatePoint(rank, index, inst, problems);
    }
    const StageRef ref{inst.chunk, inst.stage};
    if (!InRange(topology_, ref)) {
      problems.Add(absl::StrCat(Where(rank, index, inst),
                                ": chunk must be in [0, ", topology_.num_chunks,
                                "), stage in [0, ", topology_.depth, ")"));
      return;
    }
    if (!owners_.Holds(rank, ref)) {
      problems.Add(absl::StrCat(
          Where(rank, index, inst), ": the stage is held by rank ",
          owners_.Owner(DpRank(topology_, rank), ref, 0), ", not this one"));
      return;
    }
    if (ActsOnWholeStage(inst.op)) {
      if (topology_.Asynchronous() && inst.op != OpKind::kAllreduceBegin &&
          inst.op != OpKind::kAllreduceEnd) {
        problems.Add(absl::StrCat(Where(rank, index, inst), ": the ",
                                  UpdateRuleName(topology_.update_rule),
                                  " rule shards nothing: its gradients are "
                                  "allreduced"));
      }
      return;
    }
    if (!CheckMicroBatches(rank, index, inst, problems)) return;
    if (!CheckSliceOwners(rank, index, inst, problems)) return;
    CheckParts(rank, index, inst, problems);
    if (inst.recompute && inst.op != OpKind::kBackward &&
        inst.op != OpKind::kBackwardInput) {
      problems.Add(absl::StrCat(Where(rank, index, inst),
                                ": only BACKWARD and BACKWARD_INPUT recompute "
                                "(W reuses the graph its B built)"));
    }
    if (IsCompute(inst.op)) {
      if (inst.peer != -1) {
        problems.Add(absl::StrCat(Where(rank, index, inst),
                                  ": compute ops have no peer"));
      }
      return;
    }
    CheckPeer(rank, index, inst, problems);
  }

  // A synchronous step updates once, after all; an asynchronous update, and
  // the allreduce of the gradients it applies, name the micro-batch whose
  // backward completes it.
  void CheckUpdatePoint(int rank, size_t index, const Instruction& inst,
                        Problems& problems) const {
    const size_t named = inst.micro_batches.size();
    if (!topology_.Asynchronous()) {
      if (named != 0) {
        problems.Add(absl::StrCat(
            Where(rank, index, inst), ": a synchronous ",
            inst.op == OpKind::kOptimizerStep ? "update" : "allreduce",
            " names no micro-batch"));
      }
      return;
    }
    if (named != 1 || !topology_.UpdatesAfter(inst.micro_batches[0]) ||
        inst.micro_batches[0] >= topology_.micro_batches) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": the ",
                                UpdateRuleName(topology_.update_rule),
                                " rule updates after the backward of ",
                                topology_.update_rule == UpdateRule::kStashed
                                    ? "every micro-batch"
                                    : "each step's last micro-batch",
                                ", naming it (as does its allreduce)"));
    }
  }

  // False when the count is wrong, which leaves nothing else to check.
  bool CheckMicroBatches(int rank, size_t index, const Instruction& inst,
                         Problems& problems) const {
    const int max_mbs =
        (inst.op == OpKind::kForward || inst.op == OpKind::kSendAct ||
         inst.op == OpKind::kRecvAct)
            ? 2
            : 1;
    if (inst.micro_batches.empty() ||
        static_cast<int>(inst.micro_batches.size()) > max_mbs) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": needs 1 to ",
                                max_mbs, " micro-batches"));
      return false;
    }
    for (int mb : inst.micro_batches) {
      if (mb < 0 || mb >= topology_.micro_batches) {
        problems.Add(absl::StrCat(Where(rank, index, inst), ": micro-batch ",
                                  mb, " outside [0, ", topology_.micro_batches,
                                  ")"));
      }
    }
    return true;
  }

  // With replicated stages, a rank runs only its replica's slices; false
  // when one is another's (then its peer is meaningless too).
  bool CheckSliceOwners(int rank, size_t index, const Instruction& inst,
                        Problems& problems) const {
    const int dp = DpRank(topology_, rank);
    for (int mb : inst.micro_batches) {
      const int owner = owners_.Owner(dp, {inst.chunk, inst.stage}, mb);
      if (owner == rank) continue;
      problems.Add(
          absl::StrCat(Where(rank, index, inst), ": micro-batch ", mb,
                       " is slice ", mb % topology_.SlicesPerMicroBatch(),
                       " of micro-batch ", mb / topology_.SlicesPerMicroBatch(),
                       ", which rank ", owner, " runs on this stage"));
      return false;
    }
    return true;
  }

  void CheckParts(int rank, size_t index, const Instruction& inst,
                  Problems& problems) const {
    const bool sliced = IsBackward(inst.op) || inst.op == OpKind::kSendGrad ||
                        inst.op == OpKind::kRecvGrad;
    const int max_parts = sliced ? kMaxParts : 1;
    if (inst.num_parts < 1 || inst.num_parts > max_parts || inst.part < 0 ||
        inst.part >= inst.num_parts) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": part ", inst.part,
                                " of ", inst.num_parts,
                                " invalid; num_parts must be in [1, ",
                                max_parts, "] and part in [0, num_parts)"));
    }
  }

  // A p2p op's peer must hold the neighbouring stage it talks to.
  void CheckPeer(int rank, size_t index, const Instruction& inst,
                 Problems& problems) const {
    const bool toward_next =
        inst.op == OpKind::kSendAct || inst.op == OpKind::kRecvGrad;
    const StageRef ref{inst.chunk, inst.stage};
    std::optional<StageRef> neighbour =
        toward_next ? topology_.Next(ref) : topology_.Prev(ref);
    if (!neighbour) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": the stage has no ",
                                toward_next ? "next" : "previous",
                                " stage to talk to"));
      return;
    }
    for (int mb : inst.micro_batches) {
      const int want = owners_.Owner(DpRank(topology_, rank), *neighbour, mb);
      if (inst.peer == want && want != rank) continue;
      problems.Add(absl::StrCat(
          Where(rank, index, inst), ": peer must be rank ", want,
          ", which holds chunk ", neighbour->chunk, " stage ", neighbour->stage,
          topology_.replication.empty() ? ""
                                        : absl::StrCat(" for micro-batch ", mb),
          want == rank ? " (this rank: no p2p needed)" : ""));
      return;
    }
  }

  absl::Status CheckCoverage() {
    Problems problems;
    forward_count_.assign(grid_.size(), 0);
    input_parts_.assign(grid_.size(), PartSet());
    weight_parts_.assign(grid_.size(), PartSet());
    expected_backwards_.clear();
    group_syncs_.clear();
    full_stages_.clear();
    for (int r = 0; r < topology_.NumWorkers(); ++r) CountRuns(r, problems);
    for (int dp = 0; dp < topology_.width; ++dp) {
      for (int mb = 0; mb < topology_.micro_batches; ++mb) {
        CheckRoute(dp, mb, problems);
      }
    }
    return problems.ToStatus("incomplete schedule");
  }

  // Counts `rank`'s forwards and backward parts into the grid, and what it
  // does with each held model stage's gradients (CheckStageSync).
  void CountRuns(int rank, Problems& problems) {
    const int dp = DpRank(topology_, rank);
    std::map<int, StageSyncOps> syncs;  // by model stage
    const auto& program = schedule_.workers[rank].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      const Instruction& inst = program[i];
      const StageRef ref{inst.chunk, inst.stage};
      switch (inst.op) {
        case OpKind::kForward:
          for (int mb : inst.micro_batches) {
            ++forward_count_[grid_.Index(dp, ref, mb)];
          }
          break;
        case OpKind::kBackward:
        case OpKind::kBackwardInput:
        case OpKind::kBackwardWeight:
          CountBackward(rank, i, inst, problems);
          break;
        case OpKind::kShardStep:
          ++syncs[topology_.ModelStage(ref)].shard_steps;
          break;
        case OpKind::kReleaseParams:
          ++syncs[topology_.ModelStage(ref)].releases;
          break;
        default:
          if (CollectiveOf(inst.op)) {
            CountCollective(rank, i, inst, syncs[topology_.ModelStage(ref)],
                            problems);
          }
          break;
      }
    }
    for (const std::string& problem :
         ParameterResidencyProblems(topology_, program)) {
      problems.Add(absl::StrCat("rank ", rank, " ", problem));
    }
    // A synchronous step sums each stage's gradients once; an asynchronous
    // rule once per update.
    const int sums = topology_.Asynchronous()
                         ? static_cast<int>(std::count_if(
                               program.begin(), program.end(),
                               [](const Instruction& inst) {
                                 return inst.op == OpKind::kOptimizerStep;
                               }))
                         : 1;
    std::set<int> checked;
    for (const StageRef& ref : schedule_.workers[rank].stages) {
      const int m = topology_.ModelStage(ref);
      if (checked.insert(m).second)
        CheckStageSync(rank, ref, sums, syncs[m], problems);
    }
  }

  // Counts the halves `inst` computes: both for BACKWARD, one for B or W.
  void CountBackward(int rank, size_t index, const Instruction& inst,
                     Problems& problems) {
    const size_t cell = grid_.Index(DpRank(topology_, rank),
                                    {inst.chunk, inst.stage},
                                    inst.micro_batches[0]);
    if (ComputesInputGradient(inst.op)) {
      CountHalf(rank, index, inst, "input half (BACKWARD_INPUT)",
                input_parts_[cell], problems);
    }
    if (ComputesWeightGradient(inst.op)) {
      CountHalf(rank, index, inst, "weight half (BACKWARD_WEIGHT)",
                weight_parts_[cell], problems);
      ++expected_backwards_[{rank, topology_.ModelStage(
                                       {inst.chunk, inst.stage})}];
    }
  }

  void CountHalf(int rank, size_t index, const Instruction& inst,
                 absl::string_view half, PartSet& parts,
                 Problems& problems) const {
    if (parts.num_parts != 0 && parts.num_parts != inst.num_parts) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": slices the ", half,
                                " of the backward into ", inst.num_parts,
                                " parts, another op into ", parts.num_parts));
    } else if (parts.mask >> inst.part & 1u) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": computes the ",
                                half, " a second time"));
    }
    parts.Add(inst.part, inst.num_parts);
  }

  // What one rank's program does with one model stage's gradients and
  // parameters: each collective's begins and ends, its shard steps and its
  // releases (sharding full).
  struct StageSyncOps {
    std::array<int, kNumCollectives> begins{};
    std::array<int, kNumCollectives> ends{};
    int shard_steps = 0;
    int releases = 0;
    int Begins(Collective c) const { return begins[static_cast<int>(c)]; }
    int Ends(Collective c) const { return ends[static_cast<int>(c)]; }
  };

  // In program order: a collective ends after it begins, and begins again
  // only once ended (how often is CheckStageSync's).
  void CountCollective(int rank, size_t index, const Instruction& inst,
                       StageSyncOps& ops, Problems& problems) const {
    const Collective collective = *CollectiveOf(inst.op);
    const std::string name = CollectiveName(collective);
    int& begins = ops.begins[static_cast<int>(collective)];
    int& ends = ops.ends[static_cast<int>(collective)];
    if (BeginsCollective(inst.op)) {
      if (begins++ > ends) {
        problems.Add(absl::StrCat(Where(rank, index, inst),
                                  ": begins this stage's ", name,
                                  " again before ending it"));
      }
      return;
    }
    if (ends++ >= begins) {
      problems.Add(absl::StrCat(Where(rank, index, inst), ": waits for an ",
                                name, " it never began"));
    }
  }

  // A model stage held by more than one rank sums its gradients `sums`
  // times, by an allreduce or (sharded) a reduce-scatter; a sharded stage
  // steps its shard exactly once and gathers the shards once, or, fully
  // sharded, reduce-scatters and gathers once per release; and every member
  // of the group does the same. A stage held by one rank has no group to
  // shard over.
  void CheckStageSync(int rank, StageRef ref, int sums, const StageSyncOps& ops,
                      Problems& problems) {
    const int m = topology_.ModelStage(ref);
    const std::string who = absl::StrCat("rank ", rank);
    const std::string stage = absl::StrCat(
        "model stage ", m, " (chunk ", ref.chunk, " stage ", ref.stage, ")");
    const bool scattered = ops.Begins(Collective::kReduceScatter) > 0 ||
                           ops.Ends(Collective::kReduceScatter) > 0;
    const bool gathered = ops.Begins(Collective::kAllGather) > 0 ||
                          ops.Ends(Collective::kAllGather) > 0;
    const bool full = ops.releases > 0;
    if (owners_.GroupSize(m) == 1) {
      if (scattered || gathered || full || ops.shard_steps > 0) {
        problems.Add(absl::StrCat(who, " shards ", stage,
                                  ", which no other rank holds: it has no "
                                  "group to shard over"));
      }
      return;
    }
    const Collective sum =
        scattered ? Collective::kReduceScatter : Collective::kAllreduce;
    const Collective other =
        scattered ? Collective::kAllreduce : Collective::kReduceScatter;
    if (ops.Begins(sum) != sums || ops.Ends(sum) != sums ||
        ops.Begins(other) > 0 || ops.Ends(other) > 0) {
      problems.Add(absl::StrCat(
          who, " must begin and end the ",
          scattered ? "reduce-scatter" : "allreduce", " of ", stage, " ",
          sums == 1 ? std::string("exactly once")
                    : absl::StrCat("once per update, ", sums, " times"),
          ", and no other sum of its gradients; found ", ops.Begins(sum),
          " begin(s) and ", ops.Ends(sum), " end(s), and ",
          ops.Begins(other) + ops.Ends(other), " ", CollectiveName(other),
          " op(s)"));
    }
    const bool sharded = scattered || gathered || full || ops.shard_steps > 0;
    if (sharded && ops.shard_steps != 1) {
      problems.Add(absl::StrCat(who, " steps its shard of ", stage, " ",
                                ops.shard_steps,
                                " times (SHARD_STEP); a sharded stage steps "
                                "it exactly once"));
    }
    if (full && !scattered) {
      problems.Add(absl::StrCat(
          who, " releases the parameters of ", stage,
          " but allreduces its gradients; sharding full reduce-scatters them"));
    }
    const int gathers = full ? ops.releases : 1;
    if (sharded && (ops.Begins(Collective::kAllGather) != gathers ||
                    ops.Ends(Collective::kAllGather) != gathers)) {
      problems.Add(absl::StrCat(
          who, " must begin and end the all-gather of its sharded ", stage, " ",
          full ? "once per release of its parameters (RELEASE_PARAMS), "
               : "exactly once, ",
          gathers, " time(s); found ", ops.Begins(Collective::kAllGather),
          " begin(s) and ", ops.Ends(Collective::kAllGather), " end(s)"));
    }
    if (full) full_stages_.insert({rank, m});
    const GroupSync form{scattered, sharded, full ? ops.releases : 0};
    const auto [first, inserted] = group_syncs_.try_emplace(m, rank, form);
    if (!inserted && !(first->second.second == form)) {
      problems.Add(absl::StrCat(who, " ", Describe(form), " ", stage,
                                ", but rank ", first->second.first, " ",
                                Describe(first->second.second),
                                ": a gradient group's members run the same "
                                "collectives"));
    }
  }

  // How a rank sums and steps one stage, and how often it gathers the
  // stage's parameters when it keeps only its shard between uses (0: it
  // keeps them whole).
  struct GroupSync {
    bool scattered = false;
    bool sharded = false;
    int full_gathers = 0;
    bool operator==(const GroupSync& o) const {
      return scattered == o.scattered && sharded == o.sharded &&
             full_gathers == o.full_gathers;
    }
  };
  static std::string Describe(const GroupSync& sync) {
    if (sync.full_gathers > 0) {
      return absl::StrCat("gathers ", sync.full_gathers,
                          " time(s) and reduce-scatters a shard of");
    }
    if (sync.scattered) return "reduce-scatters and steps a shard of";
    return sync.sharded ? "allreduces and steps a shard of"
                        : "allreduces and steps all of";
  }

  // The chunks micro-batch `mb` of replica `dp` passes through: every chunk
  // when chunks are chained, the ones it touches when they are replicas.
  std::vector<int> Route(int dp, int mb) const {
    std::vector<int> route;
    for (int c = 0; c < topology_.num_chunks; ++c) {
      bool touched = false;
      for (int st = 0; st < topology_.depth && !touched; ++st) {
        size_t idx = grid_.Index(dp, {c, st}, mb);
        touched = forward_count_[idx] > 0 || input_parts_[idx].mask != 0 ||
                  weight_parts_[idx].mask != 0;
      }
      if (touched || topology_.layout == ChunkLayout::kChained) {
        route.push_back(c);
      }
    }
    return route;
  }

  // Every stage on the route runs the micro-batch's forward once and its
  // backward in full.
  void CheckRoute(int dp, int mb, Problems& problems) const {
    const std::vector<int> route = Route(dp, mb);
    if (topology_.layout == ChunkLayout::kReplicas && route.size() != 1) {
      problems.Add(absl::StrCat(
          "micro-batch ", mb, " of data-parallel replica ", dp, " runs on ",
          route.size(), " chunks (", absl::StrJoin(route, ", "),
          "); replicated chunks need exactly one"));
      return;
    }
    for (int c : route) {
      for (int st = 0; st < topology_.depth; ++st) {
        size_t idx = grid_.Index(dp, {c, st}, mb);
        if (forward_count_[idx] != 1) {
          problems.Add(absl::StrCat(
              "micro-batch ", mb, " of data-parallel replica ", dp,
              " runs forward ", forward_count_[idx], " times on chunk ", c,
              " stage ", st, " (rank ", owners_.Owner(dp, {c, st}, mb),
              "); want exactly once"));
        }
        const bool input = input_parts_[idx].Full();
        const bool weight = weight_parts_[idx].Full();
        if (!input || !weight) {
          problems.Add(absl::StrCat(
              "micro-batch ", mb, " of data-parallel replica ", dp, " misses ",
              !input && !weight ? "backward"
              : !input ? "the input half (BACKWARD_INPUT) of its backward"
                       : "the weight half (BACKWARD_WEIGHT) of its backward",
              " on chunk ", c, " stage ", st, " (rank ",
              owners_.Owner(dp, {c, st}, mb), ")"));
        }
      }
    }
  }

  // A SEND_* or RECV_* that crosses a pipeline edge.
  struct Posted {
    MessageKey key;
    InstructionId id;
    bool send = false;
  };

  // Every transfer of every program, rank by rank in program order.
  std::vector<Posted> PostedTransfers() const {
    // Sized up front: at D = 64, N = 512 there are about 100,000 transfers,
    // and growing the vector and the hash map by doubling was a third of
    // the validation's time.
    size_t transfers = 0;
    for (const WorkerProgram& program : schedule_.workers) {
      for (const Instruction& inst : program.instructions) {
        transfers += IsPointToPoint(inst.op);
      }
    }
    std::vector<Posted> posted;
    posted.reserve(transfers);
    for (int r = 0; r < topology_.NumWorkers(); ++r) {
      const auto& program = schedule_.workers[r].instructions;
      for (size_t i = 0; i < program.size(); ++i) {
        std::optional<MessageKey> key = MessageKeyOf(topology_, r, program[i]);
        if (!key) continue;
        posted.push_back({*key, {r, i}, IsSend(program[i].op)});
      }
    }
    return posted;
  }

  absl::Status CheckMatching() {
    Problems problems;
    struct Balance {
      int count = 0;
      InstructionId first;
    };
    std::vector<Posted> posted = PostedTransfers();
    absl::flat_hash_map<MessageKey, Balance> balance;
    // A message is one send and one receive.
    balance.reserve(posted.size() / 2 + 1);
    for (const Posted& transfer : posted) {
      Balance& b = balance[transfer.key];
      if (b.count == 0) b.first = transfer.id;
      b.count += transfer.send ? 1 : -1;
    }
    for (const auto& [key, b] : balance) {
      if (b.count == 0) continue;
      const Instruction& inst =
          schedule_.workers[b.first.rank].instructions[b.first.index];
      problems.Add(absl::StrCat(
          Where(b.first.rank, b.first.index, inst), " (", DescribeMessage(key),
          ") has ", b.count > 0 ? b.count : -b.count, " more ",
          b.count > 0 ? "send(s) than receive(s)" : "receive(s) than send(s)"));
    }
    if (!problems.empty()) return problems.ToStatus("unmatched p2p");
    return CheckChannelOrder(std::move(posted));
  }

  // NCCL pairs a send with a receive by issue order alone, so every channel
  // (src, dst, activation or gradient) must receive its messages in the
  // order they are sent.
  // `posted`: PostedTransfers().
  absl::Status CheckChannelOrder(std::vector<Posted> posted) {
    std::map<std::tuple<int, int, bool>, std::vector<Posted>> sent;
    std::map<std::tuple<int, int, bool>, std::vector<Posted>> received;
    for (Posted& transfer : posted) {
      const MessageKey& key = transfer.key;
      (transfer.send ? sent : received)[{key.src, key.dst, key.gradient}]
          .push_back(std::move(transfer));
    }
    Problems problems;
    for (const auto& [channel, sends] : sent) {
      const std::vector<Posted>& receives = received[channel];
      for (size_t n = 0; n < sends.size(); ++n) {
        if (sends[n].key == receives[n].key) continue;
        const InstructionId recv = receives[n].id;
        problems.Add(absl::StrCat(
            Where(recv.rank, recv.index,
                  schedule_.workers[recv.rank].instructions[recv.index]),
            " is receive #", n, " from rank ", std::get<0>(channel),
            ", whose send #", n, " is ", DescribeMessage(sends[n].key)));
        break;  // the rest of this channel follows from the first mismatch
      }
    }
    return problems.ToStatus("p2p received out of send order");
  }

  absl::Status CheckExecution() const {
    DependencyTracker tracker(schedule_, owners_, expected_backwards_,
                              full_stages_);
    JointExecution execution(schedule_);
    return execution.Run(
        [&tracker](const ExecutionStep& step) { return tracker.Step(step); });
  }

  const Schedule& schedule_;
  const Topology& topology_;
  const StageOwners& owners_;
  Grid grid_;
  std::vector<int> forward_count_;
  // Parts of each backward's halves: BACKWARD counts in both.
  std::vector<PartSet> input_parts_;
  std::vector<PartSet> weight_parts_;
  StageCounts expected_backwards_;
  // Per model stage, the first rank checked and how it syncs the stage.
  std::map<int, std::pair<int, GroupSync>> group_syncs_;
  // (rank, model stage) that the rank keeps only its shard of between uses.
  StageKeys full_stages_;
};

}  // namespace

absl::Status ValidateSchedule(const Schedule& schedule) {
  RETURN_IF_ERROR(CheckTopology(schedule.topology));
  RETURN_IF_ERROR(CheckProgramsCoverTopology(schedule));
  if (schedule.topology.repeating) {
    ASSIGN_OR_RETURN(const Schedule steps,
                     UnrollSteps(schedule, kValidatedSteps));
    absl::Status status = ValidateSchedule(steps);
    if (status.ok()) return status;
    return absl::Status(
        status.code(),
        absl::StrCat("over ", kValidatedSteps,
                     " steps and the drain (micro-batch j of step s is s x ",
                     schedule.topology.micro_batches,
                     " + j): ", status.message()));
  }
  ASSIGN_OR_RETURN(const StageOwners owners, StageOwners::Of(schedule));
  return Validator(schedule, owners).Run();
}

}  // namespace chimera::schedule
