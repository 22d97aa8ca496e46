#include "schedule/stage_replication.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace chimera::schedule {
namespace {

absl::Status CheckReplicable(const Schedule& uniform,
                             const std::vector<int>& replication) {
  const Topology& topology = uniform.topology;
  if (topology.num_chunks != 1 || topology.Asynchronous() ||
      !topology.replication.empty()) {
    return absl::InvalidArgumentError(
        "only a synchronous one-chunk pipeline without replication can "
        "replicate its stages");
  }
  const std::string problem = ReplicationProblem(replication, topology.depth);
  if (!problem.empty() || replication.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("replication '", absl::StrJoin(replication, ":"), "' ",
                     problem.empty() ? "is empty" : problem));
  }
  for (const WorkerProgram& worker : uniform.workers) {
    const int position = worker.rank % topology.depth;
    if (worker.stages.size() != 1 ||
        !(worker.stages[0] == StageRef{0, position})) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", worker.rank, " must hold stage ", position,
                       " alone for its stage to be replicated"));
    }
  }
  return absl::OkStatus();
}

// Writes the program of one replica of a position from the position's
// program in the uniform schedule.
class ReplicaWriter {
 public:
  ReplicaWriter(const Topology& replicated, int dp, int position, int replica)
      : topology_(replicated),
        dp_(dp),
        position_(position),
        slices_(replicated.SlicesPerMicroBatch()),
        owned_(slices_ / replicated.ReplicasOf(position)),
        first_owned_(replica * owned_) {}

  void Write(const Instruction& inst, std::vector<Instruction>& out) const {
    if (inst.micro_batches.empty()) {
      out.push_back(inst);
      return;
    }
    for (int mb : inst.micro_batches) {
      for (int j = 0; j < owned_; ++j) {
        Instruction& slice = out.emplace_back(inst);
        slice.micro_batches = {mb * slices_ + first_owned_ + j};
        if (IsPointToPoint(inst.op)) slice.peer = PeerOf(slice);
      }
    }
  }

 private:
  // The replica of the neighbouring stage that owns the slice.
  int PeerOf(const Instruction& slice) const {
    const bool toward_next =
        slice.op == OpKind::kSendAct || slice.op == OpKind::kRecvGrad;
    const int position = position_ + (toward_next ? 1 : -1);
    return topology_.RankOf(
        dp_, position, topology_.SliceOwner(position, slice.micro_batches[0]));
  }

  const Topology& topology_;
  const int dp_;
  const int position_;
  const int slices_;
  const int owned_;
  const int first_owned_;
};

}  // namespace

absl::StatusOr<Schedule> ReplicateStages(const Schedule& uniform,
                                         const std::vector<int>& replication) {
  if (absl::Status checked = CheckReplicable(uniform, replication);
      !checked.ok()) {
    return checked;
  }
  Schedule replicated;
  replicated.topology = uniform.topology;
  Topology& topology = replicated.topology;
  topology.replication = replication;
  topology.micro_batches *= topology.SlicesPerMicroBatch();
  replicated.workers.resize(topology.NumWorkers());
  for (const WorkerProgram& source : uniform.workers) {
    const int dp = source.rank / uniform.topology.depth;
    const int position = source.rank % uniform.topology.depth;
    for (int replica = 0; replica < replication[position]; ++replica) {
      const int rank = topology.RankOf(dp, position, replica);
      WorkerProgram& program = replicated.workers[rank];
      program.rank = rank;
      program.stages = source.stages;
      const ReplicaWriter writer(topology, dp, position, replica);
      for (const Instruction& inst : source.instructions) {
        writer.Write(inst, program.instructions);
      }
    }
  }
  return replicated;
}

}  // namespace chimera::schedule
