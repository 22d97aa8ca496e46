#include "schedule/simulator.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/status_macros.h"
#include "schedule/joint_execution.h"

namespace chimera::schedule {
namespace {

constexpr InstructionId kNoPredecessor{-1, 0};

double StageCost(const std::vector<double>& per_stage, double fallback,
                 int model_stage) {
  return model_stage < static_cast<int>(per_stage.size())
             ? per_stage[model_stage]
             : fallback;
}

// One Simulate call: each instruction's timing as JointExecution runs the
// programs, then the summary over all of them.
class Simulation {
 public:
  Simulation(const Schedule& schedule, const CostModel& costs)
      : schedule_(schedule),
        topology_(schedule.topology),
        costs_(costs),
        num_workers_(static_cast<int>(schedule.workers.size())),
        pred_(num_workers_),
        now_(num_workers_, 0.0),
        stash_(num_workers_),
        in_flight_(num_workers_, 0) {
    result_.workers.resize(num_workers_);
    for (int r = 0; r < num_workers_; ++r) {
      const size_t n = schedule.workers[r].instructions.size();
      result_.workers[r].rank = r;
      result_.workers[r].timings.resize(n);
      pred_[r].resize(n, kNoPredecessor);
    }
  }

  // Times `step` after its worker's previous op, and after whatever it
  // waits for; that wait, if any, is its predecessor on the critical path.
  void Step(const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    const int r = step.rank;
    WorkerResult& worker = result_.workers[r];
    InstructionTiming& timing = worker.timings[step.index];
    InstructionId& from = pred_[r][step.index];
    if (step.index > 0) from = {r, step.index - 1};
    timing.start = now_[r];
    double end = now_[r];
    const int model_stage = topology_.ModelStage({inst.chunk, inst.stage});
    switch (inst.op) {
      case OpKind::kForward:
        end += Forward(r, inst, model_stage);
        break;
      case OpKind::kBackward:
        end += Backward(r, inst, model_stage);
        break;
      case OpKind::kRecvAct:
      case OpKind::kRecvGrad: {
        const double arrival = Arrival(step);
        if (arrival > end) {
          end = arrival;
          from = *step.matched_send;
        }
        break;
      }
      case OpKind::kAllreduceEnd: {
        InstructionId last = kNoPredecessor;
        const double finish = AllreduceFinish(step, model_stage, last);
        if (finish > end) {
          worker.exposed_allreduce += finish - end;
          end = finish;
          from = last;
        }
        break;
      }
      case OpKind::kOptimizerStep:
        end += costs_.optimizer_step;
        break;
      default:  // sends and allreduce begins are posted without waiting
        break;
    }
    if (IsCompute(inst.op) || inst.op == OpKind::kOptimizerStep) {
      worker.busy += end - timing.start;
    }
    timing.end = end;
    now_[r] = end;
  }

  // Once every step has run.
  SimulationResult Finish() {
    const InstructionId tail = MeasureMakespan();
    for (WorkerResult& worker : result_.workers) {
      worker.idle = result_.makespan - worker.busy;
      worker.bubble_ratio = BubbleRatio(worker.idle, result_.makespan);
      result_.bubble_ratio += worker.bubble_ratio / std::max(1, num_workers_);
      result_.exposed_allreduce =
          std::max(result_.exposed_allreduce, worker.exposed_allreduce);
    }
    CountCriticalPath(tail);
    return std::move(result_);
  }

 private:
  int64_t StashKey(const Instruction& inst, int mb) const {
    return (static_cast<int64_t>(inst.chunk) * topology_.depth + inst.stage) *
               topology_.micro_batches +
           mb;
  }

  // Stashes the forward's micro-batches; returns its cost.
  double Forward(int rank, const Instruction& inst, int model_stage) {
    for (int mb : inst.micro_batches) {
      stash_[rank][StashKey(inst, mb)] = 0;
      ++in_flight_[rank];
    }
    WorkerResult& worker = result_.workers[rank];
    worker.peak_activations =
        std::max(worker.peak_activations, in_flight_[rank]);
    return StageCost(costs_.stage_forward, costs_.forward, model_stage) *
           inst.micro_batches.size();
  }

