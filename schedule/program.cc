#include "schedule/program.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera::schedule {
namespace {

// In enum order (AllOpKinds).
constexpr std::array<std::pair<OpKind, absl::string_view>, 17> kOpNames = {{
    {OpKind::kForward, "FORWARD"},
    {OpKind::kBackward, "BACKWARD"},
    {OpKind::kSendAct, "SEND_ACT"},
    {OpKind::kRecvAct, "RECV_ACT"},
    {OpKind::kSendGrad, "SEND_GRAD"},
    {OpKind::kRecvGrad, "RECV_GRAD"},
    {OpKind::kAllreduceBegin, "ALLREDUCE_BEGIN"},
    {OpKind::kAllreduceEnd, "ALLREDUCE_END"},
    {OpKind::kOptimizerStep, "OPTIMIZER_STEP"},
    {OpKind::kBackwardInput, "BACKWARD_INPUT"},
    {OpKind::kBackwardWeight, "BACKWARD_WEIGHT"},
    {OpKind::kReduceScatterBegin, "REDUCE_SCATTER_BEGIN"},
    {OpKind::kReduceScatterEnd, "REDUCE_SCATTER_END"},
    {OpKind::kShardStep, "SHARD_STEP"},
    {OpKind::kAllGatherBegin, "ALLGATHER_BEGIN"},
    {OpKind::kAllGatherEnd, "ALLGATHER_END"},
    {OpKind::kReleaseParams, "RELEASE_PARAMS"},
}};

// Each collective's BEGIN and END ops and its name, in Collective order.
struct CollectiveOps {
  Collective collective;
  OpKind begin;
  OpKind end;
  absl::string_view name;
};
constexpr std::array<CollectiveOps, kNumCollectives> kCollectives = {{
    {Collective::kAllreduce, OpKind::kAllreduceBegin, OpKind::kAllreduceEnd,
     "allreduce"},
    {Collective::kReduceScatter, OpKind::kReduceScatterBegin,
     OpKind::kReduceScatterEnd, "reduce-scatter"},
    {Collective::kAllGather, OpKind::kAllGatherBegin, OpKind::kAllGatherEnd,
     "all-gather"},
}};

}  // namespace

std::vector<OpKind> AllOpKinds() {
  std::vector<OpKind> kinds;
  for (const auto& entry : kOpNames) kinds.push_back(entry.first);
  return kinds;
}

std::string OpName(OpKind op) {
  for (const auto& [kind, name] : kOpNames) {
    if (kind == op) return std::string(name);
  }
  return "UNKNOWN";
}

absl::StatusOr<OpKind> ParseOpName(absl::string_view name) {
  for (const auto& [kind, op_name] : kOpNames) {
    if (op_name == name) return kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "op '", name, "' is not one of ",
      absl::StrJoin(kOpNames, ", ", [](std::string* out, const auto& entry) {
        out->append(entry.second.data(), entry.second.size());
      })));
}

bool IsCompute(OpKind op) { return op == OpKind::kForward || IsBackward(op); }

bool IsSend(OpKind op) {
  return op == OpKind::kSendAct || op == OpKind::kSendGrad;
}

bool IsPointToPoint(OpKind op) {
  return IsSend(op) || op == OpKind::kRecvAct || op == OpKind::kRecvGrad;
}

bool WaitsForPeer(OpKind op) {
  return op == OpKind::kRecvAct || op == OpKind::kRecvGrad ||
         EndsCollective(op);
}

bool UpdatesWeights(OpKind op) {
  return op == OpKind::kOptimizerStep || op == OpKind::kShardStep;
}

bool ActsOnWholeStage(OpKind op) {
  return CollectiveOf(op) || op == OpKind::kShardStep ||
         op == OpKind::kReleaseParams;
}

std::optional<Collective> CollectiveOf(OpKind op) {
  for (const CollectiveOps& ops : kCollectives) {
    if (op == ops.begin || op == ops.end) return ops.collective;
  }
  return std::nullopt;
}

