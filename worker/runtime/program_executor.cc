#include "worker/runtime/program_executor.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/step_unrolling.h"
#include "worker/comm/torch_error.h"
#include "worker/model/split_backward.h"
#include "worker/model/stage.h"
#include "worker/model/stage_factory.h"

namespace chimera::worker {
namespace {

using schedule::Instruction;
using schedule::OpKind;
using schedule::StageRef;

// Samples [begin, end) of part `part` of a micro-batch of `size` split in
// `parts`.
std::pair<int64_t, int64_t> SliceBounds(int64_t size, int parts, int part) {
  return {part * size / parts, (part + 1) * size / parts};
}

MicroBatch SliceMicroBatch(const MicroBatch& batch, int64_t begin,
                           int64_t end) {
  return {batch.inputs.slice(0, begin, end), batch.targets.slice(0, begin, end),
          batch.loss_mask.slice(0, begin, end)};
}

// The stages of `spec`'s model: a torchscript model's pieces are loaded
// once, beneath the data root, and divided among the stages held.
absl::StatusOr<StageFactory> StagesOf(const TaskSpec& spec) {
  if (spec.model.family != ModelFamily::kTorchscript) {
    return StageFactory::Transformer(spec.model, spec.seed, spec.device);
  }
  ASSIGN_OR_RETURN(const Directory modules, OpenModules(spec.modules));
  return StageFactory::Scripted(modules, spec.model, spec.device);
}

// Removes and returns `key` from `box`; INTERNAL naming `what` when absent.
absl::StatusOr<at::Tensor> TakeTensor(std::map<SliceKey, at::Tensor>& box,
                                      const SliceKey& key,
                                      absl::string_view what) {
  auto it = box.find(key);
  if (it == box.end()) {
    return absl::InternalError(absl::StrCat(
        "no ", what, " for ", DescribeSlice(key), ": its transfer is missing"));
  }
  at::Tensor tensor = std::move(it->second);
  box.erase(it);
  return tensor;
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

double ThreadCpuSeconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * now.tv_nsec;
}

// A receive that timed out names its sender first: the sender stopped, hung
// or was cut off; this rank only waited for it.
absl::Status BlameSender(absl::Status waited, int sender,
                         absl::Duration timeout) {
  if (!absl::IsDeadlineExceeded(waited)) return waited;
  return absl::DeadlineExceededError(absl::StrCat(
      "rank ", sender, " sent nothing within ", absl::FormatDuration(timeout),
      " (stopped, hung or cut off): ", waited.message()));
}

bool IsTransfer(OpKind op) {
  return schedule::IsPointToPoint(op) || schedule::CollectiveOf(op).has_value();
}

// `inst` with the micro-batches it acts on numbered within their own step:
// a repeating program's op on micro-batch j - N acts on the previous step's
// micro-batch j.
Instruction InStep(const Instruction& inst,
                   const schedule::Topology& topology) {
  Instruction local = inst;
  for (int& mb : local.micro_batches) {
    if (mb < 0) mb += topology.micro_batches;
  }
  return local;
}

// The samples of one mini-batch: W·N·B.
double MiniBatchSamples(const schedule::Topology& topology,
                        const TaskSpec& spec) {
  return static_cast<double>(topology.width) * topology.micro_batches *
         spec.micro_batch_size;
}

// What each micro-batch's loss is divided by: the samples of the batch one
// update learns from. Under PipeDream's rule that is one micro-batch of each
// of the W pipelines, whose gradients the update's allreduce sums.
double LossNormaliser(const schedule::Topology& topology,
                      const TaskSpec& spec) {
  return topology.update_rule == schedule::UpdateRule::kStashed
             ? static_cast<double>(topology.width) * spec.micro_batch_size
             : MiniBatchSamples(topology, spec);
}

SliceKey KeyOf(const Instruction& inst) {
  return {{inst.chunk, inst.stage}, inst.micro_batches[0], inst.part};
}

// The backward instructions of a program, in order: each slice gets one
// BACKWARD, or one BACKWARD_INPUT and after it one BACKWARD_WEIGHT.
class BackwardOrder {
 public:
  // Records `inst`; why it cannot come next, or empty when it can.
  std::string Add(const Instruction& inst) {
    const SliceKey key = KeyOf(inst);
    auto [it, first] = waiting_.emplace(key, std::nullopt);
    std::optional<Instruction>& input = it->second;
    if (inst.op != OpKind::kBackwardWeight) {
      if (!first) return "the backward of its slice already ran";
      if (inst.op == OpKind::kBackwardInput) input = inst;
      return "";
    }
    if (inst.recompute) {
      return "a BACKWARD_WEIGHT never recomputes: its BACKWARD_INPUT does";
    }
    if (!input) {
      return first ? "no BACKWARD_INPUT of its slice comes before it"
                   : "the backward of its slice already ran";
    }
    if (input->num_parts != inst.num_parts) {
      return absl::StrCat("splits the micro-batch in ", inst.num_parts,
                          " parts; its BACKWARD_INPUT in ", input->num_parts);
    }
    input.reset();
    return "";
  }

  // A BACKWARD_INPUT still waiting for its BACKWARD_WEIGHT, if any.
  std::optional<Instruction> Unfinished() const {
    for (const auto& [key, input] : waiting_) {
      if (input) return input;
    }
    return std::nullopt;
  }

 private:
  // Every slice seen, with its BACKWARD_INPUT while that waits.
  std::map<SliceKey, std::optional<Instruction>> waiting_;
};

// The spec's partition (contiguous by construction) cuts this model into
// the topology's model stages.
absl::Status CheckPartition(const TaskSpec& spec,
                            const schedule::Topology& topology) {
  if (spec.partition.stage_count() != topology.NumModelStages()) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition has ", spec.partition.stage_count(),
                     " stages; the schedule has ", topology.NumModelStages(),
                     " model stages"));
  }
  if (spec.partition.num_layers() != spec.model.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("partition ends at block ", spec.partition.num_layers(),
                     "; the model has ", spec.model.num_layers, " blocks"));
  }
  return absl::OkStatus();
}

// The weight whose copies on the model's first and last stage are summed
// apart (TiedEmbeddingSync) and stepped whole, when `stage` holds one;
// undefined otherwise (a model that ties nothing, or holds both ends).
at::Tensor SplitTiedWeight(const Stage& stage) {
  const at::Tensor tied = stage.tied_weight();
  if (!tied.defined() || (stage.is_first() && stage.is_last())) return {};
  return tied;
}

// Where a sharded stage's parameters are: the indices of those its flat
// buffer holds, in order, with their element counts, and of the split tied
// weight (SplitTiedWeight), which is stepped whole, if the stage has one.
struct ShardedLayout {
  std::vector<size_t> flat;
  std::vector<int64_t> numels;
  std::optional<size_t> tied;
};

