#include "schedule/mixpipe_generator.h"

#include <algorithm>
#include <array>
#include <optional>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "schedule/bidirectional_generators.h"
#include "schedule/list_scheduler.h"
#include "schedule/program_builder.h"

namespace chimera::schedule {
namespace {

// MixPipe with K < D (or Gamma > 0) and K maximizing.
//
// MixPipe's memory budget (eq. 4) is K + Gamma stashed micro-batches per
// worker. Two orders respect it; a basic unit takes whichever is faster:
//  - the injection grid (InjectionGridOrder): Chimera's slot grid with the
//    pipelines' later micro-batches injected later, so that only K/2 per
//    pipeline overlap at the middle workers;
//  - the budgeted list order (BudgetedOrder): every worker runs ready
//    forwards ahead of ready backwards (2F1B: a forward overtakes a ready
//    backward) while it stashes fewer than K + Gamma micro-batches.

// What every MixPipe order is built for: the placement and the parameters.
struct BudgetedUnitSpec {
  const Bidirectional* b;
  const ScheduleParams* params;
};

ComputeOp UnitOp(const ScheduleParams& params, OpKind kind, StageRef ref,
                 int mb, int64_t slot) {
  ComputeOp op = SlotOp(kind, ref, {mb}, slot);
  op.recompute = kind == OpKind::kBackward && params.recompute;
  return op;
}

int64_t OrderSpan(const std::vector<std::vector<ComputeOp>>& order) {
  int64_t span = 0;
  for (const auto& ops : order) {
    if (!ops.empty()) span = std::max(span, ops.back().grid_end);
  }
  return span;
}

// Most micro-batches stashed at once on any position, from the order alone.
int OrderPeak(const std::vector<std::vector<ComputeOp>>& order) {
  int peak = 0;
  for (const auto& ops : order) {
    int stashed = 0;
    for (const ComputeOp& op : ops) {
      stashed += op.op == OpKind::kForward ? 1 : -1;
      peak = std::max(peak, stashed);
    }
  }
  return peak;
}

// Chimera's unit-time grid (forward of a pipeline's m-th micro-batch on stage
// s at x_m + s, its backward at x_m + 2D-1-s) with injection slots
// x_m = 2m + (D-K)*floor(2m/K): the first K/2 micro-batches of each pipeline
// are injected as in Chimera, every next K/2 wait D-K slots more, which is
// what keeps K micro-batches at the middle workers. Grid slots respect every
// data dependency, so the per-position order (by slot, a backward before a
// forward in a shared slot) cannot deadlock. `k` is even, 2 <= k <= D.
absl::StatusOr<std::vector<std::vector<ComputeOp>>> InjectionGridOrder(
    const BudgetedUnitSpec& spec, const std::vector<std::vector<int>>& routed,
    int k) {
  const int d = spec.b->topology.depth;
  std::vector<std::vector<ComputeOp>> order(d);
  for (int chunk = 0; chunk < 2; ++chunk) {
    for (int m = 0; m < static_cast<int>(routed[chunk].size()); ++m) {
      const int64_t x = 2 * m + int64_t{d - k} * (2 * m / k);
      for (int s = 0; s < d; ++s) {
        const StageRef ref{chunk, s};
        std::vector<ComputeOp>& ops = order[spec.b->placement.At(ref)];
        ops.push_back(UnitOp(*spec.params, OpKind::kForward, ref,
                             routed[chunk][m], x + s));
        ops.push_back(UnitOp(*spec.params, OpKind::kBackward, ref,
                             routed[chunk][m], x + 2 * d - 1 - s));
      }
    }
  }
  for (auto& ops : order) {
    std::sort(ops.begin(), ops.end(),
              [](const ComputeOp& a, const ComputeOp& b) {
                return std::make_tuple(a.grid_start, a.op != OpKind::kBackward,
                                       a.ref.chunk) <
                       std::make_tuple(b.grid_start, b.op != OpKind::kBackward,
                                       b.ref.chunk);
              });
  }
  return TimeFixedOrder(spec.b->topology, spec.b->placement,
                        spec.params->backward_slots, order);
}

// The state of one BudgetedOrder: per (position, chunk) a lane with the next
// forward and backward (indices into routed[chunk]) and the stashed count;
// per (chunk, stage, index) when the forward / backward ends (-1: not
// started).
class BudgetedList {
 public:
  BudgetedList(const BudgetedUnitSpec& spec,
               const std::vector<std::vector<int>>& routed, int budget)
      : params_(*spec.params),
        routed_(routed),
        budget_(budget),
        d_(spec.b->topology.depth),
        backward_len_(params_.backward_slots + (params_.recompute ? 1 : 0)),
        lanes_(d_),
        order_(d_),
        busy_until_(d_, 0) {
    for (int c = 0; c < 2; ++c) {
      const size_t count = routed[c].size();
      forward_end_[c].assign(d_, std::vector<int64_t>(count, -1));
      backward_end_[c].assign(d_, std::vector<int64_t>(count, -1));
      remaining_ += 2 * d_ * count;
      stage_at_[c].resize(d_);
      for (int s = 0; s < d_; ++s)
        stage_at_[c][spec.b->placement.At({c, s})] = s;
    }
  }

