// The schedule engine's instruction IR: one ordered list of instructions per
// worker, plus the model topology the instructions refer to. It mirrors
// chimera.v1.WorkerProgram (program_proto.h converts) but is plain C++ so the
// generators, validator and simulator stay fast on 10^5-instruction sets.
//
//   Schedule schedule = ...;  // from GenerateSchedule() or ReadScheduleCsv()
//   for (const WorkerProgram& worker : schedule.workers)
//     for (const Instruction& inst : worker.instructions)
//       CHIMERA_LOG(INFO) << worker.rank << ": " << DescribeInstruction(inst);
//
// Ranks: rank = dp_rank * depth + position, position 0..depth-1; with
// replicated stages (Topology::replication) each data-parallel replica's
// ranks run position by position, replica by replica (Topology::RankOf).
#ifndef CHIMERA_SCHEDULE_PROGRAM_H_
#define CHIMERA_SCHEDULE_PROGRAM_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::schedule {

// Same meaning as chimera.v1.Op (see proto/chimera/v1/program.proto).
enum class OpKind : uint8_t {
  kForward,
  kBackward,
  kSendAct,
  kRecvAct,
  kSendGrad,
  kRecvGrad,
  kAllreduceBegin,
  kAllreduceEnd,
  kOptimizerStep,
  // The split backward: B (input gradient) and W (weight gradients).
  kBackwardInput,
  kBackwardWeight,
  // Sharded data parallelism: the gradients' reduce-scatter, one stage's
  // shard step and the all-gather of its updated shards.
  kReduceScatterBegin,
  kReduceScatterEnd,
  kShardStep,
  kAllGatherBegin,
  kAllGatherEnd,
  // Sharding full: frees a stage's gathered parameters, keeping the shard.
  kReleaseParams,
};

// Every op kind in enum order: a kind's index is its value.
std::vector<OpKind> AllOpKinds();

// "FORWARD", "SEND_ACT", ...: the proto enum names without the OP_ prefix.
std::string OpName(OpKind op);
absl::StatusOr<OpKind> ParseOpName(absl::string_view name);
bool IsCompute(OpKind op);
// SEND_ACT, SEND_GRAD, RECV_ACT, RECV_GRAD; IsSend: the first two.
bool IsPointToPoint(OpKind op);
bool IsSend(OpKind op);
// The ops that can block until another rank acts: the receives and a
// collective's end.
bool WaitsForPeer(OpKind op);
// OPTIMIZER_STEP and SHARD_STEP: the ops that update weights.
bool UpdatesWeights(OpKind op);
// The ops that name a stage and no micro-batch: the collectives, SHARD_STEP
// and RELEASE_PARAMS.
bool ActsOnWholeStage(OpKind op);

// The collectives of a stage's gradient group (the ranks holding a replica of
// one model stage), each started by its BEGIN op and waited for by its END.
enum class Collective : uint8_t { kAllreduce, kReduceScatter, kAllGather };
inline constexpr int kNumCollectives = 3;
// The collective a BEGIN or END op starts or waits for; nullopt otherwise.
std::optional<Collective> CollectiveOf(OpKind op);
bool BeginsCollective(OpKind op);
bool EndsCollective(OpKind op);
OpKind BeginOf(Collective collective);
OpKind EndOf(Collective collective);
// "allreduce", "reduce-scatter", "all-gather".
std::string CollectiveName(Collective collective);
// BACKWARD, BACKWARD_INPUT, BACKWARD_WEIGHT.
bool IsBackward(OpKind op);
// A compute op's letter in drawings, as torch.distributed.pipelining writes
// them: F forward, B whole backward, I its input half, W its weight half.
char ComputeLetter(OpKind op);
// The ops that produce the gradient w.r.t. the stage input (BACKWARD, B) /
// that accumulate the weights' gradients and free the stash (BACKWARD, W).
bool ComputesInputGradient(OpKind op);
bool ComputesWeightGradient(OpKind op);

// One or two micro-batch indices (two only for a doubled forward).
using MicroBatches = absl::InlinedVector<int, 2>;

struct Instruction {
  OpKind op = OpKind::kForward;
  int chunk = 0;
  int stage = 0;
  MicroBatches micro_batches;
  // Peer rank for SEND_* / RECV_*; -1 otherwise.
  int peer = -1;
  // Backward halving: slice `part` of `num_parts`; 0 of 1 for whole ops.
  int part = 0;
  int num_parts = 1;
  bool recompute = false;

  bool operator==(const Instruction& other) const;
};

// "BACKWARD chunk=1 stage=2 mb=3 part=0/2", for errors and logs.
std::string DescribeInstruction(const Instruction& inst);

struct StageRef {
  int chunk = 0;
  int stage = 0;
  bool operator==(const StageRef& o) const {
    return chunk == o.chunk && stage == o.stage;
  }
  bool operator<(const StageRef& o) const {
    return chunk != o.chunk ? chunk < o.chunk : stage < o.stage;
  }
};

// How a schedule's chunks relate. kReplicas: every chunk is a whole model
// replica of `depth` stages (Chimera's down/up pipelines, GEMS); a
// micro-batch runs through exactly one chunk. kChained: the model is
// `num_chunks * depth` stages and chunk c holds stages [c*depth, (c+1)*depth)
// (looping pipelines); every micro-batch runs through every chunk in order.
enum class ChunkLayout { kReplicas, kChained };

std::string ChunkLayoutName(ChunkLayout layout);
absl::StatusOr<ChunkLayout> ParseChunkLayout(absl::string_view name);