ShardedLayout LayOut(const std::vector<NamedTensor>& parameters,
                     const at::Tensor& tied) {
  ShardedLayout layout;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (tied.defined() && parameters[i].second.is_same(tied)) {
      layout.tied = i;
    } else {
      layout.flat.push_back(i);
      layout.numels.push_back(parameters[i].second.numel());
    }
  }
  return layout;
}

// INVALID_ARGUMENT naming the parameter whose moment in `moments` (`what`,
// one per parameter or none) is defined but differs in shape or type.
absl::Status CheckMoments(int model_stage,
                          const std::vector<NamedTensor>& parameters,
                          const std::vector<at::Tensor>& moments,
                          absl::string_view what) {
  if (moments.size() != parameters.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model stage ", model_stage, " has ", parameters.size(),
                     " parameters; the state to import has ", moments.size(),
                     " ", what, " moments"));
  }
  for (size_t i = 0; i < moments.size(); ++i) {
    const auto& [name, parameter] = parameters[i];
    if (moments[i].defined() &&
        (moments[i].sizes() != parameter.sizes() ||
         moments[i].scalar_type() != parameter.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model stage ", model_stage, " parameter ", name, " is ",
          DescribeTensor(parameter), "; the state to import has its ", what,
          " moment ", DescribeTensor(moments[i])));
    }
  }
  return absl::OkStatus();
}

// The moments `moments` (one per parameter, each whole or undefined) of the
// parameters at `indices` hold in the shard `pieces` describe, as one flat
// tensor; undefined when the optimizer has none. INVALID_ARGUMENT when some
// of those parameters have moments and others not.
absl::StatusOr<at::Tensor> ShardOfMoments(
    const std::vector<at::Tensor>& moments, const std::vector<size_t>& indices,
    const std::vector<ShardPiece>& pieces,
    const std::vector<NamedTensor>& parameters, absl::string_view what) {
  std::vector<size_t> missing;
  for (size_t index : indices) {
    if (!moments[index].defined()) missing.push_back(index);
  }
  if (missing.size() == indices.size()) return at::Tensor();
  if (!missing.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the state to import has no ", what, " moment for parameter ",
        parameters[missing[0]].first, " but has one for others"));
  }
  std::vector<at::Tensor> cut;
  for (const ShardPiece& piece : pieces) {
    cut.push_back(moments[indices[piece.tensor]].reshape(-1).narrow(
        0, piece.offset, piece.size));
  }
  if (cut.empty()) return at::empty({0}, moments[indices[0]].options());
  return at::cat(cut);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProgramExecutor>> ProgramExecutor::Create(
    const schedule::RankSchedule& schedule, const TaskSpec& spec,
    const DataSource& data, Communicator* comm) {
  const int world = schedule.outline.world_size();
  if (schedule.rank() < 0 || schedule.rank() >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", schedule.rank(), " is outside the schedule's ",
                     world, " workers"));
  }
  if (comm != nullptr && comm->world_size() != world) {
    return absl::InvalidArgumentError(
        absl::StrCat("the communicator has ", comm->world_size(),
                     " ranks; the schedule has ", world, " workers"));
  }
  if (spec.micro_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "micro-batch size is ", spec.micro_batch_size, "; it must be >= 1"));
  }
  RETURN_IF_ERROR(ValidateModelConfig(spec.model));
  RETURN_IF_ERROR(CheckDeviceUsable(spec.device));
  RETURN_IF_ERROR(CheckPartition(spec, schedule.topology()));
  RETURN_IF_ERROR(ValidateOptimizerConfig(spec.optimizer));
  if (data.options().sample_length != SampleLength(spec.model)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data samples hold ", data.options().sample_length, " tokens; a ",
        ModelFamilyName(spec.model.family), " model of sequence length ",
        spec.model.seq_length, " needs ", SampleLength(spec.model)));
  }
  std::unique_ptr<ProgramExecutor> executor(
      new ProgramExecutor(schedule, spec, data, comm));
  RETURN_IF_ERROR(executor->Build());
  return executor;
}

ProgramExecutor::ProgramExecutor(const schedule::RankSchedule& schedule,
                                 const TaskSpec& spec, const DataSource& data,
                                 Communicator* comm)
    : topology_(schedule.topology()),
      program_(schedule.program),
      rank_(schedule.rank()),
      spec_(spec),
      data_(data),
      comm_(comm),
      tags_(schedule.outline),
      loss_normaliser_(LossNormaliser(schedule.topology(), spec)),
      reported_loss_scale_(loss_normaliser_ /
                           MiniBatchSamples(schedule.topology(), spec)),
      memory_(spec.device),
      group_members_(StageGroupMemberships(schedule.outline, rank_)),
      tied_holders_(TiedEmbeddingHolders(schedule.outline).size()) {}

ProgramExecutor::~ProgramExecutor() = default;

absl::Status ProgramExecutor::Build() {
  ASSIGN_OR_RETURN(const StageFactory factory, StagesOf(spec_));
  for (const StageRef& ref : program_.stages) {
    if (ref.chunk < 0 || ref.chunk >= topology_.num_chunks || ref.stage < 0 ||
        ref.stage >= topology_.depth) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, " holds chunk ", ref.chunk, " stage ",
                       ref.stage, ", outside the topology"));
    }
    held_.insert(ref);
    const int model_stage = topology_.ModelStage(ref);
    if (stages_.count(model_stage) != 0) continue;
    ASSIGN_OR_RETURN(stages_[model_stage],
                     factory.Build(spec_.partition.stage(model_stage)));
    holds_last_stage_ |= stages_[model_stage]->is_last();
  }
  std::vector<at::Tensor> tied_copies;
  for (const auto& [model_stage, stage] : stages_) {
    const std::vector<at::Tensor> stage_parameters = stage->parameters();
    std::vector<at::Tensor> bucketed;
    const at::Tensor tied = SplitTiedWeight(*stage);
    const bool split_tie = tied.defined();
    for (const at::Tensor& parameter : stage_parameters) {
      if (split_tie && parameter.is_same(tied)) {
        tied_copies.push_back(tied);
      } else {
        bucketed.push_back(parameter);
      }
    }
    if (stage->token_table().defined() && !split_tie) {
      used_token_rows_ = NoRowsUsed(stage->token_table());
    }
    const auto group = group_members_.find(model_stage);
    const bool sharded = spec_.sharding != schedule::Sharding::kNone &&
                         group != group_members_.end();
    const bool scattered =
        sharded && spec_.sharding != schedule::Sharding::kOptimizer;
    gradient_buckets_.emplace(
        model_stage,
        GradientBucket(bucketed, scattered ? GradientBucket::Lifetime::kStep
                                           : GradientBucket::Lifetime::kRun));
    if (!sharded) {
      optimizers_[model_stage] =
          std::make_unique<Optimizer>(spec_.optimizer, stage_parameters);
      continue;
    }
    sharded_optimizers_[model_stage] = std::make_unique<ShardedOptimizer>(
        spec_.optimizer, FlattenParameters(bucketed), group->second, *comm_,
        GradientGroupName(model_stage),
        spec_.sharding == schedule::Sharding::kFull
            ? ShardedOptimizer::Residency::kShardBetweenUses
            : ShardedOptimizer::Residency::kWhole);
    optimizers_[model_stage] = std::make_unique<Optimizer>(
        spec_.optimizer,
        split_tie ? std::vector<at::Tensor>{tied} : std::vector<at::Tensor>{});
  }
  if (!tied_copies.empty()) {
    tied_sync_ = std::make_unique<TiedEmbeddingSync>(
        std::move(tied_copies), tied_holders_ > 1 ? comm_ : nullptr);
    const std::vector<size_t> complete =
        TiedGradientsComplete(program_, topology_);
    tied_gradients_complete_.insert(complete.begin(), complete.end());
  }
  RETURN_IF_ERROR(CheckAsynchronous());
  if (topology_.Asynchronous()) {
    std::map<int, std::vector<at::Tensor>> parameters;
    for (const auto& [model_stage, stage] : stages_) {
      parameters[model_stage] = stage->parameters();
    }
    asynchronous_weights_ = std::make_unique<AsynchronousWeights>(
        topology_.update_rule, parameters);
  }
  return CheckProgram();
}

