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
  StageRef ref;             // the replica named in ALLREDUCE_BEGIN/END
  std::optional<size_t> last_backward;  // index into the position's order
  bool eager = false;
};

// Model stages held by a position, with the index of the last backward that
// touches each, and whether a grid gap follows it (Chimera section 3.2:
// sync eagerly only where a bubble can hide the allreduce).
std::vector<StageSync> PlanSync(const Topology& topology,
                                const std::vector<ComputeOp>& ops,
                                const std::vector<StageRef>& held, Sync sync) {
  std::map<int, StageSync> by_stage;
  for (const StageRef& ref : held) {
    int model_stage = topology.ModelStage(ref);
    by_stage.emplace(model_stage,
                     StageSync{model_stage, ref, std::nullopt, false});
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].op == OpKind::kBackward) {
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
  inst.recompute = op == OpKind::kBackward && c.recompute;
  return inst;
}

Instruction AllreduceInstruction(OpKind op, StageRef ref) {
  Instruction inst;
  inst.op = op;
  inst.chunk = ref.chunk;
  inst.stage = ref.stage;
  return inst;
}

}  // namespace

absl::StatusOr<Schedule> BuildPrograms(
    const Topology& topology, const Placement& placement,
    const std::vector<std::vector<ComputeOp>>& order, Sync sync) {
  const int depth = topology.depth;
  if (static_cast<int>(order.size()) != depth) {
    return absl::InternalError(absl::StrCat("compute order has ", order.size(),
                                            " positions, want depth ", depth));
  }
  // Held replicas per position, in chunk-major order.
  std::vector<std::vector<StageRef>> held(depth);
  for (int chunk = 0; chunk < topology.num_chunks; ++chunk) {
    for (int stage = 0; stage < depth; ++stage) {
      held[placement.At({chunk, stage})].push_back({chunk, stage});
    }
  }
  // Workers holding each model stage within one replica; the allreduce group
  // is this times the width.
  std::vector<std::set<int>> holders(topology.NumModelStages());
  for (int p = 0; p < depth; ++p) {
    for (const StageRef& ref : held[p]) {
      holders[topology.ModelStage(ref)].insert(p);
    }
  }
  auto needs_allreduce = [&](int model_stage) {
    return holders[model_stage].size() * topology.width > 1;
  };

  Schedule schedule;
  schedule.topology = topology;
  schedule.workers.resize(topology.NumWorkers());
  for (int p = 0; p < depth; ++p) {
    const std::vector<ComputeOp>& ops = order[p];
    std::vector<StageSync> syncs = PlanSync(topology, ops, held[p], sync);
    for (int dp = 0; dp < topology.width; ++dp) {
      const int base = dp * depth;
      WorkerProgram& program = schedule.workers[base + p];
      program.rank = base + p;
      program.stages = held[p];
      std::vector<Instruction>& out = program.instructions;
      out.reserve(ops.size() * 2 + 2 * syncs.size() + 1);
      for (size_t i = 0; i < ops.size(); ++i) {
        const ComputeOp& c = ops[i];
        if (c.op == OpKind::kForward) {
          std::optional<StageRef> prev = topology.Prev(c.ref);
          if (prev && placement.At(*prev) != p) {
            out.push_back(MakeInstruction(OpKind::kRecvAct, c,
                                          base + placement.At(*prev)));
          }
          out.push_back(MakeInstruction(OpKind::kForward, c, -1));
          std::optional<StageRef> next = topology.Next(c.ref);
          if (next && placement.At(*next) != p) {
            out.push_back(MakeInstruction(OpKind::kSendAct, c,
                                          base + placement.At(*next)));
          }
        } else {
          std::optional<StageRef> next = topology.Next(c.ref);
          if (next && placement.At(*next) != p) {
            out.push_back(MakeInstruction(OpKind::kRecvGrad, c,
                                          base + placement.At(*next)));
          }
          out.push_back(MakeInstruction(OpKind::kBackward, c, -1));
          std::optional<StageRef> prev = topology.Prev(c.ref);
          if (prev && placement.At(*prev) != p) {
            out.push_back(MakeInstruction(OpKind::kSendGrad, c,
                                          base + placement.At(*prev)));
          }
          for (const StageSync& s : syncs) {
            if (s.eager && s.last_backward == i &&
                needs_allreduce(s.model_stage)) {
              out.push_back(
                  AllreduceInstruction(OpKind::kAllreduceBegin, s.ref));
            }
          }
        }
      }
      // Every BEGIN precedes every END (see the header's deadlock note).
      for (const StageSync& s : syncs) {
        if (s.eager || !needs_allreduce(s.model_stage)) continue;
        out.push_back(AllreduceInstruction(OpKind::kAllreduceBegin, s.ref));
      }
      for (const StageSync& s : syncs) {
        if (!needs_allreduce(s.model_stage)) continue;
        out.push_back(AllreduceInstruction(OpKind::kAllreduceEnd, s.ref));
      }
      Instruction step;
      step.op = OpKind::kOptimizerStep;
      out.push_back(step);
    }
  }
  return schedule;
}

}  // namespace chimera::schedule