// How a schedule's steps update the weights, and which version an op runs
// on.
enum class UpdateRule : uint8_t {
  // One update per step, after every micro-batch's backward (a flush): every
  // op of a step runs on the same weights, as mini-batch SGD does.
  kSynchronous,
  // PipeDream-2BW: a stage updates after the last backward of each step's
  // micro-batches, and a micro-batch of step b runs its forward and backward
  // on the weights after b - 1 updates (the initial ones for b = 0), so two
  // versions are alive at once.
  kDoubleBuffered,
  // PipeDream: a stage updates after every micro-batch's backward; a forward
  // runs on the newest weights and its backward on that same version, which
  // the stage stashes until then.
  kStashed,
};

// "synchronous", "double-buffered", "stashed".
std::string UpdateRuleName(UpdateRule rule);
absl::StatusOr<UpdateRule> ParseUpdateRule(absl::string_view name);

// The least common multiple of `replication` (1 when empty): the slices of
// each micro-batch (Topology::replication). Only for a replication that
// ReplicationProblem accepts: a larger one would overflow.
int SlicesPerMicroBatch(const std::vector<int>& replication);
// The ranks of one data-parallel replica of a pipeline of `depth` positions
// replicated as `replication` says: the sum of its entries, or `depth`
// without one.
int WorkersPerPipeline(int depth, const std::vector<int>& replication);

struct Topology {
  int depth = 1;
  int num_chunks = 1;
  ChunkLayout layout = ChunkLayout::kReplicas;
  // Micro-batches per data-parallel replica and the number of replicas.
  int micro_batches = 1;
  int width = 1;
  UpdateRule update_rule = UpdateRule::kSynchronous;
  // An asynchronous schedule as generated: one step's programs, which every
  // step repeats. An op on micro-batch -N..-1 (N = micro_batches) acts on
  // the previous step's micro-batch j + N: the first step skips those ops,
  // and a drain after the last step runs only them. An OPTIMIZER_STEP names
  // the micro-batch whose backward completes the update it applies.
  // UnrollSteps (step_unrolling.h) writes the steps out in full.
  bool repeating = false;
  // The steps the programs run in a row, micro_batches / steps each: 1, or
  // more for unrolled asynchronous steps.
  int steps = 1;
  // DAPPLE's non-uniform stage replication: position p's stage runs on
  // replication[p] ranks of each data-parallel replica, each on its own
  // slice of every micro-batch (empty: one rank per position). The
  // micro-batches the programs name are then slices, SlicesPerMicroBatch()
  // to each micro-batch a job names: slice j of micro-batch m is program
  // micro-batch m * L + j, and replica k of position p owns slices
  // [k L / r, (k + 1) L / r) of each (L slices, r = replication[p]). A
  // stage's slices hand on to whichever replica of the next owns them.
  // Only for one-chunk linear pipelines (the validator says so).
  std::vector<int> replication;

  // The stage that consumes `ref`'s output activation / that feeds its
  // input; nullopt at the ends of the model.
  std::optional<StageRef> Next(StageRef ref) const;
  std::optional<StageRef> Prev(StageRef ref) const;
  // Index of the model partition `ref` holds: replicas of one partition
  // share weights and are allreduced together.
  int ModelStage(StageRef ref) const;
  int NumModelStages() const;
  int NumWorkers() const { return width * WorkersPerPipeline(); }
  // The ranks of one data-parallel replica: depth, or the sum of
  // `replication`.
  int WorkersPerPipeline() const {
    return schedule::WorkersPerPipeline(depth, replication);
  }
  // Ranks holding position `position` in each data-parallel replica.
  int ReplicasOf(int position) const;
  // The least common multiple of `replication` (1 without it).
  int SlicesPerMicroBatch() const {
    return schedule::SlicesPerMicroBatch(replication);
  }
  // The rank of replica `replica` of position `position` in data-parallel
  // replica `dp`; the position and the replica index of `rank`.
  int RankOf(int dp, int position, int replica) const;
  int PositionOf(int rank) const;
  int ReplicaIndexOf(int rank) const;
  // The replica of position `position` that owns program micro-batch `mb`.
  int SliceOwner(int position, int mb) const;
  int MicroBatchesPerStep() const { return micro_batches / steps; }
  bool Asynchronous() const { return update_rule != UpdateRule::kSynchronous; }
  // Asynchronous schedules: whether a stage updates its weights right after
  // the backward of micro-batch `mb` (every one under kStashed, each step's
  // last under kDoubleBuffered).
  bool UpdatesAfter(int mb) const;
};

// The largest depth, width, micro-batch count, chunk count or other knob a
// schedule may have, and the most workers per pipeline or slices per
// micro-batch a replication may make: far beyond any cluster's, and small
// enough that the products the engine forms of two of them (W x D ranks,
// 2D, D x chunks) stay inside an int.
inline constexpr int kMaxScheduleSize = 1 << 15;

// Why `replication` cannot lay out a pipeline of `depth` stages (a count
// other than the depth, a stage without a worker, more than
// kMaxScheduleSize workers per pipeline or slices per micro-batch), or ""
// when it can. Empty is no replication and always can.
std::string ReplicationProblem(const std::vector<int>& replication, int depth);

// InvalidArgument, naming the replication, when `topology` has one that
// ReplicationProblem refuses, or one for more than a synchronous pipeline
// of one chunk, or whose slices do not divide its micro-batches.
absl::Status CheckReplication(const Topology& topology);

struct WorkerProgram {
  int rank = 0;
  // Stage replicas this worker holds, in the order it builds them.
  std::vector<StageRef> stages;
  std::vector<Instruction> instructions;
};

struct Schedule {
  Topology topology;
  // Indexed by rank.
  std::vector<WorkerProgram> workers;
};

// The data-parallel replica a rank belongs to.
inline int DpRank(const Topology& topology, int rank) {
  return rank / topology.WorkersPerPipeline();
}

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_PROGRAM_H_
