#include "worker/runtime/message_tags.h"

#include <algorithm>
#include <set>

namespace chimera::worker {

MessageTags::MessageTags(const schedule::Schedule& schedule)
    : num_chunks_(schedule.topology.num_chunks),
      depth_(schedule.topology.depth),
      max_parts_(1) {
  for (const schedule::WorkerProgram& program : schedule.workers) {
    for (const schedule::Instruction& inst : program.instructions) {
      max_parts_ = std::max<int64_t>(max_parts_, inst.num_parts);
    }
  }
}

int64_t MessageTags::Of(TransferKind kind, schedule::StageRef producer,
                        int micro_batch, int part) const {
  // The micro-batch is the outermost digit: it is the only unbounded one.
  const int64_t edge =
      (micro_batch * num_chunks_ + producer.chunk) * depth_ + producer.stage;
  return (edge * max_parts_ + part) * 2 + static_cast<int64_t>(kind);
}

std::vector<P2pLink> P2pLinks(const schedule::Schedule& schedule) {
  std::set<P2pLink> links;
  for (size_t rank = 0; rank < schedule.workers.size(); ++rank) {
    for (const schedule::Instruction& inst :
         schedule.workers[rank].instructions) {
      if (inst.op == schedule::OpKind::kSendAct ||
          inst.op == schedule::OpKind::kSendGrad) {
        links.insert({static_cast<int>(rank), inst.peer});
      }
    }
  }
  return {links.begin(), links.end()};
}

}  // namespace chimera::worker
