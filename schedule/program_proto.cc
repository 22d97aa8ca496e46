#include "schedule/program_proto.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chimera::schedule {
namespace {

// OpKind and chimera.v1.Op list the ops in the same order, the proto one
// after OP_UNSPECIFIED.
chimera::v1::Op ToProtoOp(OpKind op) {
  return static_cast<chimera::v1::Op>(static_cast<int>(op) + 1);
}

}  // namespace

std::vector<chimera::v1::WorkerProgram> ToProto(const Schedule& schedule) {
  std::vector<chimera::v1::WorkerProgram> programs;
  programs.reserve(schedule.workers.size());
  for (const WorkerProgram& w : schedule.workers) {
    chimera::v1::WorkerProgram& p = programs.emplace_back();
    p.set_rank(w.rank);
    p.set_world_size(static_cast<int>(schedule.workers.size()));
    p.set_dp_rank(DpRank(schedule.topology, w.rank));
    for (const StageRef& ref : w.stages) {
      chimera::v1::StageReplica* stage = p.add_stages();
      stage->set_chunk(ref.chunk);
      stage->set_stage(ref.stage);
    }
    for (const Instruction& inst : w.instructions) {
      chimera::v1::Instruction* out = p.add_instructions();
      out->set_op(ToProtoOp(inst.op));
      out->set_chunk(inst.chunk);
      out->set_stage(inst.stage);
      for (int mb : inst.micro_batches) out->add_micro_batches(mb);
      out->set_peer(inst.peer);
      out->set_part(inst.part);
      out->set_num_parts(inst.num_parts);
      out->set_recompute(inst.recompute);
    }
  }
  return programs;
}

absl::StatusOr<Schedule> FromProto(
    const Topology& topology,
    const std::vector<chimera::v1::WorkerProgram>& programs) {
  Schedule schedule;
  schedule.topology = topology;
  schedule.workers.resize(topology.NumWorkers());
  for (int r = 0; r < topology.NumWorkers(); ++r) schedule.workers[r].rank = r;
  for (const chimera::v1::WorkerProgram& p : programs) {
    if (p.rank() < 0 || p.rank() >= topology.NumWorkers()) {
      return absl::InvalidArgumentError(
          absl::StrCat("program rank ", p.rank(), " outside [0, ",
                       topology.NumWorkers(), ")"));
    }
    WorkerProgram& w = schedule.workers[p.rank()];
    for (const chimera::v1::StageReplica& stage : p.stages()) {
      w.stages.push_back({stage.chunk(), stage.stage()});
    }
    for (const chimera::v1::Instruction& in : p.instructions()) {
      if (in.op() <= chimera::v1::OP_UNSPECIFIED ||
          in.op() > chimera::v1::OP_BACKWARD_WEIGHT) {
        return absl::InvalidArgumentError(
            absl::StrCat("rank ", p.rank(), " instruction ",
                         w.instructions.size(), ": op ", in.op(),
                         " is not an operation"));
      }
      Instruction inst;
      inst.op = static_cast<OpKind>(in.op() - 1);
      inst.chunk = in.chunk();
      inst.stage = in.stage();
      inst.micro_batches.assign(in.micro_batches().begin(),
                                in.micro_batches().end());
      inst.peer = in.peer();
      inst.part = in.part();
      inst.num_parts = in.num_parts() == 0 ? 1 : in.num_parts();
      inst.recompute = in.recompute();
      w.instructions.push_back(std::move(inst));
    }
  }
  return schedule;
}

}  // namespace chimera::schedule