  absl::StatusOr<std::vector<std::vector<ComputeOp>>> Run() {
    int64_t last_start = 0;
    for (int64_t t = 0; remaining_ > 0; ++t) {
      for (int p = 0; p < d_; ++p) {
        if (busy_until_[p] > t) continue;
        if (std::optional<Candidate> best = Pick(p, t)) {
          Start(p, t, *best);
          last_start = t;
        }
      }
      if (remaining_ > 0 && t - last_start > backward_len_ + 1) {
        return absl::InternalError(absl::StrCat(
            "mixpipe list order stuck at slot ", t, " with budget ", budget_));
      }
    }
    return std::move(order_);
  }

 private:
  struct Lane {
    int next_forward = 0;
    int next_backward = 0;
    int stashed = 0;
  };
  // (is backward, micro-batch index, chunk), so that the smallest is the
  // one to run: forwards first, then the oldest, then the down pipeline.
  using Candidate = std::tuple<bool, int, int>;

  static bool Done(int64_t end, int64_t t) { return end >= 0 && end <= t; }

  // The op idle position `p` starts at slot `t`, if any is ready and fits
  // the budget.
  std::optional<Candidate> Pick(int p, int64_t t) const {
    const std::array<Lane, 2>& lane = lanes_[p];
    const int stashed = lane[0].stashed + lane[1].stashed;
    std::optional<Candidate> best;
    auto consider = [&best](Candidate candidate) {
      if (!best || candidate < *best) best = candidate;
    };
    for (int c = 0; c < 2; ++c) {
      const int s = stage_at_[c][p];
      const int count = static_cast<int>(routed_[c].size());
      const Lane& other = lane[1 - c];
      const bool other_waits =
          other.stashed == 0 &&
          other.next_backward < static_cast<int>(routed_[1 - c].size());
      const int f = lane[c].next_forward;
      if (f < count && (s == 0 || Done(forward_end_[c][s - 1][f], t)) &&
          stashed + 1 + (other_waits ? 1 : 0) <= budget_) {
        consider({false, f, c});
      }
      const int g = lane[c].next_backward;
      if (g < count && Done(forward_end_[c][s][g], t) &&
          (s == d_ - 1 || Done(backward_end_[c][s + 1][g], t))) {
        consider({true, g, c});
      }
    }
    return best;
  }

  void Start(int p, int64_t t, const Candidate& candidate) {
    const auto [is_backward, index, c] = candidate;
    const int s = stage_at_[c][p];
    const int64_t end = t + (is_backward ? backward_len_ : 1);
    const OpKind kind = is_backward ? OpKind::kBackward : OpKind::kForward;
    order_[p].push_back(UnitOp(params_, kind, {c, s}, routed_[c][index], t));
    order_[p].back().grid_end = end;
    Lane& own = lanes_[p][c];
    if (is_backward) {
      backward_end_[c][s][index] = end;
      ++own.next_backward;
      --own.stashed;
    } else {
      forward_end_[c][s][index] = end;
      ++own.next_forward;
      ++own.stashed;
    }
    busy_until_[p] = end;
    --remaining_;
  }

