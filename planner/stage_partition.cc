#include "planner/stage_partition.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "schedule/program.h"

namespace chimera::planner {
namespace {

// Forward and backward time of any contiguous block range as stage k of a
// split in O(1), from prefix sums over the blocks at one micro-batch size:
// the range's time on one micro-batch, times `slices_per_worker[k]` where a
// replicated stage's worker runs several slices of each (empty: 1 each).
class RangeTimer {
 public:
  RangeTimer(const chimera::v1::ModelProfile& profile, int micro_batch_size,
             std::vector<double> slices_per_worker = {})
      : slices_per_worker_(std::move(slices_per_worker)) {
    const int blocks = NumBlocks(profile);
    forward_.assign(blocks + 1, 0);
    backward_.assign(blocks + 1, 0);
    for (int b = 0; b < blocks; ++b) {
      const LayerCost cost = CostAt(profile.layers(b + 1), micro_batch_size);
      forward_[b + 1] = forward_[b] + cost.forward_seconds;
      backward_[b + 1] = backward_[b] + cost.backward_seconds;
    }
    embedding_ = CostAt(profile.layers(0), micro_batch_size);
    head_ = CostAt(profile.layers(blocks + 1), micro_batch_size);
  }

  StageTime Time(const BlockRange& range, int stage, int num_stages) const {
    const int end = range.first_block + range.num_blocks;
    StageTime time{forward_[end] - forward_[range.first_block],
                   backward_[end] - backward_[range.first_block]};
    if (stage == 0) {
      time.forward += embedding_.forward_seconds;
      time.backward += embedding_.backward_seconds;
    }
    if (stage + 1 == num_stages) {
      time.forward += head_.forward_seconds;
      time.backward += head_.backward_seconds;
    }
    if (!slices_per_worker_.empty()) {
      time.forward *= slices_per_worker_[stage];
      time.backward *= slices_per_worker_[stage];
    }
    return time;
  }

  // Forward plus backward of blocks [begin, end) as stage `stage`.
  double Seconds(int begin, int end, int stage, int num_stages) const {
    const StageTime time = Time({begin, end - begin}, stage, num_stages);
    return time.forward + time.backward;
  }

  std::vector<StageTime> Times(const std::vector<BlockRange>& ranges) const {
    std::vector<StageTime> times;
    const int num_stages = static_cast<int>(ranges.size());
    for (int s = 0; s < num_stages; ++s) {
      times.push_back(Time(ranges[s], s, num_stages));
    }
    return times;
  }