absl::Status ProgramExecutor::CheckAsynchronous() const {
  if (!topology_.Asynchronous()) return absl::OkStatus();
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, ": the ",
        schedule::UpdateRuleName(topology_.update_rule), " update rule ", why));
  };
  if (!topology_.repeating)
    return refuse("runs a program of one repeating step");
  if (spec_.sharding != schedule::Sharding::kNone) {
    return refuse(absl::StrCat("runs unsharded, not with sharding ",
                               schedule::ShardingName(spec_.sharding)));
  }
  // Its stages run a micro-batch on different versions (the job validator
  // says why).
  if (topology_.update_rule == schedule::UpdateRule::kStashed &&
      tied_sync_ != nullptr) {
    return refuse("keeps no embedding tied across stages");
  }
  return absl::OkStatus();
}

absl::Status ProgramExecutor::CheckProgram() {
  BackwardOrder backwards;
  std::set<int> shard_steps;  // model stages
  for (const Instruction& raw : program_.instructions) {
    const Instruction inst = InStep(raw, topology_);
    const auto invalid = [&](absl::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank_, " instruction ",
                       DescribeInstruction(inst), ": ", why));
    };
    if (inst.op == OpKind::kOptimizerStep) continue;
    if (held_.count({inst.chunk, inst.stage}) == 0) {
      return invalid("this rank holds no such stage replica");
    }
    // The program comes over the wire: a bad peer or part must not reach
    // the transport or the tags.
    if (schedule::IsPointToPoint(inst.op) &&
        (inst.peer < 0 || inst.peer >= topology_.NumWorkers() ||
         inst.peer == rank_)) {
      return invalid("its peer is not another rank of the job");
    }
    if (inst.num_parts < 1 || inst.num_parts > tags_.max_parts() ||
        inst.part < 0 || inst.part >= inst.num_parts) {
      return invalid(absl::StrCat("its part is not one of at most ",
                                  tags_.max_parts(), " parts"));
    }
    if (IsTransfer(inst.op) && comm_ == nullptr) {
      return invalid("needs a communicator");
    }
    const std::optional<schedule::Collective> collective =
        schedule::CollectiveOf(inst.op);
    const bool releases = inst.op == OpKind::kReleaseParams;
    const bool shards = inst.op == OpKind::kShardStep || releases ||
                        collective == schedule::Collective::kReduceScatter ||
                        collective == schedule::Collective::kAllGather;
    const int model_stage = ModelStageOf(inst);
    if (shards && sharded_optimizers_.count(model_stage) == 0) {
      return invalid(
          absl::StrCat("this rank does not shard the stage (sharding: ",
                       schedule::ShardingName(spec_.sharding), ")"));
    }
    if (releases && !sharded_optimizers_.at(model_stage)->shard_only()) {
      return invalid(absl::StrCat(
          "only sharding full releases parameters (sharding: ",
          schedule::ShardingName(spec_.sharding), ")"));
    }
    if (inst.op == OpKind::kShardStep) shard_steps.insert(model_stage);
    if (shards || collective) continue;
    if (inst.micro_batches.empty()) return invalid("names no micro-batch");
    for (int mb : inst.micro_batches) {
      if (mb < 0 || mb >= topology_.micro_batches) {
        return invalid(absl::StrCat("micro-batch ", mb, " is outside [0, ",
                                    topology_.micro_batches, ")"));
      }
    }
    if (!schedule::IsBackward(inst.op)) continue;
    const std::string out_of_order = backwards.Add(inst);
    if (!out_of_order.empty()) return invalid(out_of_order);
    if (!schedule::ComputesInputGradient(inst.op)) continue;
    if (inst.num_parts > spec_.micro_batch_size) {
      return invalid(absl::StrCat("splits a micro-batch of ",
                                  spec_.micro_batch_size, " samples in ",
                                  inst.num_parts, " parts"));
    }
    backward_plans_[{{inst.chunk, inst.stage}, inst.micro_batches[0]}] = {
        inst.num_parts, inst.recompute};
  }
  if (const std::optional<Instruction> unfinished = backwards.Unfinished()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank_, " instruction ", DescribeInstruction(*unfinished),
        ": no BACKWARD_WEIGHT of its slice follows it"));
  }
  // Otherwise the stage's weights would never change.
  for (const auto& [model_stage, sharded] : sharded_optimizers_) {
    if (shard_steps.count(model_stage) == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "rank ", rank_, " shards model stage ", model_stage,
          " (sharding: ", schedule::ShardingName(spec_.sharding),
          ") but its program never steps the shard (no SHARD_STEP)"));
    }
  }
  return absl::OkStatus();
}

Stage& ProgramExecutor::StageOf(StageRef ref) {
  return *stages_.at(topology_.ModelStage(ref));
}

std::vector<std::pair<std::string, at::Tensor>>
ProgramExecutor::NamedParameters() const {
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (const auto& [model_stage, stage] : stages_) {
    for (const auto& item : stage->named_parameters()) {
      named.emplace_back(item.key(), item.value());
    }
  }
  return named;
}

std::vector<int> ProgramExecutor::model_stages() const {
  std::vector<int> held;
  for (const auto& [model_stage, stage] : stages_) held.push_back(model_stage);
  return held;
}