  // Drops the micro-batch from the stash after its last part; returns the
  // part's cost.
  double Backward(int rank, const Instruction& inst, int model_stage) {
    const int parts = std::max(1, inst.num_parts);
    double cost =
        StageCost(costs_.stage_backward, costs_.backward, model_stage);
    if (inst.recompute) {
      cost += StageCost(costs_.stage_forward, costs_.forward, model_stage);
    }
    auto it = stash_[rank].find(StashKey(inst, inst.micro_batches[0]));
    if (it != stash_[rank].end() && ++it->second == parts) {
      stash_[rank].erase(it);
      --in_flight_[rank];
    }
    return cost / parts;
  }

  // When the message a receive consumes arrives.
  double Arrival(const ExecutionStep& step) const {
    const Instruction& inst = *step.inst;
    const InstructionId send = *step.matched_send;
    const double bytes = costs_.activation_bytes * inst.micro_batches.size() /
                         std::max(1, inst.num_parts);
    const double transfer = costs_.p2p_time
                                ? costs_.p2p_time(send.rank, step.rank, bytes)
                                : costs_.p2p_alpha + costs_.p2p_beta * bytes;
    return result_.workers[send.rank].timings[send.index].end + transfer;
  }

  // When the allreduce an ALLREDUCE_END waits for finishes: it starts once
  // the group's last member has begun it, which is returned in `last`.
  double AllreduceFinish(const ExecutionStep& step, int model_stage,
                         InstructionId& last) const {
    double started = 0.0;
    for (const InstructionId& begin : *step.group_begins) {
      double posted = result_.workers[begin.rank].timings[begin.index].end;
      if (last.rank < 0 || posted > started) {
        started = posted;
        last = begin;
      }
    }
    return started +
           StageCost(costs_.stage_allreduce,
                     AllreduceTime(costs_,
                                   static_cast<int>(step.group_begins->size())),
                     model_stage);
  }

  // Sets the makespan; returns the op that ends last.
  InstructionId MeasureMakespan() {
    double first = 0.0, last = 0.0;
    bool any = false;
    InstructionId tail = kNoPredecessor;
    for (int r = 0; r < num_workers_; ++r) {
      const auto& timings = result_.workers[r].timings;
      for (size_t i = 0; i < timings.size(); ++i) {
        if (!any || timings[i].start < first) first = timings[i].start;
        if (!any || timings[i].end > last) {
          last = timings[i].end;
          tail = {r, i};
        }
        any = true;
      }
    }
    result_.makespan = last - first;
    return tail;
  }

  void CountCriticalPath(InstructionId tail) {
    for (InstructionId id = tail; id.rank >= 0; id = pred_[id.rank][id.index]) {
      OpKind op = schedule_.workers[id.rank].instructions[id.index].op;
      if (op == OpKind::kForward) ++result_.critical_forwards;
      if (op == OpKind::kBackward) ++result_.critical_backwards;
    }
  }

  const Schedule& schedule_;
  const Topology& topology_;
  const CostModel& costs_;
  const int num_workers_;
  SimulationResult result_;
  // Per instruction, the one whose end bounds its start.
  std::vector<std::vector<InstructionId>> pred_;
  std::vector<double> now_;
  // Stashed micro-batches per worker: (chunk, stage, mb) -> backward parts
  // already run.
  std::vector<absl::flat_hash_map<int64_t, int>> stash_;
  std::vector<int> in_flight_;
};

}  // namespace

double BubbleRatio(double idle_seconds, double step_seconds) {
  return step_seconds > 0 ? idle_seconds / step_seconds : 0.0;
}

double AllreduceTime(const CostModel& costs, int ranks) {
  if (ranks <= 1) return 0.0;
  return 2.0 * std::log2(static_cast<double>(ranks)) * costs.allreduce_alpha +
         2.0 * (ranks - 1) / ranks * costs.allreduce_beta *
             costs.gradient_bytes;
}

absl::StatusOr<SimulationResult> Simulate(const Schedule& schedule,
                                          const CostModel& costs) {
  Simulation simulation(schedule, costs);
  JointExecution execution(schedule);
  RETURN_IF_ERROR(execution.Run([&simulation](const ExecutionStep& step) {
    simulation.Step(step);
    return absl::OkStatus();
  }));
  return simulation.Finish();
}

}  // namespace chimera::schedule
