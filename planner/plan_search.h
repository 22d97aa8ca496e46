// The planner's search: every scheme the schedule engine supports x every
// W x D = P (and for 1F1B DAPPLE's uneven stage replications, W pipelines
// of 2 or 3 stages on up to 8 workers each, such as 2:1; a job may fix one)
// x micro-batch size x the scheme's knobs (pipelines 2f and
// concatenation for Chimera, K and Gamma for MixPipe, loops v, warm-up
// policy) x recomputation x placement policy, minus what the job fixes;
// each candidate is evaluated by EvaluateCandidate (simulator + memory
// model), those that do not fit device memory are dropped, the rest ranked
// by predicted throughput. Searching simulates two data-parallel replicas of
// each candidate; the best kFullWidthCandidates are then simulated at their
// full width, the programs that would run, and ranked again.
//
// Every scheme searches every power-of-two micro-batch size, Chimera too:
// its paper's greedy choice (the largest that fits) assumes at least D
// micro-batches, which a small mini-batch does not give. The explanation
// says when that choice wins.
//
//   ASSIGN_OR_RETURN(SearchResult result,
//                    SearchPlans(job, cluster, profile, {.top_k = 5}));
//   result.ranked[0].plan;  // the best plan
#ifndef CHIMERA_PLANNER_PLAN_SEARCH_H_
#define CHIMERA_PLANNER_PLAN_SEARCH_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/cluster.pb.h"
#include "chimera/v1/job.pb.h"
#include "chimera/v1/profile.pb.h"
#include "planner/plan_evaluator.h"

namespace chimera::planner {

// How many of the best candidates the final ranking simulates at their full
// data-parallel width (SearchPlans).
inline constexpr int kFullWidthCandidates = 5;

struct SearchOptions {
  // How many fitting plans to return, best first.
  int top_k = 10;
  // Asked before each candidate; once it returns true the search ends with
  // CANCELLED (a caller whose deadline passed wants no answer). Empty: never.
  std::function<bool()> cancelled;
};

struct SearchResult {
  // Plans that fit, best (highest predicted samples/s) first, at most top_k.
  std::vector<Evaluation> ranked;
  // Candidates evaluated, fitting or not.
  int evaluated = 0;
  // Why ranked[0] beats ranked[1], in one sentence; empty with fewer than two.
  std::string why_best;
};

// The job must be valid (jobspec::ValidateJob), the profile must describe
// its model. Uses resources.workers devices (all of the cluster's when 0),
// each with the smaller of its memory and resources.memoryBytesPerWorker.
// FAILED_PRECONDITION when nothing fits, naming the smallest peak memory any
// candidate needs; INVALID_ARGUMENT when the job's fixed choices leave no
// candidate at all (e.g. a micro-batch size that does not divide the batch);
// CANCELLED once options.cancelled says so.
// Why `best` ranks above `runner_up`, in one sentence: by how much its
// predicted throughput is higher and what makes it so, or that the two tie.
std::string ExplainRanking(const Evaluation& best, const Evaluation& runner_up);

absl::StatusOr<SearchResult> SearchPlans(const chimera::v1::TrainJob& job,
                                         const chimera::v1::Cluster& cluster,
                                         const chimera::v1::ModelProfile& profile,
                                         const SearchOptions& options);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_PLAN_SEARCH_H_
