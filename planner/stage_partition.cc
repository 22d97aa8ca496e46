#include "planner/stage_partition.h"

#include <cmath>
#include <limits>

namespace chimera::planner {
namespace {

// Forward and backward time of any contiguous block range in O(1), from
// prefix sums over the blocks at one micro-batch size.
class RangeTimer {
 public:
  RangeTimer(const chimera::v1::ModelProfile& profile, int micro_batch_size) {
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

  std::vector<StageTime> Times(const std::vector<BlockRange>& ranges) const {
    std::vector<StageTime> times;
    for (const BlockRange& range : ranges) {
      const int end = range.first_block + range.num_blocks;
      times.push_back({forward_[end] - forward_[range.first_block],
                       backward_[end] - backward_[range.first_block]});
    }
    times.front().forward += embedding_.forward_seconds;
    times.front().backward += embedding_.backward_seconds;
    times.back().forward += head_.forward_seconds;
    times.back().backward += head_.backward_seconds;
    return times;
  }

 private:
  std::vector<double> forward_, backward_;
  LayerCost embedding_, head_;
};

// DAPPLE Algorithm 1: walk from the last stage towards the first and move
// the pivot to stage s when s's steady phase outlasts the current pivot's
// plus everything between them.
int PivotStage(const std::vector<StageTime>& stages, int micro_batches) {
  const int last = static_cast<int>(stages.size()) - 1;
  int pivot = last;
  for (int s = last - 1; s >= 0; --s) {
    const double candidate =
        (micro_batches - 1) * (stages[s].forward + stages[s].backward);
    double current =
        (micro_batches - 1) * (stages[pivot].forward + stages[pivot].backward);
    for (int between = s + 1; between < pivot; ++between) {
      current += stages[between].forward + stages[between].backward;
    }
    if (candidate > current) pivot = s;
  }
  return pivot;
}

}  // namespace

double PipelineLatency(const std::vector<StageTime>& stages, int micro_batches) {
  const int pivot = PivotStage(stages, micro_batches);
  double warmup = 0;
  for (int s = 0; s <= pivot; ++s) warmup += stages[s].forward;
  const double steady =
      (micro_batches - 1) * (stages[pivot].forward + stages[pivot].backward);
  // Stages after the pivot finish their last backward before the pivot's;
  // those before it still have to run theirs.
  double ending = 0;
  for (int s = 0; s <= pivot; ++s) ending += stages[s].backward;
  return warmup + steady + ending;
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
    int micro_batch_size, int micro_batches) {
  const int num_blocks = NumBlocks(profile);
  const RangeTimer timer(profile, micro_batch_size);
  std::vector<BlockRange> best = EvenPartition(num_blocks, num_stages);
  double best_latency = PipelineLatency(timer.Times(best), micro_batches);
  if (num_stages == 1) return best;

  // DAPPLE's formula 4 for a fixed stage count: plan[k][j] is the best split
  // of blocks [0, j) into k stages, judged with the remaining blocks as one
  // last stage; each step splits that last stage once more.
  struct Partial {
    std::vector<BlockRange> stages;
    double latency = std::numeric_limits<double>::infinity();
  };
  auto judge = [&](std::vector<BlockRange> stages, int end) {
    stages.push_back({end, num_blocks - end});
    return PipelineLatency(timer.Times(stages), micro_batches);
  };
  std::vector<std::vector<Partial>> plan(
      num_stages, std::vector<Partial>(num_blocks + 1));
  plan[0][0].latency = 0;
  for (int k = 0; k + 1 < num_stages; ++k) {
    for (int j = k; j <= num_blocks; ++j) {
      if (!std::isfinite(plan[k][j].latency)) continue;
      // Leave at least one block for every stage still to come.
      for (int next = j + 1; next + (num_stages - k - 1) <= num_blocks; ++next) {
        std::vector<BlockRange> stages = plan[k][j].stages;
        stages.push_back({j, next - j});
        const double latency = judge(stages, next);
        Partial& slot = plan[k + 1][next];
        if (latency < slot.latency) slot = {std::move(stages), latency};
      }
    }
  }
  for (int j = num_stages - 1; j < num_blocks; ++j) {
    const Partial& partial = plan[num_stages - 1][j];
    if (!std::isfinite(partial.latency)) continue;
    const double latency = judge(partial.stages, j);
    if (latency < best_latency) {
      best = partial.stages;
      best.push_back({j, num_blocks - j});
      best_latency = latency;
    }
  }
  return best;
}

const std::vector<BlockRange>& PartitionCache::Get(int num_stages,
                                                   int micro_batch_size,
                                                   int micro_batches) {
  const auto key = std::make_tuple(num_stages, micro_batch_size, micro_batches);
  auto it = splits_.find(key);
  if (it == splits_.end()) {
    it = splits_
             .emplace(key, BalancedPartition(profile_, num_stages,
                                             micro_batch_size, micro_batches))
             .first;
  }
  return it->second;
}

}  // namespace chimera::planner
