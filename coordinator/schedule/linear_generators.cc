#include "coordinator/schedule/linear_generators.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "coordinator/schedule/list_scheduler.h"
#include "coordinator/schedule/program_builder.h"

namespace chimera::schedule {
namespace {

// Priority offset that puts one op class behind the other.
constexpr int64_t kLater = int64_t{1} << 40;
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
  const int64_t forward_offset = backward_first ? kLater : 0;
  const int64_t backward_offset = backward_first ? 0 : kLater;
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
  return BuildPrograms(setup.topology, setup.placement, order, params.sync);
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
  // Megatron-LM's interleaved 1F1B: position i runs (D-i-1)*2 + (v-1)*D
  // warm-up forwards, so it holds one more than that in flight.
  std::vector<int> limit(d);
  for (int i = 0; i < d; ++i) {
    limit[i] = std::min((d - i - 1) * 2 + (v - 1) * d, n * v) + 1;
  }
  // Sequences of D micro-batches go through chunk 0, then chunk 1, ...;
  // backwards through the chunks in reverse.
  auto forward_key = [d, v](int c, int m) {
    return int64_t{m / d} * d * v + int64_t{c} * d + m % d;
  };
  auto backward_key = [d, v](int c, int m) {
    return int64_t{m / d} * d * v + int64_t{v - 1 - c} * d + m % d;
  };
  return Linear(params, v, /*backward_first=*/true, limit, forward_key,
                backward_key);
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
