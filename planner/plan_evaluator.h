// Predicts one candidate plan: iteration time, throughput, bubble ratio and
// per-worker peak memory, by generating the candidate's schedule and running
// the schedule engine's simulator with costs from the model profile and the
// placement's links. The prediction is the simulator's makespan for that
// program and those costs: one model, not two.
//
//   PlanningContext context{job, cluster.spec(), profile};
//   ASSIGN_OR_RETURN(Evaluation e, EvaluateCandidate(context, candidate));
//   e.plan.prediction().samples_per_second();
#ifndef CHIMERA_PLANNER_PLAN_EVALUATOR_H_
#define CHIMERA_PLANNER_PLAN_EVALUATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/plan.pb.h"
#include "chimera/v1/profile.pb.h"
#include "planner/model_profile.h"
#include "planner/placement.h"
#include "planner/stage_partition.h"
#include "schedule/program.h"
#include "schedule/schedule_params.h"
#include "schedule/simulator.h"

namespace chimera::planner {

// Data-parallel replicas simulated explicitly while searching: two are
// enough for every stage to have its allreduce in the program; the others
// are identical and enter only through the allreduce group size and links.
inline constexpr int kSimulatedWidth = 2;

struct PlanningContext {
  const chimera::v1::TrainJob& job;
  const chimera::v1::ClusterSpec& cluster;
  const chimera::v1::ModelProfile& profile;
  // Optional: shared stage splits of `profile` across many evaluations.
  PartitionCache* partitions = nullptr;
  // Simulate every data-parallel replica, the program that runs, rather
  // than two (the others are identical and enter only through the allreduce
  // groups): the search's final ranking does, for its best candidates.
  bool full_width = false;
};

struct Candidate {
  // Scheme, W, D, N and the scheme's own knobs.
  schedule::ScheduleParams params;
  int micro_batch_size = 1;
  PlacementPolicy placement = PlacementPolicy::kFreshFirst;
  // Blocks of each model stage; empty: the balanced split of the profile.
  std::vector<BlockRange> partition;
};

struct Evaluation {
  // Scheme, sizes, partition, placement and prediction.
  chimera::v1::Plan plan;
  bool fits = false;
  // What the explanation of a ranking compares.
  // Busy time of the slowest worker but its update, per sample.
  double compute_seconds_per_sample = 0;
  double recompute_seconds = 0;           // per worker per iteration
  // The slowest worker's optimizer update, sharded or not, per iteration.
  double update_seconds = 0;
  // The largest micro-batch that fits with its scheme, W, D, pipelines and
  // recomputation: what Chimera's paper picks without a search (section
  // 3.4). Set by the search, which tries the smaller ones too.
  bool largest_fitting_micro_batch = false;
};

// What EvaluateCandidate simulates: the candidate's program (two
// data-parallel replicas at most, unless the context asks for its full
// width; the others only enlarge allreduce groups) and the costs of every op
// under the candidate's partition and placement.
struct SimulationInputs {
  schedule::Schedule program;
  schedule::CostModel costs;
  // Blocks of every model stage, and what each costs at the candidate's
  // micro-batch size.
  std::vector<BlockRange> partition;
  std::vector<StageProfile> stages;
  // Per rank of the full W x D plan.
  std::vector<DeviceSlot> slots;
  // Per model stage: the workers holding it in the whole plan (its gradient
  // group, over which a sharded stage splits its optimizer state).
  std::vector<int> group_sizes;
};

absl::StatusOr<SimulationInputs> PrepareSimulation(const PlanningContext& context,
                                                   const Candidate& candidate);

// Bytes of optimizer state per byte of parameters: AdamW keeps two moments,
// SGD one momentum buffer (none without momentum).
double OptimizerStateFactor(const chimera::v1::OptimizerSpec& optimizer);

absl::StatusOr<Evaluation> EvaluateCandidate(const PlanningContext& context,
                                             const Candidate& candidate);

// The candidate `plan` describes: its scheme and knobs, micro-batch size and
// partition, placed by the default policy. INVALID_ARGUMENT for a plan whose
// scheme or knobs the schedule engine refuses.
absl::StatusOr<Candidate> CandidateOf(const chimera::v1::Plan& plan);

// What the models predict for `plan` as it is (scheme, sizes and partition
// fixed by the job, not searched), so that a job that fixes its plan can be
// compared with what it measures like any planned one.
absl::StatusOr<chimera::v1::Prediction> PredictPlan(
    const PlanningContext& context, const chimera::v1::Plan& plan);

// "chimera W=2 D=4 B=8 N=4 pipelines=2 direct": the candidate in one phrase.
std::string DescribePlan(const chimera::v1::Plan& plan);
// Just the scheme's own knobs and the sharding: "pipelines=2 direct", "pa",
// "K=2 G=1", "v=2 sharding=optimizer".
std::string DescribeSchemeOptions(const chimera::v1::Plan& plan);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_PLAN_EVALUATOR_H_
