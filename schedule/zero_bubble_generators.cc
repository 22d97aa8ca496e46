#include "schedule/zero_bubble_generators.h"

#include <algorithm>
#include <deque>
#include <vector>

#include "common/status_macros.h"
#include "schedule/bidirectional_generators.h"
#include "schedule/list_scheduler.h"
#include "schedule/program_builder.h"

namespace chimera::schedule {
namespace {

ComputeOp Op(OpKind kind, StageRef ref, int mb, bool recompute) {
  ComputeOp op;
  op.op = kind;
  op.ref = ref;
  op.micro_batches = {mb};
  op.recompute = recompute && ComputesInputGradient(kind);
  return op;
}

// Stage `i`'s order: `warmup` forwards, then per micro-batch k its B, the
// W of micro-batch k - `lag` (the W's a stage defers are the micro-batches
// it holds beyond 1F1B's), and the next forward; then the W's left.
std::vector<ComputeOp> StageOrder(int i, int micro_batches, int warmup,
                                  int lag, bool recompute) {
  const StageRef ref{0, i};
  std::vector<ComputeOp> ops;
  int next_forward = 0;
  int next_weight = 0;
  for (; next_forward < std::min(warmup, micro_batches); ++next_forward) {
    ops.push_back(Op(OpKind::kForward, ref, next_forward, false));
  }
  for (int k = 0; k < micro_batches; ++k) {
    ops.push_back(Op(OpKind::kBackwardInput, ref, k, recompute));
    if (k >= lag) {
      ops.push_back(Op(OpKind::kBackwardWeight, ref, next_weight++, false));
    }
    if (next_forward < micro_batches) {
      ops.push_back(Op(OpKind::kForward, ref, next_forward++, false));
    }
  }
  while (next_weight < micro_batches) {
    ops.push_back(Op(OpKind::kBackwardWeight, ref, next_weight++, false));
  }
  return ops;
}

// Where a schedule's stages run.
struct Shape {
  Topology topology;
  Placement placement;
};

// D stages on a line, stage i on position i.
Shape MakeLine(const ScheduleParams& params) {
  Shape line;
  line.topology.depth = params.depth;
  line.topology.micro_batches = params.micro_batches;
  line.topology.width = params.width;
  line.placement.position.assign(1, std::vector<int>(params.depth));
  for (int i = 0; i < params.depth; ++i) line.placement.position[0][i] = i;
  return line;
}

// The V: 2D model stages, chunk 0 (stages 0..D-1) down positions 0..D-1 and
// chunk 1 (stages D..2D-1) back up from D-1 to 0, so position D-1 hands its
// activations to itself and position 0 holds the first and the last stage.
Shape MakeVShape(const ScheduleParams& params) {
  Shape v = MakeLine(params);
  v.topology.num_chunks = 2;
  v.topology.layout = ChunkLayout::kChained;
  std::vector<int> up = v.placement.position[0];
  std::reverse(up.begin(), up.end());
  v.placement.position.push_back(std::move(up));
  return v;
}

// Appends one position's ops on its two chunks, each kind of op of a chunk
// taking the chunk's next micro-batch in turn. An input half leaves its W
// waiting; W(c) runs the oldest waiting W of chunk c, OldestW() the oldest
// of either. Ops of micro-batches beyond the schedule's are counted but left
// out: an order written for more micro-batches stays executable for fewer,
// since it only loses ops whose dependencies it also loses.
class ChunkOrder {
 public:
  ChunkOrder(StageRef down, StageRef up, int micro_batches, bool recompute)
      : refs_{down, up}, micro_batches_(micro_batches), recompute_(recompute) {}

  void F(int chunk) { Add(OpKind::kForward, chunk, forwards_[chunk]++); }
  void B(int chunk) { Add(OpKind::kBackward, chunk, backwards_[chunk]++); }
  void I(int chunk) {
    waiting_.push_back({chunk, backwards_[chunk]});
    Add(OpKind::kBackwardInput, chunk, backwards_[chunk]++);
  }
  void W(int chunk) {
    auto it = std::find_if(waiting_.begin(), waiting_.end(),
                           [chunk](const Waiting& w) { return w.chunk == chunk; });
    if (it == waiting_.end()) return;
    Add(OpKind::kBackwardWeight, chunk, it->micro_batch);
    waiting_.erase(it);
  }
  void OldestW() {
    if (!waiting_.empty()) W(waiting_.front().chunk);
  }

  int forwards(int chunk) const { return forwards_[chunk]; }
  bool HasWaiting(int chunk) const {
    return std::any_of(waiting_.begin(), waiting_.end(),
                       [chunk](const Waiting& w) { return w.chunk == chunk; });
  }
  std::vector<ComputeOp> Take() { return std::move(ops_); }

 private:
  struct Waiting {
    int chunk;
    int micro_batch;
  };

  void Add(OpKind kind, int chunk, int micro_batch) {
    if (micro_batch < micro_batches_) {
      ops_.push_back(Op(kind, refs_[chunk], micro_batch, recompute_));
    }
  }

