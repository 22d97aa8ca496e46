#include "schedule/rank_schedule.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace chimera::schedule {
namespace {

// FNV-1a over each value's four little-endian bytes: the same on every
// machine (unlike absl::Hash, seeded per process). A consistency check
// between ranks, not a defence against forgery.
class Fnv1a {
 public:
  void Add(int64_t value) {
    for (int byte = 0; byte < 4; ++byte) {
      hash_ ^= static_cast<uint64_t>(value >> (8 * byte)) & 0xff;
      hash_ *= 0x100000001b3ULL;
    }
  }
  uint64_t hash() const { return hash_; }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

void AddTopology(const Topology& topology, Fnv1a& fnv) {
  fnv.Add(topology.depth);
  fnv.Add(topology.num_chunks);
  fnv.Add(static_cast<int>(topology.layout));
  fnv.Add(topology.micro_batches);
  fnv.Add(topology.width);
  // Left out of synchronous schedules, whose digests stay what they were.
  if (topology.Asynchronous()) {
    fnv.Add(static_cast<int>(topology.update_rule));
    fnv.Add(static_cast<int>(topology.repeating));
  }
  for (int replicas : topology.replication) fnv.Add(replicas);
}

void AddInstruction(const Instruction& inst, Fnv1a& fnv) {
  fnv.Add(static_cast<int>(inst.op));
  fnv.Add(inst.chunk);
  fnv.Add(inst.stage);
  fnv.Add(static_cast<int64_t>(inst.micro_batches.size()));
  for (int micro_batch : inst.micro_batches) fnv.Add(micro_batch);
  fnv.Add(inst.peer);
  fnv.Add(inst.part);
  fnv.Add(inst.num_parts);
  fnv.Add(inst.recompute ? 1 : 0);
}

}  // namespace

ScheduleOutline OutlineOf(const Schedule& schedule) {
  ScheduleOutline outline;
  outline.topology = schedule.topology;
  for (const WorkerProgram& program : schedule.workers) {
    outline.stages_by_rank.push_back(program.stages);
    for (const Instruction& inst : program.instructions) {
      outline.max_parts = std::max(outline.max_parts, inst.num_parts);
    }
  }
  outline.digest = ScheduleDigest(schedule);
  return outline;
}

RankSchedule RankScheduleOf(const Schedule& schedule, int rank) {
  return {OutlineOf(schedule), schedule.workers.at(rank)};
}

std::string ScheduleDigest(const Schedule& schedule) {
  Fnv1a fnv;
  AddTopology(schedule.topology, fnv);
  fnv.Add(static_cast<int64_t>(schedule.workers.size()));
  for (const WorkerProgram& program : schedule.workers) {
    fnv.Add(program.rank);
    fnv.Add(static_cast<int64_t>(program.stages.size()));
    for (const StageRef& ref : program.stages) {
      fnv.Add(ref.chunk);
      fnv.Add(ref.stage);
    }
    fnv.Add(static_cast<int64_t>(program.instructions.size()));
    for (const Instruction& inst : program.instructions) {
      AddInstruction(inst, fnv);
    }
  }
  return absl::StrFormat("%016x", fnv.hash());
}

}  // namespace chimera::schedule
