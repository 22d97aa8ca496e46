#include "schedule/simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "common/status_macros.h"
#include "schedule/joint_execution.h"
#include "schedule/shared_cores.h"

namespace chimera::schedule {
namespace {

constexpr InstructionId kNoPredecessor{-1, 0};

// How often the programs are timed again, at most, for co-running ops'
// stretches to settle, and when they count as settled.
constexpr int kMaxCoRunningPasses = 8;
constexpr double kStretchTolerance = 1e-4;

// Per rank and instruction, the factor its compute cost runs longer by
// (empty: 1 for every instruction).
using Stretches = std::vector<std::vector<double>>;

bool IsComputing(OpKind op) { return IsCompute(op) || UpdatesWeights(op); }

// One collective of one model stage's group in an iteration: which, of which
// stage, and which run of it (ExecutionStep::occurrence).
using CollectiveKey = std::tuple<Collective, int, int>;

double StageCost(const std::vector<double>& per_stage, double fallback,
                 int model_stage) {
  return model_stage < static_cast<int>(per_stage.size())
             ? per_stage[model_stage]
             : fallback;
}

// Cores to share where `costs` puts more of the `num_workers` ranks on a
// node than it has cores; none otherwise (every rank computes on its own).
std::optional<SharedCores> CoresToShare(const CostModel& costs,
                                        int num_workers) {
  if (costs.cores_per_node <= 0 ||
      static_cast<int>(costs.node_of_rank.size()) < num_workers) {
    return std::nullopt;
  }
  std::map<int, int> ranks_per_node;
  int most = 0;
  for (int r = 0; r < num_workers; ++r) {
    most = std::max(most, ++ranks_per_node[costs.node_of_rank[r]]);
  }
  if (most <= costs.cores_per_node) return std::nullopt;
  return SharedCores(ranks_per_node.rbegin()->first + 1, costs.cores_per_node);
}

// One Simulate call: each instruction's timing as JointExecution runs the
// programs, then the summary over all of them.
class Simulation {
 public:
  // `holders`: the ranks holding each model stage (JointExecution's).
  Simulation(const Schedule& schedule, const CostModel& costs,
             const Stretches& stretches,
             const std::vector<std::vector<int>>& holders)
      : schedule_(schedule),
        topology_(schedule.topology),
        costs_(costs),
        stretches_(stretches),
        num_workers_(static_cast<int>(schedule.workers.size())),
        pred_(num_workers_),
        now_(num_workers_, 0.0),
        stash_(num_workers_),
        in_flight_(num_workers_, 0),
        link_free_(num_workers_, 0.0),
        slept_(num_workers_, false),
        sharded_(num_workers_),
        holders_(holders),
        cores_(CoresToShare(costs, num_workers_)) {
    result_.workers.resize(num_workers_);
    for (int r = 0; r < num_workers_; ++r) {
      const WorkerProgram& program = schedule.workers[r];
      const size_t n = program.instructions.size();
      result_.workers[r].rank = r;
      result_.workers[r].timings.resize(n);
      pred_[r].resize(n, kNoPredecessor);
      for (const Instruction& inst : program.instructions) {
        if (inst.op == OpKind::kShardStep) {
          sharded_[r].insert(topology_.ModelStage({inst.chunk, inst.stage}));
        }
      }
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
    bool waited = false;
    switch (inst.op) {
      case OpKind::kForward:
        end = Compute(step, Forward(r, inst, model_stage), timing);
        break;
      case OpKind::kBackward:
      case OpKind::kBackwardInput:
      case OpKind::kBackwardWeight:
        end = Compute(step, Backward(r, inst, model_stage), timing);
        break;
      case OpKind::kRecvAct:
      case OpKind::kRecvGrad: {
        const double arrival = Arrival(step);
        if (arrival > end) {
          end = arrival;
          from = *step.matched_send;
          waited = true;
        }
        end = BookCore(r, end, costs_.message_receive).end;
        break;
      }
      case OpKind::kOptimizerStep:
        end = Compute(step, OptimizerStep(r), timing);
        break;
      case OpKind::kShardStep:
        end = Compute(step, ShardStep(model_stage), timing);
        break;
      case OpKind::kSendAct:
      case OpKind::kSendGrad:
        end = OnCore(r, costs_.message_post, timing);
        break;
      default:
        if (BeginsCollective(inst.op)) {
          end = OnCore(r, costs_.message_post, timing);
        } else if (EndsCollective(inst.op)) {
          InstructionId last = kNoPredecessor;
          const double finish = CollectiveFinish(
              step, {*CollectiveOf(inst.op), model_stage, step.occurrence},
              last);
          if (finish > end) {
            worker.exposed_allreduce += finish - end;
            end = finish;
            from = last;
            waited = true;
          }
        }
        break;
    }
    if (IsComputing(inst.op)) {
      worker.busy += end - timing.start;
      slept_[r] = false;
    } else if (waited) {
      slept_[r] = true;
    }
    timing.end = end;
    now_[r] = end;
    if (BeginsCollective(inst.op) && step.group_begins != nullptr) {
      begun_collectives_.emplace(
          std::make_pair(LastBegin(*step.group_begins).first,
                         CollectiveKey{*CollectiveOf(inst.op), model_stage,
                                       step.occurrence}),
          step.group_begins);
    }
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

  // When the compute op of `step`, of `cost` and ready at `timing.start`,
  // ends: stretched where it co-runs, and started later (`timing.start`
  // moves) where it waits for a shared core.
  double Compute(const ExecutionStep& step, double cost,
                 InstructionTiming& timing) {
    if (slept_[step.rank]) cost += std::min(cost, costs_.wake_up);
    if (!stretches_.empty()) cost *= stretches_[step.rank][step.index];
    return OnCore(step.rank, cost, timing);
  }

  // When work of `rank` taking `cost`, ready at `timing.start`, ends: where
  // ranks share cores it starts once one is free (`timing.start` moves).
  double OnCore(int rank, double cost, InstructionTiming& timing) {
    const CoreSpan span = BookCore(rank, timing.start, cost);
    timing.start = span.start;
    return span.end;
  }

  // Books `cost` of work of `rank`, ready at `ready`, on the cores of its
  // node where they are shared.
  CoreSpan BookCore(int rank, double ready, double cost) {
    return cores_ ? cores_->Run(costs_.node_of_rank[rank], ready, cost)
                  : CoreSpan{ready, ready + cost};
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

  // Drops the micro-batch from the stash after the last part of its
  // BACKWARD or BACKWARD_WEIGHT (a BACKWARD_INPUT keeps it for its W);
  // returns the part's cost.
  double Backward(int rank, const Instruction& inst, int model_stage) {
    const int parts = std::max(1, inst.num_parts);
    double cost = BackwardCost(inst.op, model_stage);
    if (inst.recompute) {
      cost += StageCost(costs_.stage_forward, costs_.forward, model_stage);
    }
    if (ComputesWeightGradient(inst.op)) {
      auto it = stash_[rank].find(StashKey(inst, inst.micro_batches[0]));
      if (it != stash_[rank].end() && ++it->second == parts) {
        stash_[rank].erase(it);
        --in_flight_[rank];
      }
    }
    return cost / parts;
  }

  // A half without a cost of its own costs half the stage's backward.
  double BackwardCost(OpKind op, int model_stage) const {
    const double backward =
        StageCost(costs_.stage_backward, costs_.backward, model_stage);
    if (op == OpKind::kBackward) return backward;
    const bool input = op == OpKind::kBackwardInput;
    const double half =
        StageCost(input ? costs_.stage_backward_input
                        : costs_.stage_backward_weight,
                  input ? costs_.backward_input : costs_.backward_weight,
                  model_stage);
    return half >= 0 ? half : backward / 2;
  }

  // The optimizer step of `rank`: its replicas of one model stage share
  // their parameters, so each model stage it holds counts once, and a stage
  // whose shard it steps (SHARD_STEP) not at all.
  double OptimizerStep(int rank) const {
    double cost = costs_.optimizer_step;
    std::set<int> model_stages;
    for (const StageRef& ref : schedule_.workers[rank].stages)
      model_stages.insert(topology_.ModelStage(ref));
    for (int model_stage : model_stages) {
      if (sharded_[rank].count(model_stage) != 0) continue;
      cost += StageCost(costs_.stage_optimizer, 0.0, model_stage);
    }
    return cost;
  }

  // One member's step of its shard: its share of the stage's step.
  double ShardStep(int model_stage) const {
    return StageCost(costs_.stage_shard_step,
                     StageCost(costs_.stage_optimizer, 0.0, model_stage) /
                         std::max<size_t>(1, holders_[model_stage].size()),
                     model_stage);
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

  // When the collective a collective's END waits for finishes; `last` is
  // set to the BEGIN that started it. The first END of a group to run fixes
  // its timing for all members.
  double CollectiveFinish(const ExecutionStep& step, CollectiveKey collective,
                          InstructionId& last) {
    auto timed = collectives_.find(collective);
    if (timed == collectives_.end()) {
      // Collectives take their members' links in the order they begin, not
      // in the order programs wait for them: one begun eagerly during the
      // backward pass goes before one a program waits for first.
      const auto begun =
          std::make_pair(LastBegin(*step.group_begins).first, collective);
      while (!begun_collectives_.empty() &&
             begun_collectives_.begin()->first < begun) {
        const auto [key, begins] = *begun_collectives_.begin();
        begun_collectives_.erase(begun_collectives_.begin());
        TimeCollective(*begins, key.second);
      }
      begun_collectives_.erase(begun);
      TimeCollective(*step.group_begins, collective);
      timed = collectives_.find(collective);
    }
    last = timed->second.last;
    return timed->second.finish;
  }

  // How long a collective of `ranks` takes: a model stage's own figure where
  // the costs give one, else Rabenseifner's allreduce, of which a
  // reduce-scatter and an all-gather are each half.
  double CollectiveSeconds(CollectiveKey collective, int ranks) const {
    const Collective kind = std::get<0>(collective);
    const int model_stage = std::get<1>(collective);
    const double allreduce = AllreduceTime(costs_, ranks);
    switch (kind) {
      case Collective::kAllreduce:
        return StageCost(costs_.stage_allreduce, allreduce, model_stage);
      case Collective::kReduceScatter:
        return StageCost(costs_.stage_allreduce, allreduce / 2, model_stage);
      case Collective::kAllGather:
        return StageCost(costs_.stage_allgather, allreduce / 2, model_stage);
    }
    return allreduce;
  }

  // The latest BEGIN of a group: when it was posted, and which.
  std::pair<double, InstructionId> LastBegin(
      const std::vector<InstructionId>& begins) const {
    std::pair<double, InstructionId> last{0.0, kNoPredecessor};
    for (const InstructionId& begin : begins) {
      const double posted = result_.workers[begin.rank].timings[begin.index].end;
      if (last.second.rank < 0 || posted > last.first) last = {posted, begin};
    }
    return last;
  }

  // Times `collective`: it starts once the group's last member has begun it
  // and every member's link has finished the collectives it took on before.
  void TimeCollective(const std::vector<InstructionId>& begins,
                      CollectiveKey collective) {
    auto [started, last] = LastBegin(begins);
    for (const InstructionId& begin : begins) {
      started = std::max(started, link_free_[begin.rank]);
    }
    const double duration =
        CollectiveSeconds(collective, static_cast<int>(begins.size()));
    // On shared cores the copies and sums of a collective take a core of
    // every member for as long as it runs.
    double finish = started + duration;
    for (const InstructionId& begin : begins) {
      finish = std::max(finish, BookCore(begin.rank, started, duration).end);
    }
    for (const InstructionId& begin : begins) link_free_[begin.rank] = finish;
    collectives_[collective] = {finish, last};
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
      if (IsBackward(op)) ++result_.critical_backwards;
    }
  }

  const Schedule& schedule_;
  const Topology& topology_;
  const CostModel& costs_;
  const Stretches& stretches_;
  const int num_workers_;
  SimulationResult result_;
  // Per instruction, the one whose end bounds its start.
  std::vector<std::vector<InstructionId>> pred_;
  std::vector<double> now_;
  // Stashed micro-batches per worker: (chunk, stage, mb) -> backward parts
  // already run.
  std::vector<absl::flat_hash_map<int64_t, int>> stash_;
  std::vector<int> in_flight_;
  // Per rank, when its link is done with the collectives timed so far: a
  // rank's collectives share its link, one after another.
  std::vector<double> link_free_;
  // Per rank, whether it waited since its last compute op (and pays the
  // wake-up cost in its next).
  std::vector<bool> slept_;
  // Per rank, the model stages whose shard it steps.
  std::vector<std::set<int>> sharded_;
  // Per model stage, the ranks holding it.
  const std::vector<std::vector<int>>& holders_;
  struct TimedCollective {
    double finish;
    InstructionId last;  // the BEGIN that started it
  };
  // Each collective of the iteration once timed.
  std::map<CollectiveKey, TimedCollective> collectives_;
  // Collectives every member has begun and none has waited for yet, by when
  // they began (then which): their group's BEGINs.
  std::map<std::pair<double, CollectiveKey>, const std::vector<InstructionId>*>
      begun_collectives_;
  // Set where some node has more ranks than cores.
  std::optional<SharedCores> cores_;
};

// Whether some node holds several ranks that slow each other down.
bool RanksCoRun(const CostModel& costs, int num_workers) {
  if (costs.co_running_slowdown <= 0 ||
      static_cast<int>(costs.node_of_rank.size()) < num_workers) {
    return false;
  }
  std::set<int> nodes;
  for (int r = 0; r < num_workers; ++r) {
    if (!nodes.insert(costs.node_of_rank[r]).second) return true;
  }
  return false;
}

// How long the sorted, disjoint `intervals` cover of [begin, end).
double Overlap(const std::vector<InstructionTiming>& intervals, double begin,
               double end) {
  auto it = std::upper_bound(
      intervals.begin(), intervals.end(), begin,
      [](double t, const InstructionTiming& i) { return t < i.end; });
  double covered = 0.0;
  for (; it != intervals.end() && it->start < end; ++it) {
    covered += std::min(end, it->end) - std::max(begin, it->start);
  }
  return covered;
}

// The stretch every compute op of `result` implies: 1 + slowdown times the
// mean number of other ranks of its node computing while it ran.
Stretches CoRunningStretches(const Schedule& schedule, const CostModel& costs,
                             const SimulationResult& result) {
  const int num_workers = static_cast<int>(schedule.workers.size());
  // Each rank's compute, in program order: sorted and disjoint.
  std::vector<std::vector<InstructionTiming>> computing(num_workers);
  for (int r = 0; r < num_workers; ++r) {
    const auto& program = schedule.workers[r].instructions;
    for (size_t i = 0; i < program.size(); ++i) {
      if (IsComputing(program[i].op)) {
        computing[r].push_back(result.workers[r].timings[i]);
      }
    }
  }
  Stretches stretches(num_workers);
  for (int r = 0; r < num_workers; ++r) {
    const auto& program = schedule.workers[r].instructions;
    stretches[r].assign(program.size(), 1.0);
    for (size_t i = 0; i < program.size(); ++i) {
      const InstructionTiming& own = result.workers[r].timings[i];
      if (!IsComputing(program[i].op) || own.end <= own.start) continue;
      double others = 0.0;
      for (int q = 0; q < num_workers; ++q) {
        if (q != r && costs.node_of_rank[q] == costs.node_of_rank[r]) {
          others += Overlap(computing[q], own.start, own.end);
        }
      }
      stretches[r][i] += costs.co_running_slowdown * others / (own.end - own.start);
    }
  }
  return stretches;
}

// The largest difference between two stretches of one instruction.
double LargestChange(const Stretches& before, const Stretches& after) {
  double largest = 0.0;
  for (size_t r = 0; r < after.size(); ++r) {
    for (size_t i = 0; i < after[r].size(); ++i) {
      const double old = before.empty() ? 1.0 : before[r][i];
      largest = std::max(largest, std::abs(after[r][i] - old));
    }
  }
  return largest;
}

// Moves `implied` halfway back towards `before` (empty: nothing to move to).
void HalfwayFrom(const Stretches& before, Stretches& implied) {
  if (before.empty()) return;
  for (size_t r = 0; r < implied.size(); ++r) {
    for (size_t i = 0; i < implied[r].size(); ++i) {
      implied[r][i] = 0.5 * (implied[r][i] + before[r][i]);
    }
  }
}

absl::StatusOr<SimulationResult> SimulateOnce(const Schedule& schedule,
                                              const CostModel& costs,
                                              const Stretches& stretches) {
  JointExecution execution(schedule);
  Simulation simulation(schedule, costs, stretches, execution.holders());
  RETURN_IF_ERROR(execution.Run([&simulation](const ExecutionStep& step) {
    simulation.Step(step);
    return absl::OkStatus();
  }));
  return simulation.Finish();
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
  if (schedule.topology.repeating) {
    return absl::InvalidArgumentError(
        "a repeating (asynchronous) schedule is simulated over its steps: "
        "UnrollSteps, or SimulateSteadyStep for one step");
  }
  Stretches stretches;
  ASSIGN_OR_RETURN(SimulationResult result,
                   SimulateOnce(schedule, costs, stretches));
  if (!RanksCoRun(costs, static_cast<int>(schedule.workers.size()))) {
    return result;
  }
  // Stretching an op moves the overlaps that stretched it: time again until
  // they agree, halving each change after the first so that ops which push
  // each other apart settle in between.
  for (int pass = 1; pass < kMaxCoRunningPasses; ++pass) {
    Stretches implied = CoRunningStretches(schedule, costs, result);
    if (LargestChange(stretches, implied) < kStretchTolerance) break;
    HalfwayFrom(stretches, implied);
    stretches = std::move(implied);
    ASSIGN_OR_RETURN(result, SimulateOnce(schedule, costs, stretches));
  }
  return result;
}

}  // namespace chimera::schedule