  const StageRef refs_[2];
  const int micro_batches_;
  const bool recompute_;
  int forwards_[2] = {0, 0};
  int backwards_[2] = {0, 0};
  std::deque<Waiting> waiting_;
  std::vector<ComputeOp> ops_;
};

ChunkOrder VChunks(const ScheduleParams& params, int r) {
  return ChunkOrder({0, r}, {1, params.depth - 1 - r}, params.micro_batches,
                    params.recompute);
}

// Position r of ZB-V, written for n >= 2D - 1 micro-batches (fewer drop
// out, see ChunkOrder): 2(D-r)-1 forwards of chunk 0 fill the V's descent;
// r pairs of forwards (chunk 1, chunk 0) follow as chunk 1's first
// activations climb back; D-r rounds of chunk 1's F, I, W start its
// backwards; then each round runs chunk 0's I and W (after its next F while
// any are left) and chunk 1's F, I, W; the drain runs r pairs of I's with
// their W's waiting, D-r rounds of chunk 0's I and W, and the W's left.
std::vector<ComputeOp> ZeroBubbleVOrder(const ScheduleParams& params, int r) {
  const int d = params.depth;
  const int n = std::max(2 * d - 1, params.micro_batches);
  ChunkOrder o = VChunks(params, r);
  for (int k = 0; k < 2 * (d - r) - 1; ++k) o.F(0);
  for (int k = 0; k < r; ++k) {
    o.F(1);
    o.F(0);
  }
  for (int k = 0; k < d - r; ++k) {
    o.F(1);
    o.I(1);
    o.W(1);
  }
  while (o.forwards(1) < o.forwards(0) || o.forwards(0) < n) {
    if (o.forwards(0) < n) o.F(0);
    o.I(0);
    o.W(0);
    o.F(1);
    o.I(1);
    o.W(1);
  }
  for (int k = 0; k < r; ++k) {
    o.I(0);
    o.I(1);
  }
  for (int k = 0; k < d - r; ++k) {
    o.I(0);
    o.W(0);
  }
  while (o.HasWaiting(1)) o.W(1);
  while (o.HasWaiting(0)) o.W(0);
  return o.Take();
}

// Position r of DualPipeV (DeepSeek's DualPipe repository, dualpipev.py), in
// its eight steps. Its overlapped forward-and-backward pairs (F0&B1) run
// here one after the other, forward first. Whole backwards (B) run where
// DualPipeV runs them without its zero-bubble split.
std::vector<ComputeOp> DualPipeVOrder(const ScheduleParams& params, int r) {
  const int d = params.depth;
  const int n = params.micro_batches;
  ChunkOrder o = VChunks(params, r);
  // 1-2: chunk 0's descent, then r+1 forward pairs.
  for (int k = 0; k < 2 * (d - r - 1); ++k) o.F(0);
  for (int k = 0; k < r + 1; ++k) {
    o.F(0);
    o.F(1);
  }
  // 3: chunk 1's first backwards, split, each W at once.
  for (int k = 0; k < d - r - 1; ++k) {
    o.I(1);
    o.OldestW();
    o.F(1);
  }
  // 4: the steady pairs F0&B1, F1&B0.
  for (int k = 0; k < n - 2 * d + r + 1; ++k) {
    o.F(0);
    o.B(1);
    o.F(1);
    o.B(0);
  }
  // 5: chunk 1's forwards run out.
  for (int k = 0; k < d - r - 1; ++k) {
    o.B(1);
    o.F(1);
    o.B(0);
  }
  // 6: the backward pairs, split from the middle one on (before its chunk-1
  // backward on odd positions, after it on even ones).
  const int pairs = r + 1;
  bool split = false;
  for (int k = 0; k < pairs; ++k) {
    if (k == pairs / 2 && r % 2 == 1) split = true;
    split ? o.I(1) : o.B(1);
    if (k == pairs / 2 && r % 2 == 0) split = true;
    split ? o.I(0) : o.B(0);
  }
  // 7-8: the waiting W's fill the drain.
  for (int k = 0; k < d - r - 1; ++k) {
    o.OldestW();
    o.I(0);
  }
  for (int k = 0; k < r + 1; ++k) o.OldestW();
  return o.Take();
}

// Times the per-position `order` on the V and builds its programs.
absl::StatusOr<Schedule> BuildV(
    const ScheduleParams& params,
    std::vector<ComputeOp> (*order_of)(const ScheduleParams&, int)) {
  const Shape v = MakeVShape(params);
  std::vector<std::vector<ComputeOp>> order(params.depth);
  for (int r = 0; r < params.depth; ++r) order[r] = order_of(params, r);
  ASSIGN_OR_RETURN(order, TimeFixedOrder(v.topology, v.placement,
                                         params.backward_slots, order));
  return BuildPrograms(v.topology, v.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

// A line of D stages whose forwards and B's keep 1F1B's order with
// `warmup[i]` forwards before stage i's first B, and whose W's fill the
// time a stage would idle: a stage runs its next forward or B as soon as it
// is ready, its oldest W when it is not, or when its next forward would hold
// more than `limit` micro-batches (forward run, W not); the W's left run at
// the end.
absl::StatusOr<Schedule> LineWithDeferredWeights(const ScheduleParams& params,
                                                 const std::vector<int>& warmup,
                                                 int limit) {
  const int n = params.micro_batches;
  const Shape line = MakeLine(params);
  ListScheduler scheduler(line.topology, line.placement, params.backward_slots);
  constexpr int kOneFOneBStream = 0;
  constexpr int kWeightStream = 1;
  for (int i = 0; i < params.depth; ++i) {
    const StageRef ref{0, i};
    const int held = scheduler.AddAdmissionGroup(limit);
    int64_t next = 0;
    const auto forward = [&](int m) {
      scheduler.Add(Op(OpKind::kForward, ref, m, false), kOneFOneBStream,
                    next++, held);
    };
    for (int m = 0; m < std::min(warmup[i], n); ++m) forward(m);
    for (int m = 0; m < n; ++m) {
      scheduler.Add(Op(OpKind::kBackwardInput, ref, m, params.recompute),
                    kOneFOneBStream, next++);
      scheduler.Add(Op(OpKind::kBackwardWeight, ref, m, false), kWeightStream,
                    kLaterPriority + m);
      if (m + warmup[i] < n) forward(m + warmup[i]);
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(line.topology, line.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

}  // namespace

// Stage i defers its W's by i micro-batches: i more held than 1F1B's D - i,
// D in all, the i deferred W's filling the drain while the B's climb back.
absl::StatusOr<Schedule> GenerateZeroBubbleH1(const ScheduleParams& params) {
  const int d = params.depth;
  const Shape line = MakeLine(params);
  std::vector<std::vector<ComputeOp>> order(d);
  for (int i = 0; i < d; ++i) {
    order[i] = StageOrder(i, params.micro_batches, /*warmup=*/d - i,
                          /*lag=*/i, params.recompute);
  }
  ASSIGN_OR_RETURN(order, TimeFixedOrder(line.topology, line.placement,
                                         params.backward_slots, order));
  return BuildPrograms(line.topology, line.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

// ZB-H2's memory, 2D-1 micro-batches a stage, buys stage i 2(D-i)-1
// warm-up forwards.
absl::StatusOr<Schedule> GenerateZeroBubbleH2(const ScheduleParams& params) {
  const int d = params.depth;
  std::vector<int> warmup(d);
  for (int i = 0; i < d; ++i) warmup[i] = 2 * (d - i) - 1;
  return LineWithDeferredWeights(params, warmup, 2 * d - 1);
}

// A limit of L leaves stage i L - i warm-up forwards, and room to defer i
// W's (the zero-bubble paper's rule: at L = D, ZB-H1's order), up to
// ZB-H2's 2(D-i)-1; at least one.
absl::StatusOr<Schedule> GenerateZeroBubbleAuto(const ScheduleParams& params) {
  const int d = params.depth;
  const int n = params.micro_batches;
  const int limit = params.activation_limit == 0 ? std::max(n, 2 * d - 1)
                                                 : params.activation_limit;
  std::vector<int> warmup(d);
  for (int i = 0; i < d; ++i) {
    warmup[i] = std::max(1, std::min(limit - i, 2 * (d - i) - 1));
  }
  return LineWithDeferredWeights(params, warmup, limit);
}

absl::StatusOr<Schedule> GenerateZeroBubbleV(const ScheduleParams& params) {
  return BuildV(params, ZeroBubbleVOrder);
}

absl::StatusOr<Schedule> GenerateDualPipeV(const ScheduleParams& params) {
  return BuildV(params, DualPipeVOrder);
}

// Chimera's forwards and B's keep their order and run first whenever they
// are ready; a position runs a W only when its next forward or B is not,
// oldest W first, or when its next forward would hold more than D
// micro-batches.
absl::StatusOr<Schedule> GenerateChimeraZeroBubble(
    const ScheduleParams& params) {
  const int d = params.depth;
  const Bidirectional b = MakeBidirectional(params, params.pipelines / 2);
  ASSIGN_OR_RETURN(const std::vector<std::vector<ComputeOp>> chimera,
                   ChimeraSlotOrder(params, b));
  ListScheduler scheduler(b.topology, b.placement, params.backward_slots);
  constexpr int kChimeraStream = 0;
  constexpr int kWeightStream = 1;
  for (int p = 0; p < d; ++p) {
    const int held = scheduler.AddAdmissionGroup(d);
    int64_t weights = 0;
    for (const ComputeOp& op : chimera[p]) {
      if (op.op == OpKind::kForward) {
        scheduler.Add(op, kChimeraStream, op.grid_start, held);
        continue;
      }
      ComputeOp input = op;
      input.op = OpKind::kBackwardInput;
      scheduler.Add(input, kChimeraStream, op.grid_start);
      ComputeOp weight = op;
      weight.op = OpKind::kBackwardWeight;
      weight.recompute = false;
      scheduler.Add(weight, kWeightStream, kLaterPriority + weights++);
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(b.topology, b.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

}  // namespace chimera::schedule