absl::StatusOr<std::vector<NamedTensor>> ProgramExecutor::StageParameters(
    int model_stage) const {
  auto it = stages_.find(model_stage);
  if (it == stages_.end()) {
    return absl::NotFoundError(absl::StrCat(
        "rank ", rank_, " holds no replica of model stage ", model_stage));
  }
  std::vector<NamedTensor> named;
  for (const auto& item : it->second->named_parameters()) {
    named.emplace_back(item.key(), item.value());
  }
  return named;
}

absl::StatusOr<StageState> ProgramExecutor::ExportStage(int model_stage) const {
  StageState state;
  ASSIGN_OR_RETURN(state.parameters, StageParameters(model_stage));
  if (sharded_optimizers_.count(model_stage) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank_, " holds a shard of model stage ", model_stage,
        "'s optimizer state; a stage's state is exported whole only"));
  }
  state.optimizer = optimizers_.at(model_stage)->state();
  return state;
}

absl::StatusOr<StagePart> ProgramExecutor::ExportPart(int model_stage) const {
  ASSIGN_OR_RETURN(std::vector<NamedTensor> parameters,
                   StageParameters(model_stage));
  const auto sharded = sharded_optimizers_.find(model_stage);
  if (sharded == sharded_optimizers_.end()) {
    const OptimizerState state = optimizers_.at(model_stage)->state();
    StagePart whole;
    whole.optimizer_steps = state.steps;
    for (size_t i = 0; i < parameters.size(); ++i) {
      whole.moments.push_back({parameters[i].first, std::nullopt,
                               state.first_moments[i],
                               state.second_moments[i]});
    }
    whole.parameters = std::move(parameters);
    return whole;
  }
  const ShardedLayout layout =
      LayOut(parameters, SplitTiedWeight(*stages_.at(model_stage)));
  const ShardedOptimizer& optimizer = *sharded->second;
  const OptimizerState shard = optimizer.state();
  const bool shard_only = optimizer.shard_only();
  StagePart part;
  part.part = group_members_.at(model_stage);
  part.optimizer_steps = shard.steps;
  for (const ShardPiece& piece :
       PiecesOfShard(layout.numels, optimizer.shard())) {
    const auto& [name, parameter] = parameters[layout.flat[piece.tensor]];
    const bool whole = piece.size == parameter.numel();
    const std::vector<int64_t> shape = parameter.sizes().vec();
    const auto cut = [&piece, whole, &shape](const at::Tensor& flat) {
      if (!flat.defined()) return at::Tensor();
      at::Tensor values = flat.narrow(0, piece.in_shard, piece.size);
      return whole ? values.view(shape) : values;
    };
    part.moments.push_back(
        {name, whole ? std::nullopt : std::optional<int64_t>(piece.offset),
         cut(shard.first_moments[0]), cut(shard.second_moments[0])});
    if (!shard_only) continue;
    // The parameters themselves may be released: the shard's own copy.
    const at::Tensor values = cut(optimizer.shard_parameters());
    if (whole) {
      part.parameters.emplace_back(name, values);
    } else {
      part.parameter_pieces.push_back({name, piece.offset, shape, values});
    }
  }
  if (part.part.member != 0) return part;
  if (layout.tied) {
    const OptimizerState state = optimizers_.at(model_stage)->state();
    part.moments.push_back({parameters[*layout.tied].first, std::nullopt,
                            state.first_moments[0], state.second_moments[0]});
    if (shard_only) part.parameters.push_back(parameters[*layout.tied]);
  }
  if (!shard_only) part.parameters = std::move(parameters);
  return part;
}

absl::Status ProgramExecutor::ImportStage(int model_stage,
                                          const StageState& state) {
  ASSIGN_OR_RETURN(const std::vector<NamedTensor> current,
                   StageParameters(model_stage));
  if (state.parameters.size() != current.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model stage ", model_stage, " has ", current.size(),
        " parameters; the state to import has ", state.parameters.size()));
  }
  for (size_t i = 0; i < current.size(); ++i) {
    const auto& [name, parameter] = current[i];
    const auto& [imported_name, imported] = state.parameters[i];
    if (imported_name != name || !imported.defined() ||
        imported.sizes() != parameter.sizes() ||
        imported.scalar_type() != parameter.scalar_type()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model stage ", model_stage, " parameter ", name, " is ",
          DescribeTensor(parameter), "; the state to import has ",
          imported_name, " ",
          imported.defined() ? DescribeTensor(imported) : "undefined"));
    }
  }
  RETURN_IF_ERROR(CheckMoments(model_stage, current,
                               state.optimizer.first_moments, "first"));
  RETURN_IF_ERROR(CheckMoments(model_stage, current,
                               state.optimizer.second_moments, "second"));
  const auto sharded = sharded_optimizers_.find(model_stage);
  if (sharded != sharded_optimizers_.end() && sharded->second->released()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model stage ", model_stage,
        " keeps only its shard of the parameters between steps (sharding "
        "full) once it has run a step; import before the first"));
  }
  // The optimizers check their part before anything is overwritten.
  if (sharded != sharded_optimizers_.end()) {
    RETURN_IF_ERROR(
        RestoreShardedOptimizer(model_stage, current, state.optimizer));
  } else {
    RETURN_IF_ERROR(optimizers_.at(model_stage)->Restore(state.optimizer));
  }
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < current.size(); ++i) {
    current[i].second.copy_(state.parameters[i].second);
  }
  if (sharded != sharded_optimizers_.end()) {
    sharded->second->TakeShardFromParameters();
  }
  return absl::OkStatus();
}

absl::Status ProgramExecutor::RestoreShardedOptimizer(
    int model_stage, const std::vector<NamedTensor>& parameters,
    const OptimizerState& state) {
  if (state.steps < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer state has ", state.steps, " steps; it must be >= 0"));
  }
  const ShardedLayout layout =
      LayOut(parameters, SplitTiedWeight(*stages_.at(model_stage)));
  OptimizerState tied_state;
  tied_state.steps = state.steps;
  if (layout.tied) {
    tied_state.first_moments.push_back(state.first_moments[*layout.tied]);
    tied_state.second_moments.push_back(state.second_moments[*layout.tied]);
  }
  ShardedOptimizer& sharded = *sharded_optimizers_.at(model_stage);
  const std::vector<ShardPiece> pieces =
      PiecesOfShard(layout.numels, sharded.shard());
  OptimizerState shard;
  shard.steps = state.steps;
  ASSIGN_OR_RETURN(shard.first_moments.emplace_back(),
                   ShardOfMoments(state.first_moments, layout.flat, pieces,
                                  parameters, "first"));
  ASSIGN_OR_RETURN(shard.second_moments.emplace_back(),
                   ShardOfMoments(state.second_moments, layout.flat, pieces,
                                  parameters, "second"));
  RETURN_IF_ERROR(sharded.Restore(shard));
  return optimizers_.at(model_stage)->Restore(tied_state);
}

