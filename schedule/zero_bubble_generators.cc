#include "schedule/zero_bubble_generators.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "schedule/list_scheduler.h"
#include "schedule/program_builder.h"

namespace chimera::schedule {
namespace {

ComputeOp Op(OpKind kind, int stage, int mb, bool recompute) {
  ComputeOp op;
  op.op = kind;
  op.ref = {0, stage};
  op.micro_batches = {mb};
  op.recompute = recompute && kind == OpKind::kBackwardInput;
  return op;
}

// Stage `i`'s order: `warmup` forwards, then per micro-batch k its B, the
// W of micro-batch k - `lag` (the W's a stage defers are the micro-batches
// it holds beyond 1F1B's), and the next forward; then the W's left.
std::vector<ComputeOp> StageOrder(int i, int micro_batches, int warmup,
                                  int lag, bool recompute) {
  std::vector<ComputeOp> ops;
  int next_forward = 0;
  int next_weight = 0;
  for (; next_forward < std::min(warmup, micro_batches); ++next_forward) {
    ops.push_back(Op(OpKind::kForward, i, next_forward, false));
  }
  for (int k = 0; k < micro_batches; ++k) {
    ops.push_back(Op(OpKind::kBackwardInput, i, k, recompute));
    if (k >= lag) ops.push_back(Op(OpKind::kBackwardWeight, i, next_weight++, false));
    if (next_forward < micro_batches) {
      ops.push_back(Op(OpKind::kForward, i, next_forward++, false));
    }
  }
  while (next_weight < micro_batches) {
    ops.push_back(Op(OpKind::kBackwardWeight, i, next_weight++, false));
  }
  return ops;
}

}  // namespace

// Stage i defers its W's by i micro-batches: i more held than 1F1B's D - i,
// D in all, the i deferred W's filling the drain while the B's climb back.
absl::StatusOr<Schedule> GenerateZeroBubbleH1(const ScheduleParams& params) {
  const int d = params.depth;
  Topology topology;
  topology.depth = d;
  topology.micro_batches = params.micro_batches;
  topology.width = params.width;
  Placement placement;
  placement.position.assign(1, std::vector<int>(d));
  std::vector<std::vector<ComputeOp>> order(d);
  for (int i = 0; i < d; ++i) {
    placement.position[0][i] = i;
    order[i] = StageOrder(i, params.micro_batches, /*warmup=*/d - i,
                          /*lag=*/i, params.recompute);
  }
  ASSIGN_OR_RETURN(order, TimeFixedOrder(topology, placement,
                                         params.backward_slots, order));
  return BuildPrograms(topology, placement, order, params.sync);
}

}  // namespace chimera::schedule
