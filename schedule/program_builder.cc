#include "schedule/program_builder.h"

#include <map>
#include <optional>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chimera::schedule {
namespace {

// Where each held model stage's gradients are complete on one position.
struct StageSync {
  int model_stage = 0;
  StageRef ref;  // the replica named in the stage's collectives
  std::optional<size_t> last_backward;  // index into the position's order
  bool eager = false;
  // Where the sum ends early (see MarkEarlyEnds): before the op at this
  // index of the position's order; nullopt: in Finish.
  std::optional<size_t> end_before;
};

// Model stages held by a position, with the index of the last backward (or
// BACKWARD_WEIGHT: the gradients are complete only then) that touches each,
// and whether a grid gap follows it (Chimera section 3.2: sync eagerly only
// where a bubble can hide the allreduce).
std::vector<StageSync> PlanSync(const Topology& topology,
                                const std::vector<ComputeOp>& ops,
                                const std::vector<StageRef>& held, Sync sync) {
  std::map<int, StageSync> by_stage;
  for (const StageRef& ref : held) {
    int model_stage = topology.ModelStage(ref);
    by_stage.emplace(model_stage, StageSync{model_stage, ref, std::nullopt,
                                            false, std::nullopt});
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ComputesWeightGradient(ops[i].op)) {
      by_stage[topology.ModelStage(ops[i].ref)].last_backward = i;
    }
  }
  std::vector<StageSync> result;
  const int64_t local_end = ops.empty() ? 0 : ops.back().grid_end;
  // busy_after[i]: grid slots of compute after op i.
  std::vector<int64_t> busy_after(ops.size() + 1, 0);
  for (size_t i = ops.size(); i-- > 0;) {
    busy_after[i] = busy_after[i + 1] +
                    (i + 1 < ops.size()
                         ? ops[i + 1].grid_end - ops[i + 1].grid_start
                         : 0);
  }
  for (auto& [model_stage, s] : by_stage) {
    switch (sync) {
      case Sync::kEagerAll:
        s.eager = s.last_backward.has_value();
        break;
      case Sync::kEnd:
        s.eager = false;
        break;
      case Sync::kEager:
        // A replica that ran no micro-batch has nothing to hide.
        s.eager = s.last_backward.has_value() &&
                  local_end - ops[*s.last_backward].grid_end >
                      busy_after[*s.last_backward];
        break;
    }
    result.push_back(s);
  }
  return result;
}

Instruction MakeInstruction(OpKind op, const ComputeOp& c, int peer) {
  Instruction inst;
  inst.op = op;
  inst.chunk = c.ref.chunk;
  inst.stage = c.ref.stage;
  inst.micro_batches = c.micro_batches;
  inst.peer = peer;
  inst.part = c.part;
  inst.num_parts = c.num_parts;
  inst.recompute = (op == OpKind::kBackward || op == OpKind::kBackwardInput) &&
                   c.recompute;
  return inst;
}

// An op on the stage replica `ref` as a whole (ActsOnWholeStage).
Instruction StageInstruction(OpKind op, StageRef ref) {
  Instruction inst;
  inst.op = op;
  inst.chunk = ref.chunk;
  inst.stage = ref.stage;
  return inst;
}

// Stage replicas held by each position, in chunk-major order.
std::vector<std::vector<StageRef>> HeldStages(const Topology& topology,
                                              const Placement& placement) {
  std::vector<std::vector<StageRef>> held(topology.depth);
  for (int chunk = 0; chunk < topology.num_chunks; ++chunk) {
    for (int stage = 0; stage < topology.depth; ++stage) {
      held[placement.At({chunk, stage})].push_back({chunk, stage});
    }
  }
  return held;
}

// How each model stage's gradient group, the positions holding it within one
// replica times the width, sums its gradients and steps; a group of one has
// no collectives.
struct GroupPlan {
  bool collective = false;
  bool sharded = false;
  // The gradients' sum: an allreduce, or a reduce-scatter into the shards.
  Collective sum = Collective::kAllreduce;
  // One position per replica holds the stage: its group is the same
  // position of every replica, whose programs mirror each other.
  bool mirrored = false;
  // Sharding full: between uses the members keep only their shards of the
  // parameters (GatherWindows).
  bool full = false;
};

std::vector<GroupPlan> PlanGroups(
    const Topology& topology, const std::vector<std::vector<StageRef>>& held,
    const GradientSync& sync) {
  std::vector<std::set<int>> holders(topology.NumModelStages());
  for (int p = 0; p < topology.depth; ++p) {
    for (const StageRef& ref : held[p]) {
      holders[topology.ModelStage(ref)].insert(p);
    }
  }
  const Sharding sharding = sync.sharding;
  std::vector<GroupPlan> groups(holders.size());
  for (size_t m = 0; m < holders.size(); ++m) {
    GroupPlan& group = groups[m];
    int members = 0;
    for (int p : holders[m]) {
      members += sync.replication.empty() ? 1 : sync.replication[p];
    }
    group.collective = members * topology.width > 1;
    group.mirrored = holders[m].size() == 1;
    group.sharded = group.collective && sharding != Sharding::kNone;
    if (group.sharded && sharding != Sharding::kOptimizer) {
      group.sum = Collective::kReduceScatter;
    }
    group.full = group.sharded && sharding == Sharding::kFull;
  }
  return groups;
}

