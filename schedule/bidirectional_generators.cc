#include "schedule/bidirectional_generators.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/list_scheduler.h"
#include "schedule/program_builder.h"

namespace chimera::schedule {

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

ComputeOp SlotOp(OpKind kind, StageRef ref, MicroBatches mbs, int64_t slot) {
  ComputeOp op;
  op.op = kind;
  op.ref = ref;
  op.micro_batches = std::move(mbs);
  op.grid_start = slot;
  op.grid_end = slot + 1;
  return op;
}

namespace {

// One basic unit of Chimera's concatenation (section 3.5): D forward items
// (or fewer in a last, partial unit) split over the 2f pipelines, each item
// answered by `backward_chunks` backward ops.
//  - direct: an item is one micro-batch, one backward chunk;
//  - forward doubling: an item is two micro-batches run by one forward, then
//    two backward chunks, one micro-batch each, with recomputation;
//  - backward halving: an item is one micro-batch, then two backward chunks,
//    one half micro-batch each (part 0, then part 1, of 2).
struct BasicUnit {
  Concat method = Concat::kDirect;
  std::vector<MicroBatches> items;
  int backward_chunks() const { return method == Concat::kDirect ? 1 : 2; }
};

// Direct concatenation: units of D micro-batches. Forward doubling: units of
// 2D micro-batches in D doubled items; a residual of at most D micro-batches
// is a direct unit (the paper's residual unit for odd N/D), a larger one a
// partial doubled unit whose last item may hold one micro-batch. Backward
// halving: units of D micro-batches, every backward in halves.
std::vector<BasicUnit> ChimeraUnits(const ScheduleParams& params) {
  const int d = params.depth;
  const int n = params.micro_batches;
  const bool equalizing = n > d && params.concat != Concat::kDirect;
  const Concat method = equalizing ? params.concat : Concat::kDirect;
  const int per_item = method == Concat::kForwardDoubling ? 2 : 1;
  std::vector<BasicUnit> units;
  for (int first = 0; first < n;) {
    BasicUnit& unit = units.emplace_back();
    unit.method = method;
    int width = per_item;
    if (method == Concat::kForwardDoubling && n - first <= d) {
      unit.method = Concat::kDirect;
      width = 1;
    }
    const int end = std::min(n, first + d * width);
    for (int mb = first; mb < end; mb += width) {
      MicroBatches& item = unit.items.emplace_back();
      for (int k = mb; k < std::min(end, mb + width); ++k) item.push_back(k);
    }
    first = end;
  }
  return units;
}

// The backward op of `item` in backward chunk `j`; nullopt when a partial
// doubled item has no second micro-batch.
std::optional<ComputeOp> ChunkBackward(const ScheduleParams& params,
                                       const BasicUnit& unit,
                                       const MicroBatches& item, int j,
                                       StageRef ref, int64_t slot) {
  ComputeOp op = SlotOp(OpKind::kBackward, ref, {item[0]}, slot);
  op.recompute = params.recompute;
  switch (unit.method) {
    case Concat::kDirect:
      break;
    case Concat::kForwardDoubling:
      if (j >= static_cast<int>(item.size())) return std::nullopt;
      op.micro_batches = {item[j]};
      op.recompute = true;
      break;
    case Concat::kBackwardHalving:
      op.part = j;
      op.num_parts = 2;
      break;
  }
  return op;
}

}  // namespace

// Chimera's order on the unit-time grid where every op of an equalized unit
// (a forward item, a backward chunk's op) takes one slot: the m-th item of a
// pipeline runs forward on stage s at slot 2m + s and its backward chunk j
// at slot 2m + (2+j)D - 1 - s. For even D, on every position the ops of one
// unit fill two interleaved arithmetic progressions of step 2, one per slot
// parity (down forwards, then up backwards chunk by chunk; up forwards, then
// down backwards), so the merge is conflict-free; a unit with c backward
// chunks advances both progressions by (1+c)D slots, which is where the next
// unit starts, so units concatenate with no bubble between them. That
// leaves only the first unit's D/2-1 start and the last unit's D/2-1 end
// bubbles per position: with c = 1 this is the design's direct merge; with
// c = 2 it is the paper's two backward chunks concatenated (Fig. 7(c)) with
// the start bubbles halved (Fig. 7(d)). Orders whose real op lengths differ
// from the grid are timed by TimeFixedOrder, which proves them executable.
absl::StatusOr<std::vector<std::vector<ComputeOp>>> ChimeraSlotOrder(
    const ScheduleParams& params, const Bidirectional& b) {
  const int d = params.depth;
  const int f = b.topology.num_chunks / 2;
  std::vector<std::vector<ComputeOp>> order(d);
  int64_t offset = 0;
  for (const BasicUnit& unit : ChimeraUnits(params)) {
    const int chunks = unit.backward_chunks();
    const auto routed =
        RouteUnits(static_cast<int>(unit.items.size()), d, 2 * f)[0];
    for (int chunk = 0; chunk < 2 * f; ++chunk) {
      const std::vector<int>& items = routed[chunk];
      for (int m = 0; m < static_cast<int>(items.size()); ++m) {
        const MicroBatches& item = unit.items[items[m]];
        for (int s = 0; s < d; ++s) {
          const StageRef ref{chunk, s};
          const int p = b.placement.At(ref);
          order[p].push_back(
              SlotOp(OpKind::kForward, ref, item, offset + 2 * m + s));
          for (int j = 0; j < chunks; ++j) {
            const int64_t slot = offset + 2 * m + int64_t{2 + j} * d - 1 - s;
            if (std::optional<ComputeOp> backward =
                    ChunkBackward(params, unit, item, j, ref, slot)) {
              order[p].push_back(*std::move(backward));
            }
          }
        }
      }
    }
    offset += int64_t{1 + chunks} * d;
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
  return order;
}

absl::StatusOr<Schedule> GenerateChimera(const ScheduleParams& params) {
  const Bidirectional b = MakeBidirectional(params, params.pipelines / 2);
  ASSIGN_OR_RETURN(std::vector<std::vector<ComputeOp>> order,
                   ChimeraSlotOrder(params, b));
  // Direct units keep the design's forward = backward grid, whose gaps the
  // eager-sync rule reads; equalized units differ in real op lengths
  // (doubled forwards, recomputing backwards), so their grid is retimed.
  const bool equalized =
      params.micro_batches > params.depth && params.concat != Concat::kDirect;
  if (equalized) {
    ASSIGN_OR_RETURN(order, TimeFixedOrder(b.topology, b.placement,
                                           params.backward_slots, order));
  }
  return BuildPrograms(b.topology, b.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
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
      scheduler.Add(SlotOp(OpKind::kForward, {chunk, s}, {m}, 0), 2 * chunk,
                    kLaterPriority + m, s == 0 ? admit[chunk] : kNoAdmission);
      ComputeOp backward = SlotOp(OpKind::kBackward, {chunk, s}, {m}, 0);
      backward.recompute = params.recompute;
      scheduler.Add(backward, 2 * chunk + 1, m);
    }
  }
  ASSIGN_OR_RETURN(auto order, scheduler.Run());
  return BuildPrograms(b.topology, b.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

}  // namespace chimera::schedule