 private:
  std::vector<double> forward_, backward_;
  LayerCost embedding_, head_;
  std::vector<double> slices_per_worker_;
};

// The time of the fastest slowest stage over the splits of the timer's
// blocks into `num_stages` stages. slowest[j] is that time for blocks
// [0, j) in the stages so far; a new last stage starting at `begin` makes
// it max(previous[begin], its own time). The first part grows with
// `begin` and the second shrinks, so the best start is where they cross,
// and it only moves right as j grows: O(stages x blocks).
double FastestSlowestStage(const RangeTimer& timer, int num_stages,
                           int num_blocks) {
  std::vector<double> slowest(num_blocks + 1);
  for (int j = 1; j <= num_blocks; ++j) {
    slowest[j] = timer.Seconds(0, j, 0, num_stages);
  }
  for (int k = 1; k < num_stages; ++k) {
    const std::vector<double> previous = std::move(slowest);
    slowest.assign(num_blocks + 1, std::numeric_limits<double>::infinity());
    const auto split_at = [&](int begin, int j) {
      return std::max(previous[begin], timer.Seconds(begin, j, k, num_stages));
    };
    int begin = k;
    for (int j = k + 1; j <= num_blocks; ++j) {
      while (begin + 1 < j && split_at(begin + 1, j) <= split_at(begin, j)) {
        ++begin;
      }
      slowest[j] = split_at(begin, j);
    }
  }
  return slowest[num_blocks];
}

// Among the splits into `num_stages` stages of at most `limit` seconds each,
// the most even one: the least sum of squared stage times (many splits share
// the fastest slowest stage, some with nearly empty stages). squares[j] is
// that sum for blocks [0, j) in the stages so far, start[k][j] where the
// last of k + 1 stages begins; a stage over `limit` ends the search for its
// start.
std::vector<BlockRange> MostEvenSplit(const RangeTimer& timer, int num_stages,
                                      int num_blocks, double limit) {
  const double kNone = std::numeric_limits<double>::infinity();
  std::vector<double> squares(num_blocks + 1, kNone);
  std::vector<std::vector<int>> start(num_stages,
                                      std::vector<int>(num_blocks + 1, 0));
  for (int j = 1; j <= num_blocks; ++j) {
    const double seconds = timer.Seconds(0, j, 0, num_stages);
    if (seconds <= limit) squares[j] = seconds * seconds;
  }
  for (int k = 1; k < num_stages; ++k) {
    const std::vector<double> previous = std::move(squares);
    squares.assign(num_blocks + 1, kNone);
    for (int j = k + 1; j <= num_blocks; ++j) {
      for (int begin = j - 1; begin >= k; --begin) {
        const double seconds = timer.Seconds(begin, j, k, num_stages);
        if (seconds > limit) break;
        if (previous[begin] + seconds * seconds < squares[j]) {
          squares[j] = previous[begin] + seconds * seconds;
          start[k][j] = begin;
        }
      }
    }
  }
  std::vector<BlockRange> split(num_stages);
  for (int k = num_stages - 1, end = num_blocks; k >= 0; --k) {
    split[k] = {start[k][end], end - start[k][end]};
    end = start[k][end];
  }
  return split;
}

}  // namespace

double PipelineLatency(const std::vector<StageTime>& stages, int micro_batches) {
  double one_micro_batch = 0;
  double slowest = 0;
  for (const StageTime& stage : stages) {
    one_micro_batch += stage.forward + stage.backward;
    slowest = std::max(slowest, stage.forward + stage.backward);
  }
  return one_micro_batch + (micro_batches - 1) * slowest;
}

std::vector<BlockRange> EvenPartition(int num_blocks, int num_stages) {
  std::vector<BlockRange> ranges;
  int first = 0;
  for (int s = 0; s < num_stages; ++s) {
    const int count = num_blocks / num_stages + (s < num_blocks % num_stages ? 1 : 0);
    ranges.push_back({first, count});
    first += count;
  }
  return ranges;
}

std::vector<BlockRange> BalancedPartition(
    const chimera::v1::ModelProfile& profile, int num_stages,
    int micro_batch_size, int micro_batches,
    const std::vector<int>& replication) {
  const int num_blocks = NumBlocks(profile);
  // A replicated stage's workers each run their slices of every
  // micro-batch, one after another.
  const int slices = schedule::SlicesPerMicroBatch(replication);
  std::vector<double> slices_per_worker;
  for (int replicas : replication) {
    slices_per_worker.push_back(static_cast<double>(slices / replicas));
  }
  const RangeTimer timer(profile, std::max(1, micro_batch_size / slices),
                         std::move(slices_per_worker));
  const std::vector<BlockRange> even = EvenPartition(num_blocks, num_stages);
  if (num_stages == 1) return even;
  // Every split runs the same work once per micro-batch, so the fastest is
  // one whose slowest stage is fastest; of those, the most even.
  const double slowest = FastestSlowestStage(timer, num_stages, num_blocks);
  const std::vector<BlockRange> best =
      MostEvenSplit(timer, num_stages, num_blocks, slowest * (1 + 1e-9));
  // Keep the even split whenever it is as fast.
  return PipelineLatency(timer.Times(best), micro_batches) <
                 PipelineLatency(timer.Times(even), micro_batches)
             ? best
             : even;
}

const std::vector<BlockRange>& PartitionCache::Get(
    int num_stages, int micro_batch_size, int micro_batches,
    const std::vector<int>& replication) {
  const auto key =
      std::make_tuple(num_stages, micro_batch_size, micro_batches, replication);
  auto it = splits_.find(key);
  if (it == splits_.end()) {
    it = splits_
             .emplace(key,
                      BalancedPartition(profile_, num_stages, micro_batch_size,
                                        micro_batches, replication))
             .first;
  }
  return it->second;
}

}  // namespace chimera::planner