void ProgramExecutor::DeferUpdatesUntil(std::shared_future<void> read) {
  pending_read_ = std::move(read);
}

void ProgramExecutor::WaitForPendingRead() {
  if (!pending_read_.valid()) return;
  pending_read_.wait();
  pending_read_ = {};
}

absl::StatusOr<StepMetrics> ProgramExecutor::RunStep(int64_t step) {
  return RunPass(step, Pass::kStep);
}

absl::Status ProgramExecutor::DrainPipeline(int64_t last_step) {
  if (!topology_.repeating || pipeline_empty_) return absl::OkStatus();
  // The ops on the previous step's micro-batches, as the step after the
  // last would run them.
  RETURN_IF_ERROR(RunPass(last_step + 1, Pass::kDrain).status());
  steps_begun_ = 0;
  if (asynchronous_weights_ == nullptr) return absl::OkStatus();
  return asynchronous_weights_->Restart();
}

bool ProgramExecutor::Skips(const Instruction& inst, Pass pass) const {
  if (!topology_.repeating) return false;
  const bool previous = schedule::ActsOnPreviousStep(inst);
  return pass == Pass::kDrain ? !previous : previous && pipeline_empty_;
}

AsynchronousWeights::MicroBatchId ProgramExecutor::MicroBatchOf(
    const Instruction& inst, int64_t run_step) const {
  const bool previous = schedule::ActsOnPreviousStep(inst);
  return {run_step - (previous ? 1 : 0),
          inst.micro_batches[0] + (previous ? topology_.micro_batches : 0)};
}

absl::Status ProgramExecutor::RunOp(const Instruction& inst, int64_t run_step,
                                    int64_t step, StepMetrics& metrics) {
  if (asynchronous_weights_ == nullptr || !schedule::IsCompute(inst.op)) {
    return Execute(InStep(inst, topology_), step, metrics);
  }
  const int model_stage = ModelStageOf(inst);
  const AsynchronousWeights::MicroBatchId id = MicroBatchOf(inst, run_step);
  RETURN_IF_ERROR(asynchronous_weights_->Use(model_stage, inst.op, id));
  RETURN_IF_ERROR(Execute(InStep(inst, topology_), step, metrics));
  asynchronous_weights_->Done(model_stage, inst.op, id);
  return absl::OkStatus();
}

absl::StatusOr<StepMetrics> ProgramExecutor::RunPass(int64_t step, Pass pass) {
  // Steps count from this executor's first; a drain acts as the step after
  // the last one begun.
  const int64_t run_step = pass == Pass::kStep ? steps_begun_++ : steps_begun_;
  // Until the first step a fully sharded stage is whole (built, or imported
  // into); every program starts it released.
  for (const auto& [model_stage, sharded] : sharded_optimizers_) {
    sharded->Release();
  }
  memory_.ResetPeak();
  if (asynchronous_weights_ != nullptr) asynchronous_weights_->ResetPeaks();
  peak_gradient_bytes_ = HeldGradientBytes();
  peak_gathered_bytes_ = 0;
  loss_sum_.reset();
  stash_.ResetPeak();
  StepMetrics metrics;
  metrics.step = step;
  metrics.op_seconds.reserve(program_.instructions.size());
  metrics.op_cpu_seconds.reserve(program_.instructions.size());
  metrics.op_start_seconds.reserve(program_.instructions.size());
  metrics.start_unix_seconds =
      std::chrono::duration<double>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  const auto step_start = std::chrono::steady_clock::now();
  for (size_t index = 0; index < program_.instructions.size(); ++index) {
    const Instruction& inst = program_.instructions[index];
    if (Skips(inst, pass)) {
      metrics.op_start_seconds.push_back(SecondsSince(step_start));
      metrics.op_seconds.push_back(0.0);
      metrics.op_cpu_seconds.push_back(0.0);
      continue;
    }
    if (position_ != nullptr) {
      position_->Enter(step, static_cast<int>(index));
    }
    if (schedule::UpdatesWeights(inst.op)) WaitForPendingRead();
    const auto op_start = std::chrono::steady_clock::now();
    const double op_cpu_start = ThreadCpuSeconds();
    absl::Status status;
    try {
      status = RunOp(inst, run_step, step, metrics);
      if (status.ok() && tied_gradients_complete_.count(index) != 0) {
        status = tied_sync_->Start();
      }
    } catch (const std::exception& e) {
      status = absl::InternalError(TorchErrorMessage(e));
    }
    if (!status.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat("rank ", rank_, " step ", step, " ",
                       DescribeInstruction(inst), ": ", status.message()));
    }
    const bool busy =
        schedule::IsCompute(inst.op) || schedule::UpdatesWeights(inst.op);
    // A GPU runs the op after it is queued: time it to its end.
    if (busy) SynchronizeDevice(spec_.device);
    const double seconds = SecondsSince(op_start);
    metrics.op_start_seconds.push_back(
        std::chrono::duration<double>(op_start - step_start).count());
    metrics.op_seconds.push_back(seconds);
    metrics.op_cpu_seconds.push_back(ThreadCpuSeconds() - op_cpu_start);
    metrics.seconds_by_op.Add(inst.op, seconds);
    if (busy) metrics.busy_seconds += seconds;
  }
  if (position_ != nullptr) {
    position_->Enter(step, static_cast<int>(program_.instructions.size()));
  }
  const absl::Status finished = FinishStep(pass);
  pipeline_empty_ = !topology_.repeating || pass == Pass::kDrain;
  if (!finished.ok()) {
    return absl::Status(finished.code(),
                        absl::StrCat("rank ", rank_, " step ", step,
                                     " at its end: ", finished.message()));
  }
  metrics.step_seconds = SecondsSince(step_start);
  metrics.bubble_seconds = metrics.step_seconds - metrics.busy_seconds;
  if (loss_sum_.defined()) {
    metrics.loss = loss_sum_.item<double>() * reported_loss_scale_;
  }
  metrics.memory_current_bytes = memory_.current_bytes();
  metrics.memory_peak_bytes = memory_.peak_bytes();
  metrics.memory_process_peak_bytes = memory_.process_peak_bytes();
  metrics.peak_stashed_slices = static_cast<int64_t>(stash_.peak());
  AccountStateMemory(metrics);
  return metrics;
}

namespace {

int64_t StateBytes(const OptimizerState& state) {
  int64_t bytes = 0;
  for (const auto* moments : {&state.first_moments, &state.second_moments}) {
    for (const at::Tensor& moment : *moments) {
      if (moment.defined()) bytes += static_cast<int64_t>(moment.nbytes());
    }
  }
  return bytes;
}

}  // namespace

