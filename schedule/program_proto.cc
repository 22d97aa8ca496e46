#include "schedule/program_proto.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::schedule {
namespace {

// OpKind and chimera.v1.Op list the ops in the same order, the proto one
// after OP_UNSPECIFIED.
chimera::v1::Op ToProtoOp(OpKind op) {
  return static_cast<chimera::v1::Op>(static_cast<int>(op) + 1);
}

absl::Status CheckRank(int rank, int world_size) {
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("program rank ", rank, " outside [0, ", world_size, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<WorkerProgram> ProgramFromProto(
    const chimera::v1::WorkerProgram& p) {
  WorkerProgram program;
  program.rank = p.rank();
  for (const chimera::v1::StageReplica& stage : p.stages()) {
    program.stages.push_back({stage.chunk(), stage.stage()});
  }
  for (const chimera::v1::Instruction& in : p.instructions()) {
    ASSIGN_OR_RETURN(
        program.instructions.emplace_back(),
        InstructionFromProto(in, p.rank(), program.instructions.size()));
  }
  return program;
}

absl::StatusOr<Topology> TopologyFromProto(
    const chimera::v1::ScheduleOutline& outline) {
  Topology topology;
  ASSIGN_OR_RETURN(topology.layout, ParseChunkLayout(outline.chunk_layout()));
  topology.depth = outline.depth();
  topology.num_chunks = outline.num_chunks();
  topology.micro_batches = outline.micro_batches();
  topology.width = outline.width();
  if (!outline.update_rule().empty()) {
    ASSIGN_OR_RETURN(topology.update_rule,
                     ParseUpdateRule(outline.update_rule()));
  }
  topology.repeating = outline.repeating();
  topology.replication.assign(outline.replication().begin(),
                              outline.replication().end());
  if (topology.repeating && !topology.Asynchronous()) {
    return absl::InvalidArgumentError(
        "the schedule outline repeats one step, but its update rule is "
        "synchronous");
  }
  if (topology.depth < 1 || topology.num_chunks < 1 ||
      topology.micro_batches < 1 || topology.width < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("the schedule outline's topology (depth ", topology.depth,
                     ", ", topology.num_chunks, " chunks, ",
                     topology.micro_batches, " micro-batches, width ",
                     topology.width, ") must be at least 1 in each"));
  }
  RETURN_IF_ERROR(CheckReplication(topology));
  return topology;
}

absl::StatusOr<std::vector<StageRef>> StagesFromProto(
    const google::protobuf::RepeatedPtrField<chimera::v1::StageReplica>& stages,
    const Topology& topology) {
  std::vector<StageRef> refs;
  for (const chimera::v1::StageReplica& stage : stages) {
    if (stage.chunk() < 0 || stage.chunk() >= topology.num_chunks ||
        stage.stage() < 0 || stage.stage() >= topology.depth) {
      return absl::InvalidArgumentError(
          absl::StrCat("the schedule outline names chunk ", stage.chunk(),
                       " stage ", stage.stage(), ", outside its topology"));
    }
    refs.push_back({stage.chunk(), stage.stage()});
  }
  return refs;
}

}  // namespace

absl::StatusOr<Instruction> InstructionFromProto(
    const chimera::v1::Instruction& in, int rank, size_t index) {
  if (in.op() <= chimera::v1::OP_UNSPECIFIED || in.op() > chimera::v1::Op_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " instruction ", index, ": op ", in.op(),
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
  return inst;
}

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
    RETURN_IF_ERROR(CheckRank(p.rank(), topology.NumWorkers()));
    ASSIGN_OR_RETURN(schedule.workers[p.rank()], ProgramFromProto(p));
  }
  return schedule;
}

chimera::v1::ScheduleOutline ToProto(const ScheduleOutline& outline) {
  chimera::v1::ScheduleOutline out;
  const Topology& topology = outline.topology;
  out.set_depth(topology.depth);
  out.set_num_chunks(topology.num_chunks);
  out.set_chunk_layout(ChunkLayoutName(topology.layout));
  out.set_micro_batches(topology.micro_batches);
  out.set_width(topology.width);
  if (topology.Asynchronous()) {
    out.set_update_rule(UpdateRuleName(topology.update_rule));
    out.set_repeating(topology.repeating);
  }
  for (int replicas : topology.replication) out.add_replication(replicas);
  for (const std::vector<StageRef>& stages : outline.stages_by_rank) {
    chimera::v1::RankStages* rank = out.add_ranks();
    for (const StageRef& ref : stages) {
      chimera::v1::StageReplica* stage = rank->add_stages();
      stage->set_chunk(ref.chunk);
      stage->set_stage(ref.stage);
    }
  }
  out.set_max_parts(outline.max_parts);
  out.set_digest(outline.digest);
  return out;
}

absl::StatusOr<RankSchedule> RankScheduleFromProto(
    const chimera::v1::ScheduleOutline& outline,
    const chimera::v1::WorkerProgram& program) {
  RankSchedule mine;
  ASSIGN_OR_RETURN(mine.outline.topology, TopologyFromProto(outline));
  const Topology& topology = mine.outline.topology;
  if (outline.ranks_size() != topology.NumWorkers()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the schedule outline lists the stages of ", outline.ranks_size(),
        " ranks; its topology has ", topology.NumWorkers()));
  }
  for (const chimera::v1::RankStages& rank : outline.ranks()) {
    ASSIGN_OR_RETURN(mine.outline.stages_by_rank.emplace_back(),
                     StagesFromProto(rank.stages(), topology));
  }
  if (outline.max_parts() < 1 || outline.digest().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the schedule outline has max_parts ", outline.max_parts(),
                     " and digest '", outline.digest(), "'; both must be set"));
  }
  mine.outline.max_parts = outline.max_parts();
  mine.outline.digest = outline.digest();
  RETURN_IF_ERROR(CheckRank(program.rank(), topology.NumWorkers()));
  ASSIGN_OR_RETURN(mine.program, ProgramFromProto(program));
  if (!(mine.program.stages == mine.outline.stages_by_rank[program.rank()])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", program.rank(),
        "'s program holds other stages than the schedule outline says"));
  }
  return mine;
}

}  // namespace chimera::schedule
