// Splitting a model's transformer blocks into D pipeline stages.
//
// Blocks are equal, but the first stage also runs the embedding and the last
// the head (final norm, vocabulary projection and loss), so an even split
// can leave the end stages slower. BalancedPartition finds the contiguous
// split whose slowest stage is fastest (a dynamic program over split points,
// as DAPPLE's planner searches them) and keeps the even split whenever it is
// as fast.
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

// A synchronous pipeline's latency for M micro-batches: one micro-batch
// through every stage and back, then M - 1 more through the slowest stage,
// sum(F_s + B_s) + (M - 1) max(F_s + B_s). It is the 1F1B makespan when
// messages are free and stages equal; otherwise it is above it by the part
// of the first round trip that 1F1B's warm-up forwards hide. DAPPLE's
// pivot-stage formula (eq. 1-3) leaves out the round trip through the stages
// after its pivot, which a split search then exploits. Allreduce is not part
// of it: the simulator models that.
double PipelineLatency(const std::vector<StageTime>& stages, int micro_batches);

// `num_stages` contiguous ranges covering `num_blocks` blocks, each of
// num_blocks / num_stages blocks (the first stages take one more when it
// does not divide). Requires 1 <= num_stages <= num_blocks.
std::vector<BlockRange> EvenPartition(int num_blocks, int num_stages);

// The split of the profile's blocks into `num_stages` stages with the
// lowest PipelineLatency at `micro_batch_size` x `micro_batches`.
// With a `replication` (schedule::Topology::replication), a stage's time
// is what each of its workers spends on a micro-batch: its slices, one
// after another, so a stage on two workers takes about twice the blocks.
// O(num_stages x blocks x the most blocks a stage of that split holds).
std::vector<BlockRange> BalancedPartition(
    const chimera::v1::ModelProfile& profile, int num_stages,
    int micro_batch_size, int micro_batches,
    const std::vector<int>& replication = {});

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
                                     int micro_batches,
                                     const std::vector<int>& replication = {});

 private:
  const chimera::v1::ModelProfile& profile_;
  std::map<std::tuple<int, int, int, std::vector<int>>, std::vector<BlockRange>>
      splits_;
};

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_STAGE_PARTITION_H_