void ProgramExecutor::AccountStateMemory(StepMetrics& metrics) const {
  for (const auto& [name, parameter] : NamedParameters()) {
    metrics.weights_bytes += static_cast<int64_t>(parameter.nbytes());
  }
  // A fully sharded stage holds its shard, and its whole parameters only
  // while gathered: the most of those held at once in the step.
  for (const auto& [model_stage, sharded] : sharded_optimizers_) {
    if (!sharded->shard_only()) continue;
    metrics.weights_bytes +=
        static_cast<int64_t>(sharded->shard_parameters().nbytes()) -
        sharded->parameter_bytes();
  }
  metrics.weights_bytes += peak_gathered_bytes_;
  // An asynchronous rule's weight versions beside the parameters.
  if (asynchronous_weights_ != nullptr) {
    metrics.weights_bytes += asynchronous_weights_->ExtraVersionBytes();
  }
  metrics.gradients_bytes = peak_gradient_bytes_;
  if (tied_sync_ != nullptr) {
    metrics.gradients_bytes += tied_sync_->gradient_bytes();
  }
  for (const auto& [model_stage, optimizer] : optimizers_) {
    metrics.optimizer_bytes += StateBytes(optimizer->state());
  }
  for (const auto& [model_stage, sharded] : sharded_optimizers_) {
    metrics.optimizer_bytes += StateBytes(sharded->state());
  }
  metrics.activations_bytes = std::max<int64_t>(
      0, metrics.memory_peak_bytes - metrics.weights_bytes -
             metrics.gradients_bytes - metrics.optimizer_bytes);
}

absl::Status ProgramExecutor::Execute(const Instruction& inst, int64_t step,
                                      StepMetrics& metrics) {
  switch (inst.op) {
    case OpKind::kForward:
      return Forward(inst, step, metrics);
    case OpKind::kBackward:
      return Backward(inst);
    case OpKind::kBackwardInput:
      return BackwardInput(inst);
    case OpKind::kBackwardWeight:
      return BackwardWeight(inst);
    case OpKind::kSendAct:
      return Send(inst, TransferKind::kActivation);
    case OpKind::kSendGrad:
      return Send(inst, TransferKind::kGradient);
    case OpKind::kRecvAct:
      return Receive(inst, TransferKind::kActivation, metrics);
    case OpKind::kRecvGrad:
      return Receive(inst, TransferKind::kGradient, metrics);
    case OpKind::kAllreduceBegin:
    case OpKind::kReduceScatterBegin:
      return BeginGradientSum(inst);
    case OpKind::kAllreduceEnd:
    case OpKind::kReduceScatterEnd:
      return EndGradientSum(inst, metrics);
    case OpKind::kShardStep: {
      const int model_stage = ModelStageOf(inst);
      sharded_optimizers_.at(model_stage)->Step(HoldGradients(model_stage));
      gradient_buckets_.at(model_stage).Reset();
      return absl::OkStatus();
    }
    case OpKind::kAllGatherBegin:
      return BeginGather(inst);
    case OpKind::kAllGatherEnd:
      return EndGather(inst, metrics);
    case OpKind::kReleaseParams:
      sharded_optimizers_.at(ModelStageOf(inst))->Release();
      return absl::OkStatus();
    case OpKind::kOptimizerStep:
      if (tied_sync_ != nullptr) {
        const auto wait_start = std::chrono::steady_clock::now();
        RETURN_IF_ERROR(tied_sync_->Finish(spec_.timeouts.collective));
        metrics.allreduce_wait_seconds += SecondsSince(wait_start);
      }
      for (auto& [model_stage, optimizer] : optimizers_) {
        if (asynchronous_weights_ == nullptr) {
          optimizer->Step();
        } else {
          asynchronous_weights_->Update(model_stage, *optimizer);
        }
      }
      if (used_token_rows_.defined()) used_token_rows_.zero_();
      return absl::OkStatus();
  }
  return absl::InternalError("unknown op");
}

absl::StatusOr<MicroBatch> ProgramExecutor::LoadMicroBatch(int64_t step,
                                                           int micro_batch) {
  const SampleRange samples =
      MicroBatchSamples(schedule::DpRank(topology_, rank_), micro_batch,
                        topology_.micro_batches, spec_.micro_batch_size);
  ASSIGN_OR_RETURN(at::Tensor tokens,
                   data_.Samples(step, samples.first, samples.count));
  ASSIGN_OR_RETURN(const MicroBatch batch,
                   MakeMicroBatch(spec_.model, tokens,
                                  SampleKey{spec_.seed, step, samples.first}));
  return OnDevice(batch, spec_.device);
}

absl::Status ProgramExecutor::Forward(const Instruction& inst, int64_t step,
                                      StepMetrics& metrics) {
  // Forward doubling: one micro-batch after the other (see the header).
  for (int mb : inst.micro_batches) {
    RETURN_IF_ERROR(
        ForwardMicroBatch({inst.chunk, inst.stage}, mb, step, metrics));
  }
  return absl::OkStatus();
}

absl::Status ProgramExecutor::ForwardMicroBatch(StageRef ref, int micro_batch,
                                                int64_t step,
                                                StepMetrics& metrics) {
  Stage& stage = StageOf(ref);
  const auto plan_it = backward_plans_.find({ref, micro_batch});
  if (plan_it == backward_plans_.end()) {
    return absl::InternalError(absl::StrCat(
        "micro-batch ", micro_batch, " has no backward on this replica"));
  }
  const BackwardPlan plan = plan_it->second;
  MicroBatch batch;
  if (stage.is_first() || stage.is_last()) {
    ASSIGN_OR_RETURN(batch, LoadMicroBatch(step, micro_batch));
  }
  ASSIGN_OR_RETURN(const at::Tensor input, ForwardInput(ref, micro_batch, batch));
  std::vector<at::Tensor> outputs;
  for (int part = 0; part < plan.num_parts; ++part) {
    const auto [begin, end] =
        SliceBounds(spec_.micro_batch_size, plan.num_parts, part);
    const at::Tensor slice = input.slice(0, begin, end);
    StashedForward stashed;
    at::Tensor output;
    MicroBatch targets;
    {
      // Without autograd when the backward recomputes: nothing to keep.
      at::AutoGradMode grad_mode(!plan.recompute);
      stashed.input = stage.is_first() || plan.recompute
                          ? slice
                          : slice.detach().requires_grad_(true);
      if (stage.is_last()) {
        targets = SliceMicroBatch(batch, begin, end);
        ASSIGN_OR_RETURN(output,
                         stage.Loss(stashed.input, targets, loss_normaliser_));
      } else {
        output = stage.Forward(stashed.input);
      }
    }
    if (stage.is_last()) {
      metrics.has_loss = true;
      const at::Tensor loss = output.detach().to(at::kDouble);
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + loss : loss;
      metrics.samples += end - begin;
      metrics.tokens += (end - begin) * spec_.model.seq_length;
      if (plan.recompute) stashed.targets = std::move(targets);
    } else {
      outputs.push_back(output.detach());
    }
    if (!plan.recompute) stashed.output = std::move(output);
    RETURN_IF_ERROR(stash_.Put({ref, micro_batch, part}, std::move(stashed)));
  }
  if (!stage.is_last()) HandOnActivation(ref, micro_batch, std::move(outputs));
  return absl::OkStatus();
}

