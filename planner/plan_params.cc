#include "planner/plan_params.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "jobspec/job_validator.h"
#include "planner/stage_partition.h"
#include "schedule/params_proto.h"
#include "schedule/schedule_params.h"

namespace chimera::planner {

using schedule::SetScheduleParams;

namespace {

// The even split, or with a replication one where each stage takes blocks
// in proportion to its workers: the even split over all the pipeline's
// workers, a stage's workers' shares joined (when there are blocks enough).
std::vector<BlockRange> FixedPartition(int num_blocks, int stages,
                                       const std::vector<int>& replication) {
  const int workers =
      std::accumulate(replication.begin(), replication.end(), 0);
  if (replication.empty() || workers > num_blocks) {
    return EvenPartition(num_blocks, stages);
  }
  const std::vector<BlockRange> shares = EvenPartition(num_blocks, workers);
  std::vector<BlockRange> ranges;
  size_t next = 0;
  for (int replicas : replication) {
    BlockRange& range = ranges.emplace_back(shares[next]);
    for (int k = 1; k < replicas; ++k) {
      range.num_blocks += shares[next + k].num_blocks;
    }
    next += replicas;
  }
  return ranges;
}

}  // namespace

std::optional<chimera::v1::Plan> FixedPlan(const chimera::v1::TrainJob& job) {
  const auto& spec = job.spec();
  schedule::SpecParams fixed;
  if (!schedule::ScheduleParamsFromSpec(spec.parallelism(), spec.training(), &fixed)
           .empty() ||
      !fixed.FixesSchedule()) {
    return std::nullopt;
  }
  const schedule::ScheduleParams& p = fixed.params;
  const int global = spec.training().global_batch_size();

  chimera::v1::Plan plan;
  SetScheduleParams(p, global / (p.width * p.micro_batches), &plan);
  const int stages = schedule::ModelStageCount(p);
  const std::vector<BlockRange> ranges =
      FixedPartition(spec.model().num_layers(), stages, p.replication);
  for (int s = 0; s < stages; ++s) {
    auto* range = plan.add_partition();
    range->set_stage(s);
    range->set_first_layer(ranges[s].first_block);
    range->set_num_layers(ranges[s].num_blocks);
  }
  return plan;
}

int MinimumWorkers(const chimera::v1::TrainJob& job) {
  const auto& spec = job.spec();
  if (spec.resources().workers() > 0) return spec.resources().workers();
  const int per_pipeline =
      std::max(jobspec::WorkersPerPipeline(spec.parallelism()), 1);
  const int width = std::max(spec.parallelism().data(), 1);
  return per_pipeline * width;
}

int WorkersToUse(const chimera::v1::TrainJob& job, int available) {
  const int minimum = MinimumWorkers(job);
  if (available < minimum) return 0;
  const auto& spec = job.spec();
  const bool fixed_count =
      spec.resources().workers() > 0 ||
      (jobspec::WorkersPerPipeline(spec.parallelism()) > 0 &&
       spec.parallelism().data() > 0);
  // Otherwise any multiple of the one that is fixed (or of 1).
  return fixed_count ? minimum : available / minimum * minimum;
}

chimera::v1::TrainJob ShrunkJob(chimera::v1::TrainJob job, int workers) {
  job.mutable_spec()->clear_parallelism();
  job.mutable_spec()->mutable_resources()->set_workers(workers);
  job.mutable_spec()->mutable_resources()->clear_min_workers();
  return job;
}

}  // namespace chimera::planner
