#include "worker/runtime/message_tags.h"

#include <set>

namespace chimera::worker {

MessageTags::MessageTags(const schedule::ScheduleOutline& outline)
    : num_chunks_(outline.topology.num_chunks),
      depth_(outline.topology.depth),
      max_parts_(outline.max_parts) {}

int64_t MessageTags::Of(TransferKind kind, schedule::StageRef producer,
                        int micro_batch, int part) const {
  // The micro-batch is the outermost digit: it is the only unbounded one.
  const int64_t edge =
      (micro_batch * num_chunks_ + producer.chunk) * depth_ + producer.stage;
  return (edge * max_parts_ + part) * 2 + static_cast<int64_t>(kind);
}

std::vector<P2pLink> P2pLinks(const schedule::WorkerProgram& program) {
  std::set<P2pLink> links;
  for (const schedule::Instruction& inst : program.instructions) {
    switch (inst.op) {
      case schedule::OpKind::kSendAct:
      case schedule::OpKind::kSendGrad:
        links.insert({program.rank, inst.peer});
        break;
      case schedule::OpKind::kRecvAct:
      case schedule::OpKind::kRecvGrad:
        links.insert({inst.peer, program.rank});
        break;
      default:
        break;
    }
  }
  return {links.begin(), links.end()};
}

}  // namespace chimera::worker
