#include "schedule/linear_generators.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "schedule/list_scheduler.h"
#include "schedule/program_builder.h"

namespace chimera::schedule {
namespace {

constexpr int kForwardStream = 0;
constexpr int kBackwardStream = 1;

struct LinearSetup {
  Topology topology;
  Placement placement;
};

LinearSetup MakeLinear(const ScheduleParams& params, int chunks) {
  LinearSetup setup;
  setup.topology.depth = params.depth;
  setup.topology.num_chunks = chunks;
  setup.topology.layout = ChunkLayout::kChained;
  setup.topology.micro_batches = params.micro_batches;
  setup.topology.width = params.width;
  setup.placement.position.assign(chunks, std::vector<int>(params.depth));
  for (auto& chunk : setup.placement.position) {
    for (int s = 0; s < params.depth; ++s) chunk[s] = s;
  }
  return setup;
}

ComputeOp Op(OpKind kind, StageRef ref, int mb, bool recompute) {
  ComputeOp op;
  op.op = kind;
  op.ref = ref;
  op.micro_batches = {mb};
  op.recompute = recompute && kind == OpKind::kBackward;
  return op;
}

// Adds every (chunk, stage, micro-batch) forward and backward. Streams hold
// the ops in ascending key order; `forward_key` / `backward_key` give each
// op's key, which is also its priority within its class. `admission_limit`
// per position, or 0 for none.
template <typename ForwardKey, typename BackwardKey>
absl::StatusOr<Schedule> Linear(const ScheduleParams& params, int chunks,
                                bool backward_first,
                                const std::vector<int>& admission_limit,
                                ForwardKey forward_key,
                                BackwardKey backward_key) {
  LinearSetup setup = MakeLinear(params, chunks);
  ListScheduler scheduler(setup.topology, setup.placement,
                          params.backward_slots);
  std::vector<int> group(params.depth, kNoAdmission);
  for (int s = 0; s < params.depth; ++s) {
    if (!admission_limit.empty()) {
      group[s] = scheduler.AddAdmissionGroup(admission_limit[s]);
    }
  }
  struct Keyed {
    int64_t key;
    int chunk;
    int mb;
  };
  std::vector<Keyed> forwards, backwards;
  for (int c = 0; c < chunks; ++c) {
    for (int m = 0; m < params.micro_batches; ++m) {
      forwards.push_back({forward_key(c, m), c, m});
      backwards.push_back({backward_key(c, m), c, m});
    }
  }
  auto by_key = [](const Keyed& a, const Keyed& b) { return a.key < b.key; };
  std::sort(forwards.begin(), forwards.end(), by_key);
  std::sort(backwards.begin(), backwards.end(), by_key);
  const int64_t forward_offset = backward_first ? kLaterPriority : 0;
  const int64_t backward_offset = backward_first ? 0 : kLaterPriority;
  for (int s = 0; s < params.depth; ++s) {
    for (const Keyed& f : forwards) {
      scheduler.Add(Op(OpKind::kForward, {f.chunk, s}, f.mb, false),
                    kForwardStream, forward_offset + f.key, group[s]);
    }
    for (const Keyed& b : backwards) {
      scheduler.Add(Op(OpKind::kBackward, {b.chunk, s}, b.mb, params.recompute),
                    kBackwardStream, backward_offset + b.key);
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(setup.topology, setup.placement, order,
                       {params.sync, params.sharding, params.replication});
}

}  // namespace

absl::StatusOr<Schedule> GenerateGpipe(const ScheduleParams& params) {
  auto key = [](int, int m) { return int64_t{m}; };
  return Linear(params, 1, /*backward_first=*/false, {}, key, key);
}

absl::StatusOr<Schedule> GenerateOneFOneB(const ScheduleParams& params) {
  const int d = params.depth;
  std::vector<int> limit(d);
  for (int i = 0; i < d; ++i) {
    limit[i] = std::min(
        params.policy == WarmupPolicy::kPa ? d - i : 2 * (d - i) - 1,
        params.micro_batches);
  }
  auto key = [](int, int m) { return int64_t{m}; };
  return Linear(params, 1, /*backward_first=*/true, limit, key, key);
}

absl::StatusOr<Schedule> GenerateInterleaved(const ScheduleParams& params) {
  const int d = params.depth;
  const int v = params.chunks;
  const int n = params.micro_batches;
  const int steps = n * v;  // (chunk, micro-batch) pairs per position
  LinearSetup setup = MakeLinear(params, v);
  // Megatron-LM's forward_backward_pipelining_with_interleaving, which this
  // reproduces op for op: step k of a position covers micro-batches in
  // groups of D per chunk (chunk 0 on micro-batches 0..D-1, chunk 1 on the
  // same D, ..., then the next group of D); backward step k walks the
  // chunks in reverse. A position runs its warm-up forwards, then one
  // forward and one backward per step (1F1B), then the cool-down backwards.
  // This order, not a greedy one, is what yields the bubble ratio
  // (D-1)/(N*v+D-1) at unit costs for every N = kD.
  auto op_at = [&params, d, v](OpKind kind, int position, int k) {
    const int group = k / (d * v);
    int chunk = k % (d * v) / d;
    if (kind == OpKind::kBackward) chunk = v - 1 - chunk;
    return Op(kind, {chunk, position}, group * d + k % d, params.recompute);
  };
  std::vector<std::vector<ComputeOp>> order(d);
  for (int i = 0; i < d; ++i) {
    // Megatron: (D-i-1)*2 + (v-1)*D warm-up forwards when interleaving; all
    // forwards first when N = D; the plain 1F1B warm-up D-i-1 for v = 1.
    int warmup = v == 1 ? d - i - 1 : (d - i - 1) * 2 + (v - 1) * d;
    if (v > 1 && n == d) warmup = steps;
    warmup = std::min(warmup, steps);
    std::vector<ComputeOp>& ops = order[i];
    for (int k = 0; k < warmup; ++k) ops.push_back(op_at(OpKind::kForward, i, k));
    for (int k = 0; k < steps; ++k) {
      if (warmup + k < steps) {
        ops.push_back(op_at(OpKind::kForward, i, warmup + k));
      }
      ops.push_back(op_at(OpKind::kBackward, i, k));
    }
  }
  ASSIGN_OR_RETURN(order, TimeFixedOrder(setup.topology, setup.placement,
                                         params.backward_slots, order));
  return BuildPrograms(setup.topology, setup.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

absl::StatusOr<Schedule> GenerateBreadthFirst(const ScheduleParams& params) {
  const int n = params.micro_batches;
  const int v = params.chunks;
  auto forward_key = [n](int c, int m) { return int64_t{c} * n + m; };
  auto backward_key = [n, v](int c, int m) {
    return int64_t{v - 1 - c} * n + m;
  };
  return Linear(params, v, /*backward_first=*/false, {}, forward_key,
                backward_key);
}

}  // namespace chimera::schedule