bool BeginsCollective(OpKind op) {
  const std::optional<Collective> collective = CollectiveOf(op);
  return collective && op == BeginOf(*collective);
}

bool EndsCollective(OpKind op) {
  const std::optional<Collective> collective = CollectiveOf(op);
  return collective && op == EndOf(*collective);
}

OpKind BeginOf(Collective collective) {
  return kCollectives[static_cast<int>(collective)].begin;
}

OpKind EndOf(Collective collective) {
  return kCollectives[static_cast<int>(collective)].end;
}

std::string CollectiveName(Collective collective) {
  return std::string(kCollectives[static_cast<int>(collective)].name);
}

bool IsBackward(OpKind op) {
  return op == OpKind::kBackward || op == OpKind::kBackwardInput ||
         op == OpKind::kBackwardWeight;
}

char ComputeLetter(OpKind op) {
  switch (op) {
    case OpKind::kForward:
      return 'F';
    case OpKind::kBackwardInput:
      return 'I';
    case OpKind::kBackwardWeight:
      return 'W';
    default:
      return 'B';
  }
}

bool ComputesInputGradient(OpKind op) {
  return op == OpKind::kBackward || op == OpKind::kBackwardInput;
}

bool ComputesWeightGradient(OpKind op) {
  return op == OpKind::kBackward || op == OpKind::kBackwardWeight;
}

bool Instruction::operator==(const Instruction& other) const {
  return op == other.op && chunk == other.chunk && stage == other.stage &&
         micro_batches == other.micro_batches && peer == other.peer &&
         part == other.part && num_parts == other.num_parts &&
         recompute == other.recompute;
}

std::string DescribeInstruction(const Instruction& inst) {
  std::string out = absl::StrCat(OpName(inst.op), " chunk=", inst.chunk,
                                 " stage=", inst.stage);
  if (!inst.micro_batches.empty()) {
    absl::StrAppend(&out, " mb=", absl::StrJoin(inst.micro_batches, "+"));
  }
  if (inst.num_parts > 1) {
    absl::StrAppend(&out, " part=", inst.part, "/", inst.num_parts);
  }
  if (inst.peer >= 0) absl::StrAppend(&out, " peer=", inst.peer);
  if (inst.recompute) absl::StrAppend(&out, " recompute");
  return out;
}

std::string ChunkLayoutName(ChunkLayout layout) {
  return layout == ChunkLayout::kReplicas ? "replicas" : "chained";
}

std::string UpdateRuleName(UpdateRule rule) {
  switch (rule) {
    case UpdateRule::kSynchronous:
      return "synchronous";
    case UpdateRule::kDoubleBuffered:
      return "double-buffered";
    case UpdateRule::kStashed:
      return "stashed";
  }
  return "unknown";
}

absl::StatusOr<UpdateRule> ParseUpdateRule(absl::string_view name) {
  for (UpdateRule rule : {UpdateRule::kSynchronous, UpdateRule::kDoubleBuffered,
                          UpdateRule::kStashed}) {
    if (name == UpdateRuleName(rule)) return rule;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("update rule '", name,
                   "' is not one of synchronous, double-buffered, stashed"));
}

absl::StatusOr<ChunkLayout> ParseChunkLayout(absl::string_view name) {
  if (name == "replicas") return ChunkLayout::kReplicas;
  if (name == "chained") return ChunkLayout::kChained;
  return absl::InvalidArgumentError(absl::StrCat(
      "chunk layout '", name, "' is not one of replicas, chained"));
}

bool Topology::UpdatesAfter(int mb) const {
  const int per_step = MicroBatchesPerStep();
  return update_rule == UpdateRule::kStashed ||
         (update_rule == UpdateRule::kDoubleBuffered &&
          mb % per_step == per_step - 1);
}

std::optional<StageRef> Topology::Next(StageRef ref) const {
  if (ref.stage + 1 < depth) return StageRef{ref.chunk, ref.stage + 1};
  if (layout == ChunkLayout::kChained && ref.chunk + 1 < num_chunks) {
    return StageRef{ref.chunk + 1, 0};
  }
  return std::nullopt;
}