// A stage whose gradients are reduce-scattered needs its whole gradient
// bucket only from its first weight gradient until its shard is stepped (the
// runtime holds it just then). Where a position's next weight gradient after
// a stage's last one starts another stage, that stage's sum ends, its shard
// is stepped and its gather begins right before it, and its sum begins right
// after its last weight gradient: a breadth-first worker then holds one
// stage's bucket at a time instead of all of them, at the cost of exposing
// what the sum has not finished by then. Only for mirrored groups: a member
// that waits for the sum mid-program waits for its mirrors, which reach
// their begin by the same program prefix (the header's deadlock note).
void MarkEarlyEnds(const Topology& topology, const std::vector<ComputeOp>& ops,
                   const std::vector<GroupPlan>& groups,
                   std::vector<StageSync>& syncs) {
  std::map<int, size_t> first_weight_gradient;  // by model stage
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ComputesWeightGradient(ops[i].op)) {
      first_weight_gradient.emplace(topology.ModelStage(ops[i].ref), i);
    }
  }
  for (StageSync& s : syncs) {
    const GroupPlan& group = groups[s.model_stage];
    if (!s.last_backward || group.sum != Collective::kReduceScatter ||
        !group.mirrored) {
      continue;
    }
    for (size_t i = *s.last_backward + 1; i < ops.size(); ++i) {
      if (!ComputesWeightGradient(ops[i].op)) continue;
      if (first_weight_gradient.at(topology.ModelStage(ops[i].ref)) == i) {
        s.eager = true;
        s.end_before = i;
      }
      break;
    }
  }
}

// Where a fully sharded stage's parameters are whole on one position: from
// the end of a gather, right before the compute op `first`, to their release
// right after op `last`. The gather begins before op `begin_before`, so that
// it runs during that op, or at the start of the program (index 0).
struct GatherWindow {
  StageRef ref;
  size_t begin_before = 0;
  size_t first = 0;
  size_t last = 0;
};

// The gathers of the fully sharded stages a position holds. A mirrored
// group gathers for each run of consecutive compute ops on its stage (once
// per loop breadth-first, per micro-batch group depth-first), beginning one
// op ahead, so that a worker holds at most two stages' whole parameters: the
// one it computes and the next. Members of a group that spans positions
// (Chimera's directions) cannot agree on a count of runs, so they gather
// once per step, beginning at the start: no member's gather then waits for
// another's progress.
std::vector<GatherWindow> PlanGatherWindows(const Topology& topology,
                                            const std::vector<ComputeOp>& ops,
                                            const std::vector<GroupPlan>& groups,
                                            const std::vector<StageSync>& syncs) {
  std::vector<GatherWindow> windows;
  for (const StageSync& s : syncs) {
    const GroupPlan& group = groups[s.model_stage];
    if (!group.full) continue;
    std::optional<GatherWindow> open;
    for (size_t i = 0; i < ops.size(); ++i) {
      if (topology.ModelStage(ops[i].ref) != s.model_stage) continue;
      if (open && (open->last + 1 == i || !group.mirrored)) {
        open->last = i;
        continue;
      }
      if (open) windows.push_back(*open);
      const size_t begin_before = group.mirrored && i > 0 ? i - 1 : 0;
      open = GatherWindow{s.ref, begin_before, i, i};
    }
    // A replica that runs no micro-batch still gathers with its group.
    windows.push_back(open.value_or(GatherWindow{s.ref, 0, 0, 0}));
  }
  return windows;
}

// Writes the program of the worker at `position` of the data-parallel
// replica whose first rank is `base`.
class ProgramWriter {
 public:
  ProgramWriter(const Topology& topology, const Placement& placement,
                const std::vector<GroupPlan>& groups,
                const std::vector<StageSync>& syncs,
                const std::vector<GatherWindow>& windows, int position,
                int base, std::vector<Instruction>& out)
      : topology_(topology),
        placement_(placement),
        groups_(groups),
        syncs_(syncs),
        windows_(windows),
        position_(position),
        base_(base),
        out_(out) {}

