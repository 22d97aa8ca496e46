#include "schedule/simulator.h"

#include <algorithm>
#include <cmath>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
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
  const Topology& t = schedule.topology;
  const int num_workers = static_cast<int>(schedule.workers.size());
  SimulationResult result;
  result.workers.resize(num_workers);
  std::vector<std::vector<InstructionId>> pred(num_workers);
  for (int r = 0; r < num_workers; ++r) {
    const size_t n = schedule.workers[r].instructions.size();
    result.workers[r].rank = r;
    result.workers[r].timings.resize(n);
    pred[r].resize(n, kNoPredecessor);
  }
  std::vector<double> now(num_workers, 0.0);
  // Stashed micro-batches per worker: (chunk, stage, mb) -> backward parts
  // still to run.
  std::vector<absl::flat_hash_map<int64_t, int>> stash(num_workers);
  std::vector<int> in_flight(num_workers, 0);
  auto stash_key = [&](const Instruction& inst, int mb) {
    return (static_cast<int64_t>(inst.chunk) * t.depth + inst.stage) *
               t.micro_batches +
           mb;
  };
  JointExecution execution(schedule);

  absl::Status status = execution.Run([&](const ExecutionStep& step) {
    const Instruction& inst = *step.inst;
    const int r = step.rank;
    WorkerResult& worker = result.workers[r];
    InstructionTiming& timing = worker.timings[step.index];
    InstructionId& from = pred[r][step.index];
    if (step.index > 0) from = {r, step.index - 1};
    timing.start = now[r];
    double end = now[r];
    const int model_stage = t.ModelStage({inst.chunk, inst.stage});
    switch (inst.op) {
      case OpKind::kForward: {
        end += StageCost(costs.stage_forward, costs.forward, model_stage) *
               inst.micro_batches.size();
        for (int mb : inst.micro_batches) {
          stash[r][stash_key(inst, mb)] = 0;
          ++in_flight[r];
        }
        worker.peak_activations = std::max(worker.peak_activations, in_flight[r]);
        break;
      }
      case OpKind::kBackward: {
        const int parts = std::max(1, inst.num_parts);
        double cost = StageCost(costs.stage_backward, costs.backward, model_stage);
        if (inst.recompute) {
          cost += StageCost(costs.stage_forward, costs.forward, model_stage);
        }
        end += cost / parts;
        auto it = stash[r].find(stash_key(inst, inst.micro_batches[0]));
        if (it != stash[r].end() && ++it->second == parts) {
          stash[r].erase(it);
          --in_flight[r];
        }
        break;
      }
      case OpKind::kRecvAct:
      case OpKind::kRecvGrad: {
        const InstructionId send = *step.matched_send;
        const double bytes = costs.activation_bytes * inst.micro_batches.size() /
                             std::max(1, inst.num_parts);
        const double transfer =
            costs.p2p_time ? costs.p2p_time(send.rank, r, bytes)
                           : costs.p2p_alpha + costs.p2p_beta * bytes;
        const double arrival =
            result.workers[send.rank].timings[send.index].end + transfer;
        if (arrival > end) {
          end = arrival;
          from = send;
        }
        break;
      }
      case OpKind::kAllreduceEnd: {
        double started = 0.0;
        InstructionId last = kNoPredecessor;
        for (const InstructionId& begin : *step.group_begins) {
          double posted = result.workers[begin.rank].timings[begin.index].end;
          if (last.rank < 0 || posted > started) {
            started = posted;
            last = begin;
          }
        }
        const double finish =
            started +
            StageCost(costs.stage_allreduce,
                      AllreduceTime(costs,
                                    static_cast<int>(step.group_begins->size())),
                      model_stage);
        if (finish > end) {
          worker.exposed_allreduce += finish - end;
          end = finish;
          from = last;
        }
        break;
      }
      case OpKind::kOptimizerStep:
        end += costs.optimizer_step;
        break;
      default:  // sends and allreduce begins are posted without waiting
        break;
    }
    if (IsCompute(inst.op) || inst.op == OpKind::kOptimizerStep) {
      worker.busy += end - timing.start;
    }
    timing.end = end;
    now[r] = end;
    return absl::OkStatus();
  });
  if (!status.ok()) return status;

  double first = 0.0, last = 0.0;
  bool any = false;
  InstructionId tail = kNoPredecessor;
  for (int r = 0; r < num_workers; ++r) {
    const auto& timings = result.workers[r].timings;
    for (size_t i = 0; i < timings.size(); ++i) {
      if (!any || timings[i].start < first) first = timings[i].start;
      if (!any || timings[i].end > last) {
        last = timings[i].end;
        tail = {r, i};
      }
      any = true;
    }
  }
  result.makespan = last - first;
  for (WorkerResult& worker : result.workers) {
    worker.idle = result.makespan - worker.busy;
    worker.bubble_ratio = BubbleRatio(worker.idle, result.makespan);
    result.bubble_ratio += worker.bubble_ratio / std::max(1, num_workers);
    result.exposed_allreduce =
        std::max(result.exposed_allreduce, worker.exposed_allreduce);
  }
  for (InstructionId id = tail; id.rank >= 0; id = pred[id.rank][id.index]) {
    OpKind op = schedule.workers[id.rank].instructions[id.index].op;
    if (op == OpKind::kForward) ++result.critical_forwards;
    if (op == OpKind::kBackward) ++result.critical_backwards;
  }
  return result;
}

}  // namespace chimera::schedule
