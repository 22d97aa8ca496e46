#include "worker/runtime/step_metrics.h"

namespace chimera::worker {

void SecondsByOp::Add(schedule::OpKind op, double seconds) {
  using schedule::OpKind;
  switch (op) {
    case OpKind::kForward:
      forward += seconds;
      return;
    case OpKind::kBackward:
    case OpKind::kBackwardInput:
    case OpKind::kBackwardWeight:
      backward += seconds;
      return;
    case OpKind::kSendAct:
    case OpKind::kSendGrad:
      send += seconds;
      return;
    case OpKind::kRecvAct:
    case OpKind::kRecvGrad:
      recv += seconds;
      return;
    case OpKind::kAllreduceBegin:
    case OpKind::kAllreduceEnd:
    case OpKind::kReduceScatterBegin:
    case OpKind::kReduceScatterEnd:
    case OpKind::kAllGatherBegin:
    case OpKind::kAllGatherEnd:
    case OpKind::kReleaseParams:
      allreduce += seconds;
      return;
    case OpKind::kOptimizerStep:
    case OpKind::kShardStep:
      optimizer += seconds;
      return;
  }
}

}  // namespace chimera::worker