  // `c`, the op at `index` of the position's order, with the receive before
  // it and the send after it that cross to other positions (a BACKWARD_WEIGHT
  // has none: nobody waits for it), the early sum ends due before it, and an
  // eager begin of the gradients' sum after the op that completes a stage's
  // gradients; under sharding full, the gathers that begin before it (ahead
  // of its receive, whose wait they may fill), the one that must have ended
  // for it, and the releases after it.
  void Compute(const ComputeOp& c, size_t index) {
    for (const GatherWindow& w : windows_) {
      if (w.begin_before == index) Push(OpKind::kAllGatherBegin, w.ref);
    }
    if (c.op == OpKind::kForward) {
      P2p(OpKind::kRecvAct, c, topology_.Prev(c.ref));
      EndGathersDueBefore(index);
      out_.push_back(MakeInstruction(OpKind::kForward, c, -1));
      P2p(OpKind::kSendAct, c, topology_.Next(c.ref));
    } else if (ComputesInputGradient(c.op)) {
      P2p(OpKind::kRecvGrad, c, topology_.Next(c.ref));
      EndSumsDueBefore(index);
      EndGathersDueBefore(index);
      out_.push_back(MakeInstruction(c.op, c, -1));
      P2p(OpKind::kSendGrad, c, topology_.Prev(c.ref));
    } else {
      EndSumsDueBefore(index);
      EndGathersDueBefore(index);
      out_.push_back(MakeInstruction(c.op, c, -1));
    }
    for (const StageSync& s : syncs_) {
      const GroupPlan& group = groups_[s.model_stage];
      if (s.eager && s.last_backward == index && group.collective) {
        Push(BeginOf(group.sum), s.ref);
      }
    }
    for (const GatherWindow& w : windows_) {
      if (w.last == index) Push(OpKind::kReleaseParams, w.ref);
    }
  }

  // The sums not begun eagerly, then every sum's end not ended early, each
  // sharded stage's step and gather right after its own; the optimizer step;
  // the gathers' ends. Each round's BEGINs precede its ENDs (the header's
  // deadlock note). A fully sharded stage gathers before its next use
  // instead.
  void Finish() {
    for (const StageSync& s : syncs_) {
      const GroupPlan& group = groups_[s.model_stage];
      if (s.eager || !group.collective) continue;
      Push(BeginOf(group.sum), s.ref);
    }
    for (const StageSync& s : syncs_) {
      if (groups_[s.model_stage].collective && !s.end_before) EndSum(s);
    }
    Instruction step;
    step.op = OpKind::kOptimizerStep;
    out_.push_back(step);
    for (const StageSync& s : syncs_) {
      const GroupPlan& group = groups_[s.model_stage];
      if (group.sharded && !group.full) Push(OpKind::kAllGatherEnd, s.ref);
    }
  }

 private:
  void Push(OpKind op, StageRef ref) {
    out_.push_back(StageInstruction(op, ref));
  }

  void EndSumsDueBefore(size_t index) {
    for (const StageSync& s : syncs_) {
      if (s.end_before == index) EndSum(s);
    }
  }

  void EndGathersDueBefore(size_t index) {
    for (const GatherWindow& w : windows_) {
      if (w.first == index) Push(OpKind::kAllGatherEnd, w.ref);
    }
  }

  // The end of `s`'s sum, and a sharded stage's step and gather begin.
  void EndSum(const StageSync& s) {
    const GroupPlan& group = groups_[s.model_stage];
    Push(EndOf(group.sum), s.ref);
    if (!group.sharded) return;
    Push(OpKind::kShardStep, s.ref);
    if (!group.full) Push(OpKind::kAllGatherBegin, s.ref);
  }

  // Only when `peer`, the neighbouring stage, is held by another position.
  void P2p(OpKind op, const ComputeOp& c, std::optional<StageRef> peer) {
    if (peer && placement_.At(*peer) != position_) {
      out_.push_back(MakeInstruction(op, c, base_ + placement_.At(*peer)));
    }
  }

  const Topology& topology_;
  const Placement& placement_;
  const std::vector<GroupPlan>& groups_;
  const std::vector<StageSync>& syncs_;
  const std::vector<GatherWindow>& windows_;
  const int position_;
  const int base_;
  std::vector<Instruction>& out_;
};

}  // namespace

absl::StatusOr<Schedule> BuildPrograms(
    const Topology& topology, const Placement& placement,
    const std::vector<std::vector<ComputeOp>>& order, GradientSync sync) {
  const int depth = topology.depth;
  if (static_cast<int>(order.size()) != depth) {
    return absl::InternalError(absl::StrCat("compute order has ", order.size(),
                                            " positions, want depth ", depth));
  }
  const std::vector<std::vector<StageRef>> held =
      HeldStages(topology, placement);
  const std::vector<GroupPlan> groups = PlanGroups(topology, held, sync);

  Schedule schedule;
  schedule.topology = topology;
  schedule.workers.resize(topology.NumWorkers());
  for (int p = 0; p < depth; ++p) {
    const std::vector<ComputeOp>& ops = order[p];
    std::vector<StageSync> syncs = PlanSync(topology, ops, held[p], sync.sync);
    if (sync.sync != Sync::kEnd) MarkEarlyEnds(topology, ops, groups, syncs);
    const std::vector<GatherWindow> windows =
        PlanGatherWindows(topology, ops, groups, syncs);
    for (int dp = 0; dp < topology.width; ++dp) {
      const int base = dp * depth;
      WorkerProgram& program = schedule.workers[base + p];
      program.rank = base + p;
      program.stages = held[p];
      std::vector<Instruction>& out = program.instructions;
      out.reserve(ops.size() * 2 + 5 * syncs.size() + 3 * windows.size() + 1);
      ProgramWriter writer(topology, placement, groups, syncs, windows, p,
                           base, out);
      for (size_t i = 0; i < ops.size(); ++i) writer.Compute(ops[i], i);
      writer.Finish();
    }
  }
  return schedule;
}

}  // namespace chimera::schedule