std::optional<StageRef> Topology::Prev(StageRef ref) const {
  if (ref.stage > 0) return StageRef{ref.chunk, ref.stage - 1};
  if (layout == ChunkLayout::kChained && ref.chunk > 0) {
    return StageRef{ref.chunk - 1, depth - 1};
  }
  return std::nullopt;
}

int Topology::ModelStage(StageRef ref) const {
  return layout == ChunkLayout::kReplicas ? ref.stage
                                          : ref.chunk * depth + ref.stage;
}

int Topology::NumModelStages() const {
  return layout == ChunkLayout::kReplicas ? depth : depth * num_chunks;
}

std::string ReplicationProblem(const std::vector<int>& replication, int depth) {
  if (replication.empty()) return "";
  if (static_cast<int>(replication.size()) != depth) {
    return absl::StrCat("names ", replication.size(),
                        " stages, but the pipeline has ", depth);
  }
  int64_t workers = 0;
  int64_t slices = 1;
  for (int replicas : replication) {
    if (replicas < 1) {
      return absl::StrCat("every stage needs at least one worker, not ",
                          replicas);
    }
    workers += replicas;
    slices = std::min<int64_t>(std::lcm<int64_t>(slices, replicas),
                               int64_t{kMaxScheduleSize} + 1);
  }
  if (workers > kMaxScheduleSize || slices > kMaxScheduleSize) {
    return absl::StrCat(
        "needs ", workers, " workers per pipeline and ", slices,
        " slices per micro-batch; each must be <= ", kMaxScheduleSize);
  }
  return "";
}

absl::Status CheckReplication(const Topology& topology) {
  if (topology.replication.empty()) return absl::OkStatus();
  const std::string replication = absl::StrJoin(topology.replication, ":");
  const std::string problem =
      ReplicationProblem(topology.replication, topology.depth);
  if (!problem.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology: replication ", replication, " ", problem));
  }
  if (topology.num_chunks != 1 || topology.Asynchronous()) {
    return absl::InvalidArgumentError(
        absl::StrCat("topology: replication ", replication,
                     " needs a synchronous pipeline of one chunk"));
  }
  if (topology.micro_batches % topology.SlicesPerMicroBatch() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "topology: replication ", replication, " cuts each micro-batch into ",
        topology.SlicesPerMicroBatch(), " slices, which must divide its ",
        topology.micro_batches, " micro-batches"));
  }
  return absl::OkStatus();
}

int WorkersPerPipeline(int depth, const std::vector<int>& replication) {
  if (replication.empty()) return depth;
  return std::accumulate(replication.begin(), replication.end(), 0);
}

int Topology::ReplicasOf(int position) const {
  return replication.empty() ? 1 : replication[position];
}

int SlicesPerMicroBatch(const std::vector<int>& replication) {
  int slices = 1;
  for (int replicas : replication) slices = std::lcm(slices, replicas);
  return slices;
}

int Topology::RankOf(int dp, int position, int replica) const {
  if (replication.empty()) return dp * depth + position + replica;
  int rank = dp * WorkersPerPipeline() + replica;
  for (int p = 0; p < position; ++p) rank += ReplicasOf(p);
  return rank;
}

int Topology::PositionOf(int rank) const {
  int offset = rank % WorkersPerPipeline();
  if (replication.empty()) return offset;
  int position = 0;
  while (offset >= replication[position]) offset -= replication[position++];
  return position;
}

int Topology::ReplicaIndexOf(int rank) const {
  if (replication.empty()) return 0;
  int offset = rank % WorkersPerPipeline();
  for (int replicas : replication) {
    if (offset < replicas) break;
    offset -= replicas;
  }
  return offset;
}

int Topology::SliceOwner(int position, int mb) const {
  const int slices = SlicesPerMicroBatch();
  return (mb % slices) / (slices / ReplicasOf(position));
}

}  // namespace chimera::schedule
