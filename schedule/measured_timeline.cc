#include "schedule/measured_timeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_cat.h"

namespace chimera::schedule {
namespace {

bool IsBusy(OpKind op) { return IsCompute(op) || UpdatesWeights(op); }

// Most micro-batches whose forward ran on `program`'s worker and whose
// backward has not finished, as the simulator counts them.
int PeakActivations(const WorkerProgram& program) {
  std::map<std::pair<StageRef, int>, int> parts_done;
  int in_flight = 0, peak = 0;
  for (const Instruction& inst : program.instructions) {
    const StageRef stage{inst.chunk, inst.stage};
    if (inst.op == OpKind::kForward) {
      for (int mb : inst.micro_batches) parts_done[{stage, mb}] = 0;
      in_flight += static_cast<int>(inst.micro_batches.size());
      peak = std::max(peak, in_flight);
    } else if (inst.op == OpKind::kBackward && !inst.micro_batches.empty()) {
      auto it = parts_done.find({stage, inst.micro_batches[0]});
      if (it != parts_done.end() &&
          ++it->second == std::max(1, inst.num_parts)) {
        parts_done.erase(it);
        --in_flight;
      }
    }
  }
  return peak;
}

// A running mean.
struct Mean {
  double sum = 0;
  int count = 0;
  void Add(double value) {
    sum += value;
    ++count;
  }
  double Or(double fallback) const {
    return count > 0 ? sum / count : fallback;
  }
};

}  // namespace

absl::StatusOr<SimulationResult> MeasuredResult(
    const Schedule& schedule,
    const std::vector<std::vector<InstructionTiming>>& spans) {
  if (spans.size() != schedule.workers.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the measurement has ", spans.size(),
                     " ranks; the schedule has ", schedule.workers.size()));
  }
  double first = std::numeric_limits<double>::infinity();
  double last = -first;
  for (size_t r = 0; r < spans.size(); ++r) {
    const size_t expected = schedule.workers[r].instructions.size();
    if (spans[r].size() != expected) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", r, " measured ", spans[r].size(),
                       " instructions; its program has ", expected));
    }
    for (size_t i = 0; i < spans[r].size(); ++i) {
      const InstructionTiming& span = spans[r][i];
      if (!std::isfinite(span.start) || !std::isfinite(span.end) ||
          span.end < span.start) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", r, " instruction ", i, " ends (", span.end,
                         ") before it starts (", span.start, ")"));
      }
      first = std::min(first, span.start);
      last = std::max(last, span.end);
    }
  }
  SimulationResult result;
  result.makespan = std::isfinite(first) ? last - first : 0.0;
  const int workers = static_cast<int>(spans.size());
  for (int r = 0; r < workers; ++r) {
    const WorkerProgram& program = schedule.workers[r];
    WorkerResult worker;
    worker.rank = r;
    for (size_t i = 0; i < spans[r].size(); ++i) {
      const InstructionTiming span{spans[r][i].start - first,
                                   spans[r][i].end - first};
      const OpKind op = program.instructions[i].op;
      if (IsBusy(op)) worker.busy += span.end - span.start;
      if (EndsCollective(op)) {
        worker.exposed_allreduce += span.end - span.start;
      }
      worker.timings.push_back(span);
    }
    worker.idle = result.makespan - worker.busy;
    worker.bubble_ratio = BubbleRatio(worker.idle, result.makespan);
    worker.peak_activations = PeakActivations(program);
    result.bubble_ratio += worker.bubble_ratio / std::max(1, workers);
    result.exposed_allreduce =
        std::max(result.exposed_allreduce, worker.exposed_allreduce);
    result.workers.push_back(std::move(worker));
  }
  return result;
}

CostModel MeasuredCosts(const Schedule& schedule,
                        const SimulationResult& measured) {
  const Topology& topology = schedule.topology;
  const int stages = topology.NumModelStages();
  std::vector<Mean> forward(stages), backward(stages), shard_step(stages);
  Mean optimizer;
  for (size_t r = 0; r < schedule.workers.size() && r < measured.workers.size();
       ++r) {
    const auto& program = schedule.workers[r].instructions;
    const auto& timings = measured.workers[r].timings;
    for (size_t i = 0; i < program.size() && i < timings.size(); ++i) {
      const Instruction& inst = program[i];
      const double seconds = timings[i].end - timings[i].start;
      const int stage = topology.ModelStage({inst.chunk, inst.stage});
      if (inst.op == OpKind::kForward && !inst.micro_batches.empty()) {
        forward[stage].Add(seconds / inst.micro_batches.size());
      } else if (inst.op == OpKind::kBackward) {
        backward[stage].Add(seconds * std::max(1, inst.num_parts));
      } else if (inst.op == OpKind::kOptimizerStep) {
        optimizer.Add(seconds);
      } else if (inst.op == OpKind::kShardStep) {
        shard_step[stage].Add(seconds);
      }
    }
  }
  // The recomputed forward is part of a measured backward; the simulator
  // adds it to the backward cost itself.
  bool recompute = false;
  for (const WorkerProgram& worker : schedule.workers) {
    for (const Instruction& inst : worker.instructions) {
      recompute = recompute || (inst.op == OpKind::kBackward && inst.recompute);
    }
  }
  CostModel costs;
  for (int stage = 0; stage < stages; ++stage) {
    const double f = forward[stage].Or(costs.forward);
    const double b = backward[stage].Or(costs.backward);
    costs.stage_forward.push_back(f);
    costs.stage_backward.push_back(recompute ? std::max(0.0, b - f) : b);
    costs.stage_shard_step.push_back(shard_step[stage].Or(0.0));
  }
  costs.optimizer_step = optimizer.Or(0.0);
  return costs;
}

}  // namespace chimera::schedule
