#include "planner/plan_evaluator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "planner/analytic_profile.h"
#include "planner/model_profile.h"
#include "planner/stage_partition.h"
#include "schedule/generator.h"
#include "schedule/parameter_residency.h"
#include "schedule/params_proto.h"
#include "schedule/simulator.h"
#include "schedule/step_unrolling.h"

namespace chimera::planner {
namespace {

using schedule::IsBidirectional;
using schedule::Scheme;

// A reduce-scatter or an all-gather of `bytes` over `ranks`: each member
// moves (G - 1)/G of the bytes, in log2(G) latency steps.
double ShardedCollectiveSeconds(const chimera::v1::LinkSpec& link, int ranks,
                                double bytes) {
  if (ranks <= 1) return 0;
  const double step_latency = link.collective_latency_seconds() > 0
                                  ? link.collective_latency_seconds()
                                  : link.latency_seconds();
  return std::log2(static_cast<double>(ranks)) * step_latency +
         static_cast<double>(ranks - 1) / ranks * bytes /
             link.bandwidth_bytes_per_second();
}

// A reduce-scatter and then an all-gather.
double AllreduceSeconds(const chimera::v1::LinkSpec& link, int ranks,
                        double bytes) {
  return 2 * ShardedCollectiveSeconds(link, ranks, bytes);
}

// The candidate's program with at most kSimulatedWidth replicas, or all of
// them (`full_width`); errors name the candidate.
absl::StatusOr<schedule::Schedule> GenerateSimulated(
    const schedule::ScheduleParams& params, bool full_width) {
  schedule::ScheduleParams simulated = params;
  if (!full_width) simulated.width = std::min(params.width, kSimulatedWidth);
  absl::StatusOr<schedule::Schedule> generated =
      schedule::GenerateSchedule(simulated);
  if (!generated.ok()) {
    return absl::Status(
        generated.status().code(),
        absl::StrCat("generating ", schedule::SchemeName(params.scheme),
                     " W=", params.width, " D=", params.depth, ": ",
                     generated.status().message()));
  }
  return generated;
}

// The workers holding one model stage in the whole plan (its gradient
// group): all W replicas of the positions that hold it, and the slowest link
// the group crosses.
struct StageGroup {
  int size = 1;
  const chimera::v1::LinkSpec* link = nullptr;
};

// Whether `sharding` shards the stage of `group` (one member has nothing to
// shard with).
bool ShardsOver(schedule::Sharding sharding, const StageGroup& group) {
  return sharding != schedule::Sharding::kNone && group.size >= 2;
}

std::vector<StageGroup> StageGroups(const PlanningContext& context,
                                    const SimulationInputs& inputs,
                                    const schedule::ScheduleParams& params) {
  const int model_stages = static_cast<int>(inputs.stages.size());
  const schedule::Topology& topology = inputs.program.topology;
  std::vector<std::set<int>> positions(model_stages);
  for (const schedule::WorkerProgram& worker : inputs.program.workers) {
    for (const schedule::StageRef& ref : worker.stages) {
      positions[topology.ModelStage(ref)].insert(
          topology.PositionOf(worker.rank));
    }
  }
  std::vector<StageGroup> groups;
  for (int s = 0; s < model_stages; ++s) {
    std::set<int> nodes;
    int size = 0;
    for (int position : positions[s]) {
      for (int dp = 0; dp < params.width; ++dp) {
        for (int k = 0; k < topology.ReplicasOf(position); ++k) {
          nodes.insert(inputs.slots[topology.RankOf(dp, position, k)].node);
          ++size;
        }
      }
    }
    const auto& links = context.cluster.links();
    groups.push_back(
        {size, nodes.size() > 1 ? &links.inter_node() : &links.intra_node()});
  }
  return groups;
}

// Each model stage's gradient sum over its group: an allreduce, of which the
// first stage's moves the token embedding rows the step's tokens can use
// only; or, sharded as gradients-and-optimizer, a reduce-scatter of them all.
std::vector<double> StageAllreduceSeconds(
    const PlanningContext& context, const SimulationInputs& inputs,
    const Candidate& candidate, const std::vector<StageGroup>& groups) {
  const double tokens_per_step = static_cast<double>(candidate.params.width) *
                                 candidate.params.micro_batches *
                                 candidate.micro_batch_size *
                                 context.job.spec().model().seq_length();
  const bool reduce_scatter =
      candidate.params.sharding == schedule::Sharding::kGradientsAndOptimizer ||
      candidate.params.sharding == schedule::Sharding::kFull;
  std::vector<double> seconds;
  for (size_t s = 0; s < groups.size(); ++s) {
    double bytes = static_cast<double>(inputs.stages[s].parameter_bytes);
    if (reduce_scatter && ShardsOver(candidate.params.sharding, groups[s])) {
      seconds.push_back(
          ShardedCollectiveSeconds(*groups[s].link, groups[s].size, bytes));
      continue;
    }
    if (s == 0) {
      bytes -= UnsyncedEmbeddingBytes(context.job.spec().model(),
                                      tokens_per_step);
    }
    seconds.push_back(AllreduceSeconds(*groups[s].link, groups[s].size, bytes));
  }
  return seconds;
}

// With its state sharded, each member of a stage's group steps 1/G of the
// stage (SHARD_STEP) and the group all-gathers the updated weights
// (sharded_optimizer.h): each stage's shard step and gather, 0 where the
// stage is not sharded.
void SetShardedStepCosts(const SimulationInputs& inputs,
                         const schedule::ScheduleParams& params,
                         const std::vector<StageGroup>& groups,
                         schedule::CostModel& costs) {
  for (size_t s = 0; s < groups.size(); ++s) {
    const StageProfile& stage = inputs.stages[s];
    const bool sharded = ShardsOver(params.sharding, groups[s]);
    costs.stage_optimizer.push_back(stage.optimizer_seconds);
    costs.stage_shard_step.push_back(
        sharded ? stage.optimizer_seconds / groups[s].size : 0);
    costs.stage_allgather.push_back(
        sharded ? ShardedCollectiveSeconds(
                      *groups[s].link, groups[s].size,
                      static_cast<double>(stage.parameter_bytes))
                : 0);
  }
}

// Memory of each simulated worker of replica 0 (the others mirror it), its
// busy time apart from the update, its recomputation and its optimizer
// update (each the slowest worker's).
struct ReplicaUsage {
  int64_t peak_max = 0;
  int64_t peak_min = 0;
  double max_compute = 0;
  double recompute = 0;
  double max_update = 0;
};

// The most gradient bytes `worker` holds at once, as the runtime holds them
// (GradientBucket): a stage whose gradients are reduce-scattered from its
// first weight gradient to its SHARD_STEP, every other stage all along.
int64_t MostGradientBytesHeld(const schedule::WorkerProgram& worker,
                              const schedule::Topology& topology,
                              const std::vector<StageProfile>& stages) {
  std::set<int> scattered, held;
  for (const schedule::Instruction& inst : worker.instructions) {
    if (inst.op == schedule::OpKind::kReduceScatterBegin) {
      scattered.insert(topology.ModelStage({inst.chunk, inst.stage}));
    }
  }
  int64_t always = 0;
  for (const schedule::StageRef& ref : worker.stages) {
    const int model_stage = topology.ModelStage(ref);
    if (scattered.count(model_stage) == 0 && held.insert(model_stage).second) {
      always += stages[model_stage].parameter_bytes;
    }
  }
  int64_t now = always, most = always;
  for (const schedule::Instruction& inst : worker.instructions) {
    const int model_stage = topology.ModelStage({inst.chunk, inst.stage});
    if (scattered.count(model_stage) == 0) continue;
    if (schedule::ComputesWeightGradient(inst.op) &&
        held.insert(model_stage).second) {
      now += stages[model_stage].parameter_bytes;
      most = std::max(most, now);
    } else if (inst.op == schedule::OpKind::kShardStep) {
      held.erase(model_stage);
      now -= stages[model_stage].parameter_bytes;
    }
  }
  return most;
}

// Sharding full: the most bytes of whole parameters `worker` holds at once,
// from each ALLGATHER_BEGIN of a stage it releases to that RELEASE_PARAMS
// (sharded_optimizer.h); it keeps the shards besides.
int64_t MostParameterBytesGathered(const schedule::WorkerProgram& worker,
                                   const schedule::Topology& topology,
                                   const std::vector<StageProfile>& stages) {
  const std::set<int> released =
      schedule::FullyShardedStages(topology, worker.instructions);
  int64_t now = 0, most = 0;
  for (const schedule::Instruction& inst : worker.instructions) {
    const int model_stage = topology.ModelStage({inst.chunk, inst.stage});
    if (released.count(model_stage) == 0) continue;
    if (inst.op == schedule::OpKind::kAllGatherBegin) {
      now += stages[model_stage].parameter_bytes;
      most = std::max(most, now);
    } else if (inst.op == schedule::OpKind::kReleaseParams) {
      now -= stages[model_stage].parameter_bytes;
    }
  }
  return most;
}

// The versions of its weights a worker keeps at most: two under
// PipeDream-2BW, D - i on PipeDream's stage i (one per micro-batch in
// flight, the newest among them), one otherwise.
int WeightVersionsKept(const schedule::Topology& topology, int rank) {
  switch (topology.update_rule) {
    case schedule::UpdateRule::kDoubleBuffered:
      return 2;
    case schedule::UpdateRule::kStashed:
      return topology.depth - topology.PositionOf(rank);
    case schedule::UpdateRule::kSynchronous:
      break;
  }
  return 1;
}

// A worker's memory: weights, gradients and optimizer state of every stage
// replica it holds, plus its peak of stashed micro-batches at the largest
// stash any of its stages needs per micro-batch, and with recomputation the
// largest stage's activations and its backward's own working memory. The
// gradients held, and under sharding full the parameters gathered, at the
// activations' peak are bounded by the most held at any time.
ReplicaUsage MeasureReplica(const PlanningContext& context,
                            const schedule::ScheduleParams& params,
                            const SimulationInputs& inputs,
                            const schedule::SimulationResult& result) {
  const schedule::Schedule& program = inputs.program;
  const schedule::Topology& topology = program.topology;
  const std::vector<StageProfile>& stages = inputs.stages;
  const double optimizer_factor =
      OptimizerStateFactor(context.job.spec().training().optimizer());
  ReplicaUsage usage;
  for (int rank = 0; rank < topology.WorkersPerPipeline(); ++rank) {
    const schedule::WorkerProgram& worker = program.workers[rank];
    double state = 0, update = 0;
    int64_t per_micro_batch = 0, working_set = 0;
    for (const schedule::StageRef& ref : worker.stages) {
      const int model_stage = topology.ModelStage(ref);
      const StageProfile& stage = stages[model_stage];
      // Weights, and the optimizer's share of this worker: its state and
      // its update.
      const int sharers = params.sharding == schedule::Sharding::kNone
                              ? 1
                              : inputs.group_sizes[model_stage];
      update += stage.optimizer_seconds / sharers;
      const int weight_sharers =
          params.sharding == schedule::Sharding::kFull ? sharers : 1;
      const double versions = WeightVersionsKept(topology, rank);
      state += (versions / weight_sharers + optimizer_factor / sharers) *
               stage.parameter_bytes;
      per_micro_batch =
          std::max(per_micro_batch, params.recompute ? stage.boundary_bytes
                                                     : stage.activation_bytes);
      // A recomputing backward runs its stage's forward again, whole, and
      // then backpropagates through it.
      working_set = std::max(
          working_set, stage.activation_bytes + stage.backward_extra_bytes);
    }
    const int64_t peak =
        static_cast<int64_t>(state) +
        MostGradientBytesHeld(worker, topology, stages) +
        MostParameterBytesGathered(worker, topology, stages) +
        result.workers[rank].peak_activations * per_micro_batch +
        (params.recompute ? working_set : 0);
    usage.peak_max = rank == 0 ? peak : std::max(usage.peak_max, peak);
    usage.peak_min = rank == 0 ? peak : std::min(usage.peak_min, peak);
    usage.max_compute =
        std::max(usage.max_compute, result.workers[rank].busy - update);
    usage.max_update = std::max(usage.max_update, update);
    for (const schedule::Instruction& inst : worker.instructions) {
      if (schedule::ComputesInputGradient(inst.op) && inst.recompute) {
        usage.recompute += stages[topology.ModelStage({inst.chunk, inst.stage})]
                               .forward_seconds /
                           std::max(1, inst.num_parts);
      }
    }
  }
  return usage;
}

// The partition and placement the prediction is for.
void DescribeLayout(const SimulationInputs& inputs, chimera::v1::Plan& plan) {
  for (size_t s = 0; s < inputs.partition.size(); ++s) {
    auto* range = plan.add_partition();
    range->set_stage(static_cast<int>(s));
    range->set_first_layer(inputs.partition[s].first_block);
    range->set_num_layers(inputs.partition[s].num_blocks);
  }
  for (size_t rank = 0; rank < inputs.slots.size(); ++rank) {
    auto* placed = plan.add_placement();
    placed->set_rank(static_cast<int>(rank));
    placed->set_node(inputs.slots[rank].node);
    placed->set_device(inputs.slots[rank].device);
  }
}

}  // namespace

double OptimizerStateFactor(const chimera::v1::OptimizerSpec& optimizer) {
  if (optimizer.name() == "adamw") return 2;
  return optimizer.momentum() > 0 ? 1 : 0;
}

absl::StatusOr<Candidate> CandidateOf(const chimera::v1::Plan& plan) {
  Candidate candidate;
  ASSIGN_OR_RETURN(candidate.params, schedule::ScheduleParamsOf(plan));
  candidate.micro_batch_size = plan.micro_batch_size();
  for (const chimera::v1::StageRange& range : plan.partition()) {
    candidate.partition.push_back({range.first_layer(), range.num_layers()});
  }
  return candidate;
}

absl::StatusOr<chimera::v1::Prediction> PredictPlan(
    const PlanningContext& context, const chimera::v1::Plan& plan) {
  ASSIGN_OR_RETURN(const Candidate candidate, CandidateOf(plan));
  ASSIGN_OR_RETURN(Evaluation evaluation,
                   EvaluateCandidate(context, candidate));
  return evaluation.plan.prediction();
}

namespace {

// The options of the plan's scheme: "pipelines=2 direct", "v=2", "pb".
std::string DescribeKnobs(const chimera::v1::Plan& plan) {
  if (plan.scheme() == "chimera") {
    return absl::StrCat("pipelines=", plan.pipelines(), " ", plan.concat());
  }
  if (plan.scheme() == "chimera-zb") return absl::StrCat("pipelines=", plan.pipelines());
  if (plan.scheme() == "zb-auto") {
    return plan.activation_limit() == 0
               ? std::string("limit=none")
               : absl::StrCat("limit=", plan.activation_limit());
  }
  if (plan.scheme() == "1f1b") return plan.policy();
  if (plan.scheme() == "mixpipe") {
    return absl::StrCat("K=", plan.mixpipe_k(), " G=", plan.mixpipe_gamma());
  }
  if (plan.chunks() > 1) return absl::StrCat("v=", plan.chunks());
  return "";
}

}  // namespace

std::string DescribeSchemeOptions(const chimera::v1::Plan& plan) {
  std::string options = DescribeKnobs(plan);
  if (!plan.replication().empty()) {
    absl::StrAppend(&options, options.empty() ? "" : " ",
                    "replication=", plan.replication());
  }
  if (plan.sharding().empty() || plan.sharding() == "none") return options;
  return absl::StrCat(options, options.empty() ? "" : " ",
                      "sharding=", plan.sharding());
}

std::string DescribePlan(const chimera::v1::Plan& plan) {
  std::string text = absl::StrCat(plan.scheme(), " W=", plan.width(), " D=",
                                  plan.depth(), " B=", plan.micro_batch_size(),
                                  " N=", plan.micro_batches());
  const std::string options = DescribeSchemeOptions(plan);
  if (!options.empty()) absl::StrAppend(&text, " ", options);
  if (plan.recompute()) absl::StrAppend(&text, " recompute");
  return text;
}

namespace {

// Where CPU workers share their nodes' cores, the simulated ranks get their
// share of them (the replicas left out of the simulation use the rest), and
// slow each other down as the device says; each pays the host's wake-up
// and posting costs.
void ShareNodes(const chimera::v1::DeviceSpec& device, SimulationInputs& inputs) {
  inputs.costs.wake_up = device.wake_up_seconds();
  inputs.costs.message_post = device.message_post_seconds();
  inputs.costs.message_receive = device.message_receive_seconds();
  const int cores_per_node = device.cores_per_node();
  if (cores_per_node <= 0 && device.co_running_slowdown() <= 0) return;
  const int simulated = static_cast<int>(inputs.program.workers.size());
  std::map<int, int> all_ranks, simulated_ranks;
  for (size_t rank = 0; rank < inputs.slots.size(); ++rank) {
    ++all_ranks[inputs.slots[rank].node];
    if (static_cast<int>(rank) < simulated) ++simulated_ranks[inputs.slots[rank].node];
  }
  int cores = cores_per_node;
  if (cores_per_node > 0) {
    for (const auto& [node, ranks] : simulated_ranks) {
      cores = std::min(cores, std::max(1, cores_per_node * ranks / all_ranks[node]));
    }
  }
  schedule::CostModel& costs = inputs.costs;
  costs.cores_per_node = cores;
  costs.co_running_slowdown = device.co_running_slowdown();
  for (int rank = 0; rank < simulated; ++rank) {
    costs.node_of_rank.push_back(inputs.slots[rank].node);
  }
}

}  // namespace

absl::StatusOr<SimulationInputs> PrepareSimulation(const PlanningContext& context,
                                                   const Candidate& candidate) {
  const schedule::ScheduleParams& params = candidate.params;
  const int width = params.width;
  const int depth = params.depth;
  const int b = candidate.micro_batch_size;
  // With replicated stages every op runs on a slice of a micro-batch.
  absl::StatusOr<int> slice = schedule::SliceSize(b, params.replication);
  if (!slice.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch size ", slice.status().message()));
  }
  const chimera::v1::ClusterSpec& cluster = context.cluster;
  SimulationInputs inputs;

  // Layers of every model stage, and what each costs at this B.
  const int model_stages = schedule::ModelStageCount(params);
  if (!candidate.partition.empty() &&
      candidate.partition.size() != static_cast<size_t>(model_stages)) {
    return absl::InvalidArgumentError(
        absl::StrCat("the partition has ", candidate.partition.size(),
                     " stages; the plan has ", model_stages));
  }
  inputs.partition =
      !candidate.partition.empty() ? candidate.partition
      : context.partitions != nullptr
          ? context.partitions->Get(model_stages, b, params.micro_batches,
                                    params.replication)
          : BalancedPartition(context.profile, model_stages, b,
                              params.micro_batches, params.replication);
  for (int s = 0; s < model_stages; ++s) {
    inputs.stages.push_back(ProfileStage(context.profile, inputs.partition[s],
                                         s == 0, s + 1 == model_stages,
                                         *slice));
  }
  ASSIGN_OR_RETURN(
      inputs.slots,
      PlaceRanks(cluster, width, depth, IsBidirectional(params.scheme),
                 candidate.placement, params.replication));
  ASSIGN_OR_RETURN(inputs.program, GenerateSimulated(params, context.full_width));

  schedule::CostModel& costs = inputs.costs;
  for (const StageProfile& stage : inputs.stages) {
    costs.stage_forward.push_back(stage.forward_seconds);
    costs.stage_backward.push_back(stage.backward_seconds);
    costs.stage_backward_input.push_back(stage.backward_input_seconds);
    costs.stage_backward_weight.push_back(stage.backward_weight_seconds);
    costs.activation_bytes = std::max<double>(costs.activation_bytes, stage.boundary_bytes);
  }
  costs.p2p_time = [slots = inputs.slots, intra = cluster.links().intra_node(),
                    inter = cluster.links().inter_node()](int from, int to,
                                                          double bytes) {
    const chimera::v1::LinkSpec& link = slots[from].node == slots[to].node ? intra : inter;
    return link.latency_seconds() + bytes / link.bandwidth_bytes_per_second();
  };
  const std::vector<StageGroup> groups = StageGroups(context, inputs, params);
  costs.stage_allreduce =
      StageAllreduceSeconds(context, inputs, candidate, groups);
  SetShardedStepCosts(inputs, params, groups, costs);
  for (const StageGroup& group : groups) {
    inputs.group_sizes.push_back(group.size);
  }
  ShareNodes(cluster.device(), inputs);
  return inputs;
}

absl::StatusOr<Evaluation> EvaluateCandidate(const PlanningContext& context,
                                             const Candidate& candidate) {
  const schedule::ScheduleParams& params = candidate.params;
  const int b = candidate.micro_batch_size;
  ASSIGN_OR_RETURN(SimulationInputs inputs, PrepareSimulation(context, candidate));
  ASSIGN_OR_RETURN(schedule::SimulationResult result,
                   schedule::SimulateStep(inputs.program, inputs.costs));

  Evaluation evaluation;
  chimera::v1::Plan& plan = evaluation.plan;
  schedule::SetScheduleParams(candidate.params, candidate.micro_batch_size, &plan);
  DescribeLayout(inputs, plan);
  const ReplicaUsage usage = MeasureReplica(context, params, inputs, result);

  const double global_batch =
      static_cast<double>(params.width) * b * params.micro_batches;
  chimera::v1::Prediction* prediction = plan.mutable_prediction();
  prediction->set_iteration_seconds(result.makespan);
  prediction->set_samples_per_second(global_batch / result.makespan);
  prediction->set_bubble_ratio(result.bubble_ratio);
  prediction->set_peak_memory_bytes_max(usage.peak_max);
  prediction->set_peak_memory_bytes_min(usage.peak_min);
  prediction->set_exposed_allreduce_seconds(result.exposed_allreduce);
  // Replicas beyond the simulated ones run as the last simulated one.
  const int per_pipeline = inputs.program.topology.WorkersPerPipeline();
  const int simulated_replicas =
      static_cast<int>(result.workers.size()) / per_pipeline;
  for (int rank = 0; rank < params.width * per_pipeline; ++rank) {
    const int replica = std::min(rank / per_pipeline, simulated_replicas - 1);
    prediction->add_rank_bubble_ratios(
        result.workers[replica * per_pipeline + rank % per_pipeline]
            .bubble_ratio);
  }
  evaluation.fits = usage.peak_max <= context.cluster.device().memory_bytes();
  evaluation.compute_seconds_per_sample =
      usage.max_compute / (b * params.micro_batches);
  evaluation.recompute_seconds = usage.recompute / per_pipeline;
  evaluation.update_seconds = usage.max_update;
  return evaluation;
}

}  // namespace chimera::planner
