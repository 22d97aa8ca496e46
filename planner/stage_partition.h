// Splitting a model's transformer blocks into D pipeline stages.
//
// Blocks are equal, but the first stage also runs the embedding and the last
// the head (final norm, vocabulary projection and loss), so an even split
// can leave the end stages slower. BalancedPartition searches contiguous
// splits with DAPPLE's dynamic program, scoring each with DAPPLE's
// pivot-stage pipeline latency (eq. 1-3), and keeps the even split whenever
// it is as fast.
//
//   std::vector<BlockRange> stages = BalancedPartition(profile, 4, 8, 16);
#ifndef CHIMERA_PLANNER_STAGE_PARTITION_H_
#define CHIMERA_PLANNER_STAGE_PARTITION_H_

#include <map>
#include <tuple>
#include <vector>

#include "chimera/v1/profile.pb.h"
#include "planner/model_profile.h"

namespace chimera::planner {

struct StageTime {
  double forward = 0;
  double backward = 0;
};

// DAPPLE eq. 1-3 for M micro-batches: warm-up (forwards up to the pivot
// stage Q), steady phase (M - 1 forward+backward pairs of Q) and ending
// phase (backwards from Q back to stage 0), with Q chosen by DAPPLE's
// Algorithm 1. Allreduce is not part of it: the simulator models that.
double PipelineLatency(const std::vector<StageTime>& stages, int micro_batches);

// `num_stages` contiguous ranges covering `num_blocks` blocks, each of
// num_blocks / num_stages blocks (the first stages take one more when it
// does not divide). Requires 1 <= num_stages <= num_blocks.
std::vector<BlockRange> EvenPartition(int num_blocks, int num_stages);

// The split of the profile's blocks into `num_stages` stages with the
// lowest PipelineLatency at `micro_batch_size` x `micro_batches`.
std::vector<BlockRange> BalancedPartition(
    const chimera::v1::ModelProfile& profile, int num_stages,
    int micro_batch_size, int micro_batches);

// Memoizes BalancedPartition for one profile: a search asks for the same
// split under many schemes, knobs and placements. Not thread-safe.
class PartitionCache {
 public:
  // `profile` must outlive the cache.
  explicit PartitionCache(const chimera::v1::ModelProfile& profile)
      : profile_(profile) {}
  PartitionCache(const PartitionCache&) = delete;
  PartitionCache& operator=(const PartitionCache&) = delete;

  const std::vector<BlockRange>& Get(int num_stages, int micro_batch_size,
                                     int micro_batches);

 private:
  const chimera::v1::ModelProfile& profile_;
  std::map<std::tuple<int, int, int>, std::vector<BlockRange>> splits_;
};

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_STAGE_PARTITION_H_