absl::StatusOr<at::Tensor> ProgramExecutor::ForwardInput(StageRef ref,
                                                         int micro_batch,
                                                         const MicroBatch& batch) {
  if (StageOf(ref).is_first()) return batch.inputs;
  return TakeTensor(activations_in_, {ref, micro_batch, 0}, "input activation");
}

void ProgramExecutor::HandOnActivation(StageRef ref, int micro_batch,
                                       std::vector<at::Tensor> parts) {
  at::Tensor activation = parts.size() == 1 ? parts[0] : at::cat(parts, 0);
  const StageRef next = *topology_.Next(ref);
  if (held_.count(next) != 0) {
    activations_in_[{next, micro_batch, 0}] = std::move(activation);
  } else {
    activations_out_[{ref, micro_batch, 0}] = std::move(activation);
  }
}

absl::StatusOr<ProgramExecutor::BackwardGraph> ProgramExecutor::PrepareBackward(
    const Instruction& inst, StashedForward stashed) {
  const SliceKey key = KeyOf(inst);
  Stage& stage = StageOf(key.ref);
  BackwardGraph graph{std::move(stashed.input), std::move(stashed.output), {}};
  if (inst.recompute) {
    if (!stage.is_first()) {
      graph.input = graph.input.detach().requires_grad_(true);
    }
    if (stage.is_last()) {
      ASSIGN_OR_RETURN(graph.end, stage.Loss(graph.input, stashed.targets,
                                             loss_normaliser_));
    } else {
      graph.end = stage.Forward(graph.input);
    }
  }
  if (!stage.is_last()) {
    ASSIGN_OR_RETURN(graph.end_gradient,
                     TakeTensor(gradients_in_, key, "output gradient"));
  }
  return graph;
}

void ProgramExecutor::RouteInputGradient(const SliceKey& key,
                                         at::Tensor gradient) {
  const StageRef prev = *topology_.Prev(key.ref);
  if (held_.count(prev) != 0) {
    gradients_in_[{prev, key.micro_batch, key.part}] = std::move(gradient);
  } else {
    gradients_out_[key] = std::move(gradient);
  }
}

absl::Status ProgramExecutor::Backward(const Instruction& inst) {
  HoldGradients(ModelStageOf(inst));
  const SliceKey key = KeyOf(inst);
  ASSIGN_OR_RETURN(StashedForward stashed, stash_.Take(key));
  MarkBackpropagatedTokens(key.ref, stashed);
  ASSIGN_OR_RETURN(const BackwardGraph graph,
                   PrepareBackward(inst, std::move(stashed)));
  // An undefined gradient backpropagates the last stage's loss from 1.
  graph.end.backward(graph.end_gradient);
  if (!StageOf(key.ref).is_first()) RouteInputGradient(key, graph.input.grad());
  return absl::OkStatus();
}

absl::Status ProgramExecutor::BackwardInput(const Instruction& inst) {
  const SliceKey key = KeyOf(inst);
  // The entry stays stashed, and counted, until the BACKWARD_WEIGHT: it then
  // holds the weight roots and the activations they saved.
  ASSIGN_OR_RETURN(StashedForward * stashed, stash_.Find(key));
  MarkBackpropagatedTokens(key.ref, *stashed);
  ASSIGN_OR_RETURN(const BackwardGraph graph,
                   PrepareBackward(inst, std::move(*stashed)));
  *stashed = {};
  SplitGradient split =
      ComputeInputGradient(graph.end, graph.end_gradient, graph.input);
  stashed->weight_roots = std::move(split.weight_roots);
  if (!StageOf(key.ref).is_first()) {
    RouteInputGradient(key, std::move(split.input_gradient));
  }
  return absl::OkStatus();
}

void ProgramExecutor::MarkBackpropagatedTokens(StageRef ref,
                                               const StashedForward& stashed) {
  if (used_token_rows_.defined() && StageOf(ref).is_first()) {
    MarkUsedRows(used_token_rows_, stashed.input);
  }
}

absl::Status ProgramExecutor::BackwardWeight(const Instruction& inst) {
  HoldGradients(ModelStageOf(inst));
  ASSIGN_OR_RETURN(StashedForward stashed, stash_.Take(KeyOf(inst)));
  if (!stashed.weight_roots) {
    return absl::InternalError("its BACKWARD_INPUT has not run");
  }
  ComputeWeightGradients(std::move(*stashed.weight_roots));
  return absl::OkStatus();
}

absl::Status ProgramExecutor::Send(const Instruction& inst, TransferKind kind) {
  const StageRef ref{inst.chunk, inst.stage};
  for (int mb : inst.micro_batches) {
    const SliceKey key{ref, mb, inst.part};
    at::Tensor tensor;
    StageRef producer = ref;
    if (kind == TransferKind::kActivation) {
      ASSIGN_OR_RETURN(tensor,
                       TakeTensor(activations_out_, key, "output activation"));
    } else {
      ASSIGN_OR_RETURN(tensor,
                       TakeTensor(gradients_out_, key, "input gradient"));
      producer = *topology_.Prev(ref);
    }
    ASSIGN_OR_RETURN(sends_.emplace_back(),
                     comm_->Send(tensor.contiguous(), inst.peer,
                                 tags_.Of(kind, producer, mb, inst.part)));
  }
  return absl::OkStatus();
}

absl::Status ProgramExecutor::Receive(const Instruction& inst,
                                      TransferKind kind, StepMetrics& metrics) {
  const StageRef ref{inst.chunk, inst.stage};
  const bool activation = kind == TransferKind::kActivation;
  const std::optional<StageRef> producer =
      activation ? topology_.Prev(ref) : std::optional<StageRef>(ref);
  if (!producer || (!activation && !topology_.Next(ref))) {
    return absl::InvalidArgumentError("no stage to receive from");
  }
  const auto [begin, end] =
      SliceBounds(spec_.micro_batch_size, inst.num_parts, inst.part);
  for (int mb : inst.micro_batches) {
    at::Tensor buffer = at::empty(
        {end - begin, spec_.model.seq_length, spec_.model.hidden_size},
        at::TensorOptions(spec_.model.dtype).device(spec_.device));
    ASSIGN_OR_RETURN(std::unique_ptr<PendingOp> op,
                     comm_->Recv(buffer, inst.peer,
                                 tags_.Of(kind, *producer, mb, inst.part)));
    const auto wait_start = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(BlameSender(op->Wait(spec_.timeouts.transfer), inst.peer,
                                spec_.timeouts.transfer));
    metrics.recv_wait_seconds += SecondsSince(wait_start);
    (activation ? activations_in_ : gradients_in_)[{ref, mb, inst.part}] =
        std::move(buffer);
  }
  return absl::OkStatus();
}