  const ScheduleParams& params_;
  const std::vector<std::vector<int>>& routed_;
  const int budget_;
  const int d_;
  const int64_t backward_len_;
  std::vector<std::array<Lane, 2>> lanes_;
  std::array<std::vector<std::vector<int64_t>>, 2> forward_end_, backward_end_;
  // The stage of chunk c on position p.
  std::array<std::vector<int>, 2> stage_at_;
  std::vector<std::vector<ComputeOp>> order_;
  std::vector<int64_t> busy_until_;
  size_t remaining_ = 0;
};

// List-schedules `routed[chunk]` (micro-batches in injection order) on the
// real-length grid: each idle position starts a ready forward (the oldest,
// down pipeline first) before a ready backward, and a backward otherwise, as
// long as it then stashes at most `budget` micro-batches. A position keeps
// one of them free for a pipeline that has nothing stashed there but still
// has to pass: the oldest unfinished micro-batch of each pipeline then always
// finds room on its way, so the order never deadlocks (budget >= 2).
absl::StatusOr<std::vector<std::vector<ComputeOp>>> BudgetedOrder(
    const BudgetedUnitSpec& spec, const std::vector<std::vector<int>>& routed,
    int budget) {
  return BudgetedList(spec, routed, budget).Run();
}

// One basic unit's order within a budget of `budget` >= 2 stashed
// micro-batches per worker: the faster of the injection grid (for the even
// K' = min(budget rounded down to even, D), when it keeps to the budget) and
// the budgeted list order; ties go to the grid, which stashes less.
absl::StatusOr<std::vector<std::vector<ComputeOp>>> MixPipeUnitOrder(
    const BudgetedUnitSpec& spec, const std::vector<std::vector<int>>& routed,
    int budget) {
  const int d = spec.b->topology.depth;
  ASSIGN_OR_RETURN(
      auto grid, InjectionGridOrder(spec, routed, std::min(d, budget / 2 * 2)));
  ASSIGN_OR_RETURN(auto listed, BudgetedOrder(spec, routed, budget));
  if (OrderPeak(grid) <= budget && OrderSpan(grid) <= OrderSpan(listed)) {
    return grid;
  }
  return listed;
}

}  // namespace

absl::StatusOr<Schedule> GenerateMixPipe(const ScheduleParams& params) {
  const int d = params.depth;
  const int k = params.mixpipe_k;
  // K = D with no early forwards is Chimera itself (MixPipe section IV:
  // "K = D and Gamma = 0"), makespan 5D-4 at backward = 2x forward, which
  // the paper's 8D-3K-4-3*Gamma reproduces; use Chimera's exact order.
  if (k == d && params.mixpipe_gamma == 0) {
    ScheduleParams chimera = params;
    chimera.pipelines = 2;
    chimera.concat = Concat::kDirect;
    return GenerateChimera(chimera);
  }
  Bidirectional b = MakeBidirectional(params, 1);
  const BudgetedUnitSpec spec{&b, &params};
  std::vector<std::vector<ComputeOp>> order(d);
  if (k > d) {
    // K maximizing (section III-C): one stream of all micro-batches, each
    // worker stashing at most 3D/2 - 1, with no basic units and so no
    // intermediate bubbles between them.
    std::vector<std::vector<int>> routed(2);
    for (const auto& unit : RouteUnits(params.micro_batches, d, 2)) {
      for (int chunk = 0; chunk < 2; ++chunk) {
        routed[chunk].insert(routed[chunk].end(), unit[chunk].begin(),
                             unit[chunk].end());
      }
    }
    ASSIGN_OR_RETURN(order, BudgetedOrder(spec, routed, 3 * d / 2 - 1));
  } else {
    // Basic units of D micro-batches run one after another on every worker
    // (each worker's order is unit 0's ops, then unit 1's, ...), so N = kD
    // takes at most k times one unit and stashes no more than one unit.
    for (const auto& unit : RouteUnits(params.micro_batches, d, 2)) {
      ASSIGN_OR_RETURN(auto unit_order,
                       MixPipeUnitOrder(spec, unit, k + params.mixpipe_gamma));
      for (int p = 0; p < d; ++p) {
        order[p].insert(order[p].end(), unit_order[p].begin(),
                        unit_order[p].end());
      }
    }
  }
  ASSIGN_OR_RETURN(order, TimeFixedOrder(b.topology, b.placement,
                                         params.backward_slots, order));
  return BuildPrograms(b.topology, b.placement, order,
                       {params.sync, params.sharding, /*replication=*/{}});
}

}  // namespace chimera::schedule
