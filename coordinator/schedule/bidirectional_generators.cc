#include "coordinator/schedule/bidirectional_generators.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "coordinator/schedule/list_scheduler.h"
#include "coordinator/schedule/program_builder.h"

namespace chimera::schedule {
namespace {

constexpr int64_t kLater = int64_t{1} << 40;

struct Bidirectional {
  Topology topology;
  Placement placement;
};

// 2f replicas: down pipeline i = chunk 2i, up pipeline i = chunk 2i+1.
Bidirectional MakeBidirectional(const ScheduleParams& params, int f) {
  const int d = params.depth;
  Bidirectional b;
  b.topology.depth = d;
  b.topology.num_chunks = 2 * f;
  b.topology.layout = ChunkLayout::kReplicas;
  b.topology.micro_batches = params.micro_batches;
  b.topology.width = params.width;
  b.placement.position.assign(2 * f, std::vector<int>(d));
  for (int i = 0; i < f; ++i) {
    for (int s = 0; s < d; ++s) {
      const int down = (s + i * d / f) % d;
      b.placement.position[2 * i][s] = down;
      b.placement.position[2 * i + 1][s] = d - 1 - down;
    }
  }
  return b;
}

// Splits items 0..count-1 into basic units of `unit_size`, and each unit
// over `pipelines` pipelines as evenly as possible, in contiguous blocks
// (the first pipelines take the remainder). Result [unit][pipeline] lists
// item ids in order.
std::vector<std::vector<std::vector<int>>> RouteUnits(int count, int unit_size,
                                                      int pipelines) {
  std::vector<std::vector<std::vector<int>>> units;
  for (int first = 0; first < count; first += unit_size) {
    const int size = std::min(unit_size, count - first);
    std::vector<std::vector<int>>& unit = units.emplace_back(pipelines);
    int next = first;
    for (int p = 0; p < pipelines; ++p) {
      const int share = size / pipelines + (p < size % pipelines ? 1 : 0);
      for (int k = 0; k < share; ++k) unit[p].push_back(next++);
    }
  }
  return units;
}

ComputeOp Op(OpKind kind, StageRef ref, MicroBatches mbs, int64_t slot) {
  ComputeOp op;
  op.op = kind;
  op.ref = ref;
  op.micro_batches = std::move(mbs);
  op.grid_start = slot;
  op.grid_end = slot + 1;
  return op;
}

// The slot-grid merge of 1F1B pipelines (see GenerateChimera's contract).
absl::StatusOr<Schedule> ChimeraDirect(const ScheduleParams& params, int f) {
  const int d = params.depth;
  Bidirectional b = MakeBidirectional(params, f);
  std::vector<std::vector<ComputeOp>> order(d);
  const auto units = RouteUnits(params.micro_batches, d, 2 * f);
  for (size_t u = 0; u < units.size(); ++u) {
    const int64_t offset = int64_t{2} * d * static_cast<int64_t>(u);
    for (int chunk = 0; chunk < 2 * f; ++chunk) {
      const std::vector<int>& mbs = units[u][chunk];
      for (int m = 0; m < static_cast<int>(mbs.size()); ++m) {
        for (int s = 0; s < d; ++s) {
          const int p = b.placement.At({chunk, s});
          order[p].push_back(
              Op(OpKind::kForward, {chunk, s}, {mbs[m]}, offset + 2 * m + s));
          ComputeOp backward = Op(OpKind::kBackward, {chunk, s}, {mbs[m]},
                                  offset + 2 * m + 2 * d - 1 - s);
          backward.recompute = params.recompute;
          order[p].push_back(backward);
        }
      }
    }
  }
  for (int p = 0; p < d; ++p) {
    std::sort(order[p].begin(), order[p].end(),
              [](const ComputeOp& a, const ComputeOp& b) {
                return a.grid_start < b.grid_start;
              });
    for (size_t i = 1; i < order[p].size(); ++i) {
      if (order[p][i].grid_start == order[p][i - 1].grid_start) {
        return absl::InternalError(absl::StrCat(
            "chimera merge put two ops on position ", p, " at slot ",
            order[p][i].grid_start));
      }
    }
  }
  return BuildPrograms(b.topology, b.placement, order, params.sync);
}

// Chimera with forward doubling / backward halving (§3.5), ordered by the
// list scheduler. An "item" is what one
// forward op covers: one micro-batch, or two with doubling; with halving its
// backward runs as two half micro-batches. Items form basic units of D,
// split over the pipelines; each pipeline runs 1F1B, backward first, with
// at most min(D-s, D/2f) items in flight on stage s.
absl::StatusOr<Schedule> ChimeraListScheduled(const ScheduleParams& params,
                                              int f) {
  const int d = params.depth;
  const int n = params.micro_batches;
  const bool doubling = params.concat == Concat::kForwardDoubling;
  const bool halving = params.concat == Concat::kBackwardHalving;
  Bidirectional b = MakeBidirectional(params, f);
  ListScheduler scheduler(b.topology, b.placement, params.backward_slots);
  const int per_pipeline = d / (2 * f);
  std::vector<std::vector<int>> group(2 * f, std::vector<int>(d));
  for (int c = 0; c < 2 * f; ++c) {
    for (int s = 0; s < d; ++s) {
      group[c][s] = scheduler.AddAdmissionGroup(std::min(d - s, per_pipeline));
    }
  }
  const int items = doubling ? (n + 1) / 2 : n;
  int64_t seq = 0;
  for (const auto& unit : RouteUnits(items, d, 2 * f)) {
    for (int chunk = 0; chunk < 2 * f; ++chunk) {
      for (int item : unit[chunk]) {
        MicroBatches mbs = {doubling ? 2 * item : item};
        if (doubling && 2 * item + 1 < n) mbs.push_back(2 * item + 1);
        ++seq;
        for (int s = 0; s < d; ++s) {
          scheduler.Add(Op(OpKind::kForward, {chunk, s}, mbs, 0), 2 * chunk,
                        kLater + seq, group[chunk][s]);
          const int parts = halving ? 2 : 1;
          for (int mb : mbs) {
            for (int part = 0; part < parts; ++part) {
              ComputeOp backward = Op(OpKind::kBackward, {chunk, s}, {mb}, 0);
              backward.part = part;
              backward.num_parts = parts;
              backward.recompute = doubling || params.recompute;
              scheduler.Add(backward, 2 * chunk + 1, seq);
            }
          }
        }
      }
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(b.topology, b.placement, order, params.sync);
}

}  // namespace

absl::StatusOr<Schedule> GenerateChimera(const ScheduleParams& params) {
  const int f = params.pipelines / 2;
  const bool equalizing = params.micro_batches > params.depth &&
                          params.concat != Concat::kDirect;
  return equalizing ? ChimeraListScheduled(params, f)
                    : ChimeraDirect(params, f);
}

absl::StatusOr<Schedule> GenerateGems(const ScheduleParams& params) {
  const int d = params.depth;
  Bidirectional b = MakeBidirectional(params, 1);
  ListScheduler scheduler(b.topology, b.placement, params.backward_slots);
  const int admit[2] = {scheduler.AddAdmissionGroup(1),
                        scheduler.AddAdmissionGroup(1)};
  for (int m = 0; m < params.micro_batches; ++m) {
    const int chunk = m % 2;
    for (int s = 0; s < d; ++s) {
      scheduler.Add(Op(OpKind::kForward, {chunk, s}, {m}, 0), 2 * chunk,
                    kLater + m, s == 0 ? admit[chunk] : kNoAdmission);
      ComputeOp backward = Op(OpKind::kBackward, {chunk, s}, {m}, 0);
      backward.recompute = params.recompute;
      scheduler.Add(backward, 2 * chunk + 1, m);
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(b.topology, b.placement, order, params.sync);
}

absl::StatusOr<Schedule> GenerateMixPipe(const ScheduleParams& params) {
  const int d = params.depth;
  const int k = params.mixpipe_k;
  // K = D with no early forwards is Chimera itself (MixPipe section IV:
  // "K = D and Gamma = 0"), makespan 5D-4 at backward = 2x forward, which
  // the paper's 8D-3K-4-3*Gamma reproduces; use Chimera's exact order.
  if (k == d && params.mixpipe_gamma == 0) {
    ScheduleParams chimera = params;
    chimera.concat = Concat::kDirect;
    return ChimeraDirect(chimera, /*f=*/1);
  }
  Bidirectional b = MakeBidirectional(params, 1);
  ListScheduler scheduler(b.topology, b.placement, params.backward_slots);
  const int admit[2] = {scheduler.AddAdmissionGroup(k / 2),
                        scheduler.AddAdmissionGroup(k / 2)};
  // Pipelines take turns at the post-warm-up forwards that the middle
  // workers advance: (local index K/2, down), (K/2, up), (K/2+1, down), ...
  auto advanced = [&](int chunk, int local, int position) {
    if (position != d / 2 - 1 && position != d / 2) return false;
    const int turn = (local - k / 2) * 2 + chunk;
    return local >= k / 2 && turn < params.mixpipe_gamma;
  };
  int64_t seq = 0;
  std::vector<int> local_count(2, 0);
  for (const auto& unit : RouteUnits(params.micro_batches, d, 2)) {
    for (int chunk = 0; chunk < 2; ++chunk) {
      for (int mb : unit[chunk]) {
        ++seq;
        const int local = local_count[chunk]++;
        for (int s = 0; s < d; ++s) {
          const int position = b.placement.At({chunk, s});
          const int64_t priority =
              advanced(chunk, local, position) ? -kLater + seq : kLater + seq;
          scheduler.Add(Op(OpKind::kForward, {chunk, s}, {mb}, 0), 2 * chunk,
                        priority, s == 0 ? admit[chunk] : kNoAdmission);
          ComputeOp backward = Op(OpKind::kBackward, {chunk, s}, {mb}, 0);
          backward.recompute = params.recompute;
          scheduler.Add(backward, 2 * chunk + 1, seq);
        }
      }
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(b.topology, b.placement, order, params.sync);
}

}  // namespace chimera::schedule