int ProgramExecutor::ModelStageOf(const Instruction& inst) const {
  return topology_.ModelStage({inst.chunk, inst.stage});
}

const at::Tensor& ProgramExecutor::HoldGradients(int model_stage) {
  GradientBucket& bucket = gradient_buckets_.at(model_stage);
  const bool newly_held = !bucket.held();
  const at::Tensor& buffer = bucket.Hold();
  if (newly_held) {
    peak_gradient_bytes_ = std::max(peak_gradient_bytes_, HeldGradientBytes());
  }
  return buffer;
}

int64_t ProgramExecutor::HeldGradientBytes() const {
  int64_t held = 0;
  for (const auto& [model_stage, bucket] : gradient_buckets_) {
    if (bucket.held()) held += bucket.bytes();
  }
  return held;
}

absl::Status ProgramExecutor::BeginGradientSum(const Instruction& inst) {
  const int model_stage = ModelStageOf(inst);
  if (gradient_sums_.count(model_stage) != 0) {
    return absl::InternalError(
        "this stage's gradient sum is already in flight");
  }
  const std::string group = GradientGroupName(model_stage);
  const at::Tensor& bucket = HoldGradients(model_stage);
  if (inst.op == OpKind::kReduceScatterBegin) {
    ASSIGN_OR_RETURN(gradient_sums_[model_stage],
                     GradientAllReduce::StartShardSum(*comm_, group, bucket));
    return absl::OkStatus();
  }
  const Stage& stage = *stages_.at(model_stage);
  std::optional<RowSparseGradient> row_sparse;
  if (stage.is_first() && used_token_rows_.defined()) {
    row_sparse =
        RowSparseGradient{stage.token_table().grad(), used_token_rows_};
  }
  ASSIGN_OR_RETURN(
      gradient_sums_[model_stage],
      GradientAllReduce::Start(*comm_, group, bucket, std::move(row_sparse)));
  return absl::OkStatus();
}

absl::Status ProgramExecutor::EndGradientSum(const Instruction& inst,
                                             StepMetrics& metrics) {
  auto it = gradient_sums_.find(ModelStageOf(inst));
  if (it == gradient_sums_.end()) {
    return absl::InternalError("no gradient sum of this stage was begun");
  }
  const auto wait_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(it->second->Finish(spec_.timeouts.collective));
  metrics.allreduce_wait_seconds += SecondsSince(wait_start);
  gradient_sums_.erase(it);
  return absl::OkStatus();
}

absl::Status ProgramExecutor::BeginGather(const Instruction& inst) {
  const int model_stage = ModelStageOf(inst);
  if (gathers_.count(model_stage) != 0) {
    return absl::InternalError("this stage's all-gather is already in flight");
  }
  ASSIGN_OR_RETURN(gathers_[model_stage],
                   sharded_optimizers_.at(model_stage)->StartGather());
  peak_gathered_bytes_ = std::max(peak_gathered_bytes_, GatheredBytes());
  return absl::OkStatus();
}

int64_t ProgramExecutor::GatheredBytes() const {
  int64_t bytes = 0;
  for (const auto& [model_stage, sharded] : sharded_optimizers_) {
    if (sharded->shard_only() && !sharded->released()) {
      bytes += sharded->parameter_bytes();
    }
  }
  return bytes;
}

absl::Status ProgramExecutor::GatherReleasedParameters() {
  std::vector<std::unique_ptr<PendingOp>> gathers;
  for (const auto& [model_stage, sharded] : sharded_optimizers_) {
    if (!sharded->released()) continue;
    ASSIGN_OR_RETURN(gathers.emplace_back(), sharded->StartGather());
  }
  for (const std::unique_ptr<PendingOp>& gather : gathers) {
    RETURN_IF_ERROR(gather->Wait(spec_.timeouts.collective));
  }
  return absl::OkStatus();
}

absl::Status ProgramExecutor::EndGather(const Instruction& inst,
                                        StepMetrics& metrics) {
  auto it = gathers_.find(ModelStageOf(inst));
  if (it == gathers_.end()) {
    return absl::InternalError("no all-gather of this stage was begun");
  }
  const auto wait_start = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(it->second->Wait(spec_.timeouts.collective));
  metrics.allreduce_wait_seconds += SecondsSince(wait_start);
  gathers_.erase(it);
  return absl::OkStatus();
}

absl::Status ProgramExecutor::FinishStep(Pass pass) {
  // A repeating step's last sends may be received in the receiver's next
  // step, which it may begin only after this one ends (a caller's summary
  // of every rank's step waits for all): they are waited for a step later,
  // when the receiver must have taken them, or at the drain.
  for (const auto& send : carried_sends_) {
    RETURN_IF_ERROR(send->Wait(spec_.timeouts.transfer));
  }
  carried_sends_.clear();
  const bool carries_sends = topology_.repeating && pass == Pass::kStep;
  for (auto& send : sends_) {
    if (carries_sends) {
      carried_sends_.push_back(std::move(send));
    } else {
      RETURN_IF_ERROR(send->Wait(spec_.timeouts.transfer));
    }
  }
  sends_.clear();
  const auto leftover = [](absl::string_view what, size_t count) {
    return absl::InternalError(
        absl::StrCat(count, " ", what,
                     " left over: the program is not a complete iteration"));
  };
  const bool carries_stash = topology_.repeating && pass == Pass::kStep;
  if (stash_.size() != 0 && !carries_stash) {
    return leftover("stashed forwards", stash_.size());
  }
  if (!activations_in_.empty() || !activations_out_.empty()) {
    return leftover("activations",
                    activations_in_.size() + activations_out_.size());
  }
  if (!gradients_in_.empty() || !gradients_out_.empty()) {
    return leftover("gradients", gradients_in_.size() + gradients_out_.size());
  }
  if (!gradient_sums_.empty()) {
    return leftover("gradient sums in flight", gradient_sums_.size());
  }
  if (!gathers_.empty())
    return leftover("all-gathers in flight", gathers_.size());
  if (tied_sync_ != nullptr && tied_sync_->in_flight()) {
    return leftover("tied embedding gradient sums in flight", 1);
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
