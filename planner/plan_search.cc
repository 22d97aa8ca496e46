#include "planner/plan_search.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "jobspec/job_validator.h"
#include "planner/plan_params.h"
#include "schedule/params_proto.h"

namespace chimera::planner {
namespace {

using schedule::Scheme;
using schedule::ScheduleParam;
using schedule::ScheduleParams;

constexpr Scheme kAllSchemes[] = {
    Scheme::kGpipe,       Scheme::kOneFOneB,     Scheme::kGems,
    Scheme::kChimera,     Scheme::kMixPipe,      Scheme::kInterleaved,
    Scheme::kBreadthFirst, Scheme::kZbH1,        Scheme::kZbH2,
    Scheme::kZbAuto,      Scheme::kZbV,          Scheme::kDualPipeV,
    Scheme::kChimeraZb};
// DAPPLE's non-uniform replications are searched for 1F1B pipelines of up
// to this many stages and workers per pipeline: the compositions grow fast,
// and DAPPLE's own plans replicate within a few stages.
constexpr int kMostReplicatedStages = 3;
constexpr int kMostReplicatedWorkers = 8;
// Looping schemes are tried at 2 and at this many chunks per worker (and
// DeepestLoop beyond it where neither fits).
constexpr int kMostSearchedChunks = 4;
// A difference below this share is not worth naming in the explanation.
constexpr double kNotableDifference = 0.01;
// Throughputs closer than this (relative) tie: Percent shows it as 0.0%.
constexpr double kTie = 0.0005;
// The least predicted gain for which the search shards a plan that fits
// unsharded (see ClearlyFaster).
constexpr double kShardingGain = 0.05;
// Placement is refined for the best plans only; this is where they start.
constexpr PlacementPolicy kFirstPlacement = PlacementPolicy::kReplicasTogether;

// The values to try for one knob: the job's, or the defaults when it leaves
// the knob open.
template <typename T>
std::vector<T> Choices(bool fixed, T value, std::vector<T> defaults) {
  return fixed ? std::vector<T>{value} : defaults;
}

// Chimera's pipeline counts 2f and concatenation methods (chimera-zb's
// pipeline counts only: it concatenates directly).
std::vector<ScheduleParams> ChimeraVariants(const schedule::SpecParams& fixed,
                                            ScheduleParams base) {
  const ScheduleParams& given = fixed.params;
  const int d = base.depth;
  std::vector<int> pipelines;
  for (int p = 2; p <= d; p *= 2) pipelines.push_back(p);
  // Without more micro-batches than stages the methods coincide.
  std::vector<schedule::Concat> concats = {schedule::Concat::kDirect};
  if (base.micro_batches > d &&
      schedule::KnobApplies(ScheduleParam::kConcat, base.scheme)) {
    concats.push_back(schedule::Concat::kForwardDoubling);
    concats.push_back(schedule::Concat::kBackwardHalving);
  }
  std::vector<ScheduleParams> out;
  for (int p : Choices(fixed.Gives(ScheduleParam::kPipelines), given.pipelines,
                       pipelines)) {
    for (auto concat :
         Choices(fixed.Gives(ScheduleParam::kConcat), given.concat, concats)) {
      base.pipelines = p;
      base.concat = concat;
      out.push_back(base);
    }
  }
  return out;
}

// MixPipe's K (D, D-2, 2, and K maximizing where it applies) and Gamma.
std::vector<ScheduleParams> MixPipeVariants(const schedule::SpecParams& fixed,
                                            ScheduleParams base) {
  const ScheduleParams& given = fixed.params;
  const int d = base.depth;
  std::vector<int> ks = {d, d - 2, 2};
  if (base.micro_batches > d) ks.push_back(2 * (d - 1));
  std::sort(ks.begin(), ks.end());
  ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
  std::vector<ScheduleParams> out;
  for (int k :
       Choices(fixed.Gives(ScheduleParam::kMixPipeK), given.mixpipe_k, ks)) {
    for (int gamma : Choices(fixed.Gives(ScheduleParam::kMixPipeGamma),
                             given.mixpipe_gamma, {0, 1})) {
      base.mixpipe_k = k;
      base.mixpipe_gamma = gamma;
      out.push_back(base);
    }
  }
  return out;
}

// The schedule knobs of one scheme at one (W, D, N): every variant the job
// leaves open, each a full ScheduleParams the schedule engine accepts and the
// layers can fill.
std::vector<ScheduleParams> Variants(const schedule::SpecParams& fixed,
                                     ScheduleParams base, int num_layers) {
  const ScheduleParams& given = fixed.params;
  std::vector<ScheduleParams> out;
  switch (base.scheme) {
    case Scheme::kOneFOneB: {
      for (auto policy : Choices(
               fixed.Gives(ScheduleParam::kPolicy), given.policy,
               {schedule::WarmupPolicy::kPa, schedule::WarmupPolicy::kPb})) {
        base.policy = policy;
        out.push_back(base);
      }
      break;
    }
    case Scheme::kChimera:
    case Scheme::kChimeraZb:
      out = ChimeraVariants(fixed, base);
      break;
    case Scheme::kMixPipe:
      out = MixPipeVariants(fixed, base);
      break;
    case Scheme::kZbAuto:
      // 1F1B's memory, ZB-H2's, and none: the memory check keeps what fits.
      for (int limit :
           Choices(fixed.Gives(ScheduleParam::kActivationLimit),
                   given.activation_limit, {base.depth, 2 * base.depth - 1, 0})) {
        base.activation_limit = limit;
        out.push_back(base);
      }
      break;
    case Scheme::kInterleaved:
    case Scheme::kBreadthFirst:
      // One worker looping over its own chunks is just a sequential model.
      if (base.depth < 2) break;
      for (int v : Choices(fixed.Gives(ScheduleParam::kChunks), given.chunks,
                           {2, kMostSearchedChunks})) {
        base.chunks = v;
        out.push_back(base);
      }
      break;
    default:
      out.push_back(base);
  }
  out.erase(std::remove_if(out.begin(), out.end(),
                           [num_layers](const ScheduleParams& p) {
                             return !schedule::ValidateScheduleParams(p).empty() ||
                                    schedule::ModelStageCount(p) > num_layers;
                           }),
            out.end());
  return out;
}

// Where no variant of a looping scheme fits: the deepest loop, one block per
// model stage (as many chunks as blocks per worker, where that exceeds the
// variants'). With the weights sharded too, a worker then holds whole only
// the two blocks it computes and gathers next: the breadth-first paper's
// DP_FS at its least memory (its Appendix A.2.1). Not among the variants,
// whose programs it would make many times longer for every job.
std::optional<ScheduleParams> DeepestLoop(const schedule::SpecParams& fixed,
                                          ScheduleParams base, int num_layers) {
  const bool looping = base.scheme == Scheme::kInterleaved ||
                       base.scheme == Scheme::kBreadthFirst;
  if (!looping || base.depth < 2 || fixed.Gives(ScheduleParam::kChunks)) {
    return std::nullopt;
  }
  base.chunks = num_layers / base.depth;
  if (base.chunks <= kMostSearchedChunks ||
      !schedule::ValidateScheduleParams(base).empty()) {
    return std::nullopt;
  }
  return base;
}

// One pipeline layout on the job's workers: W pipelines of D stages, each
// stage on one worker per pipeline or on its replication's.
struct Shape {
  int depth = 1;
  int width = 1;
  std::vector<int> replication;
};

// Every way to give `workers` workers to `stages` stages, each at least one,
// except all alike (r:r on W pipelines is W x r pipelines with micro-batches
// r times smaller, which the search tries anyway).
void AddUnevenReplications(int stages, int workers, std::vector<int>& prefix,
                           std::vector<std::vector<int>>& out) {
  const int left = stages - static_cast<int>(prefix.size());
  if (left == 1) {
    prefix.push_back(workers);
    if (std::adjacent_find(prefix.begin(), prefix.end(),
                           std::not_equal_to<int>()) != prefix.end()) {
      out.push_back(prefix);
    }
    prefix.pop_back();
    return;
  }
  for (int r = 1; r <= workers - (left - 1); ++r) {
    prefix.push_back(r);
    AddUnevenReplications(stages, workers - r, prefix, out);
    prefix.pop_back();
  }
}

// The layouts of `scheme` on `workers` workers the job leaves open: a
// fixed replication's, or every W x D, and for 1F1B (DAPPLE's schedule) the
// uneven replications of up to kMostReplicatedStages stages on up to
// kMostReplicatedWorkers workers per pipeline.
std::vector<Shape> Shapes(const schedule::SpecParams& fixed, Scheme scheme,
                          int workers, int num_layers) {
  const auto depth_open = [&](int depth) {
    return depth <= num_layers &&
           (!fixed.Gives(ScheduleParam::kDepth) || fixed.params.depth == depth);
  };
  const auto width_open = [&](int width) {
    return !fixed.Gives(ScheduleParam::kWidth) || fixed.params.width == width;
  };
  std::vector<Shape> shapes;
  if (fixed.Gives(ScheduleParam::kReplication)) {
    const std::vector<int>& replication = fixed.params.replication;
    const int per_pipeline =
        std::accumulate(replication.begin(), replication.end(), 0);
    const int width = workers / per_pipeline;
    if (workers % per_pipeline == 0 && width_open(width)) {
      shapes.push_back(
          {static_cast<int>(replication.size()), width, replication});
    }
    return shapes;
  }
  for (int depth = 1; depth <= workers; ++depth) {
    if (workers % depth == 0 && depth_open(depth) &&
        width_open(workers / depth)) {
      shapes.push_back({depth, workers / depth, {}});
    }
  }
  if (scheme != Scheme::kOneFOneB) return shapes;
  for (int width = 1; width <= workers; ++width) {
    const int per_pipeline = workers / width;
    if (workers % width != 0 || !width_open(width) ||
        per_pipeline > kMostReplicatedWorkers) {
      continue;
    }
    for (int depth = 2; depth <= kMostReplicatedStages; ++depth) {
      if (!depth_open(depth) || per_pipeline <= depth) continue;
      std::vector<std::vector<int>> replications;
      std::vector<int> prefix;
      AddUnevenReplications(depth, per_pipeline, prefix, replications);
      for (std::vector<int>& replication : replications) {
        shapes.push_back({depth, width, std::move(replication)});
      }
    }
  }
  return shapes;
}

// Micro-batch sizes to try, largest first: the job's, or every power of two
// times `slices` (the slices a replication cuts each into) that divides the
// per-replica batch.
std::vector<int> MicroBatchSizes(const chimera::v1::TrainJob& job, int width,
                                 int slices) {
  const auto& training = job.spec().training();
  const auto& parallelism = job.spec().parallelism();
  const int global = training.global_batch_size();
  if (global % width != 0) return {};
  const int per_replica = global / width;
  const auto fits = [&](int b) {
    return b > 0 && per_replica % b == 0 && b % slices == 0;
  };
  if (training.micro_batch_size() > 0) {
    const int b = training.micro_batch_size();
    return fits(b) ? std::vector<int>{b} : std::vector<int>{};
  }
  if (parallelism.has_micro_batches()) {
    const int n = parallelism.micro_batches();
    return per_replica % n == 0 && fits(per_replica / n)
               ? std::vector<int>{per_replica / n}
               : std::vector<int>{};
  }
  std::vector<int> sizes;
  for (int64_t b = slices; b <= per_replica; b *= 2) {
    if (fits(static_cast<int>(b))) sizes.push_back(static_cast<int>(b));
  }
  std::reverse(sizes.begin(), sizes.end());
  return sizes;
}

std::string Percent(double ratio) { return absl::StrFormat("%.1f%%", 100 * ratio); }

bool Differs(double a, double b) {
  return std::abs(a - b) > kNotableDifference * std::max(std::abs(a), std::abs(b));
}


// resources.workers devices, or as many of the cluster's as the job can use
// when it leaves them open.
absl::StatusOr<int> UsableWorkers(const chimera::v1::TrainJob& job,
                                  const chimera::v1::Cluster& cluster) {
  const int devices =
      cluster.spec().nodes() * cluster.spec().devices_per_node();
  const int workers = WorkersToUse(job, devices);
  if (workers == 0) {
    const int asked = job.spec().resources().workers();
    return absl::FailedPreconditionError(absl::StrCat(
        asked > 0 ? absl::StrCat("the job asks for ", asked, " workers")
                  : "the job's fixed spec.parallelism needs more workers",
        "; cluster '", cluster.metadata().name(), "' has ", devices, " devices"));
  }
  return workers;
}

// The job's spec.resources.memoryBytesPerWorker, where it is set and below
// what the devices have, is the memory every plan must fit in.
chimera::v1::Cluster WithJobsMemoryLimit(const chimera::v1::TrainJob& job,
                                         chimera::v1::Cluster cluster) {
  const int64_t limit = job.spec().resources().memory_bytes_per_worker();
  auto* device = cluster.mutable_spec()->mutable_device();
  if (limit > 0 && limit < device->memory_bytes()) device->set_memory_bytes(limit);
  return cluster;
}

class Search {
 public:
  using MemoryKnobs = std::tuple<int, bool, schedule::Sharding>;

  Search(const chimera::v1::TrainJob& job, const chimera::v1::Cluster& cluster,
         const chimera::v1::ModelProfile& profile, std::function<bool()> cancelled)
      : job_(job),
        partitions_(profile),
        context_{job, cluster.spec(), profile, &partitions_},
        cancelled_(std::move(cancelled)) {}

  // Evaluates `candidate` with recomputation off, and on as well where the
  // job leaves it open and nothing fits without it; at each, with every
  // sharding the job leaves open. Keeps the one that fits, unsharded unless
  // only sharded fits or sharded is clearly faster. Returns whether one
  // fits (then fitting_.back()).
  absl::StatusOr<bool> Try(Candidate candidate) {
    const auto& training = job_.spec().training();
    std::vector<bool> choices = {false, true};
    if (training.has_recompute()) choices = {training.recompute()};
    for (bool recompute : choices) {
      candidate.params.recompute = recompute;
      std::optional<std::pair<Candidate, Evaluation>> kept;
      for (schedule::Sharding sharding : ShardingChoices(candidate.params)) {
        // Sharding full only where nothing lighter fits (ShardingChoices).
        if (sharding == schedule::Sharding::kFull && kept) break;
        candidate.params.sharding = sharding;
        ASSIGN_OR_RETURN(Evaluation evaluation, Assess(candidate));
        if (evaluation.fits &&
            (!kept || ClearlyFaster(evaluation, kept->second))) {
          kept.emplace(candidate, std::move(evaluation));
        }
      }
      if (kept) {
        fitting_.push_back(*std::move(kept));
        return true;
      }
    }
    return false;
  }

  // The job's sharding; where it leaves it open, none and then, where the
  // candidate's stages have groups to shard over, the optimizer's state and
  // the gradients' sum, and last the parameters too. Sharded, a plan needs
  // less memory and steps 1/G of each stage, but gathers the weights after:
  // which is faster depends on the update's cost and the link. `optimizer`
  // is not tried: it saves the same memory and moves more bytes (an
  // allreduce where the other reduce-scatters). `full` is tried only where
  // neither of the others fits: it gathers a stage's weights before every
  // run of uses, and saves memory at the peak only where a worker holds
  // more stages than the two it keeps whole at once (looping schedules).
  std::vector<schedule::Sharding> ShardingChoices(ScheduleParams params) const {
    if (!job_.spec().parallelism().sharding().empty()) {
      return {params.sharding};
    }
    params.sharding = schedule::Sharding::kGradientsAndOptimizer;
    if (!schedule::ValidateScheduleParams(params).empty()) {
      return {schedule::Sharding::kNone};
    }
    return {schedule::Sharding::kNone, params.sharding,
            schedule::Sharding::kFull};
  }

  // Whether sharding `sharded` pays: a predicted gain the cost model can
  // tell from noise in the profile it is given, so that the same job is not
  // sharded on one run and not on the next.
  static bool ClearlyFaster(const Evaluation& sharded,
                            const Evaluation& whole) {
    return sharded.plan.prediction().samples_per_second() >
           (1 + kShardingGain) * whole.plan.prediction().samples_per_second();
  }

  // Evaluates `candidate`, noting the smallest memory any candidate needs.
  absl::StatusOr<Evaluation> Assess(const Candidate& candidate) {
    ASSIGN_OR_RETURN(Evaluation evaluation, Evaluate(candidate));
    const int64_t needed = evaluation.plan.prediction().peak_memory_bytes_max();
    if (smallest_needed_ < 0 || needed < smallest_needed_) {
      smallest_needed_ = needed;
      smallest_plan_ = DescribePlan(evaluation.plan);
    }
    return evaluation;
  }

  // Tries every layout (Shapes) and B of `scheme` on `workers` workers
  // that the job leaves open, with every variant of the scheme's knobs.
  absl::Status TryScheme(const schedule::SpecParams& fixed, Scheme scheme,
                         int workers) {
    const auto& spec = job_.spec();
    const int num_layers = spec.model().num_layers();
    for (const Shape& shape : Shapes(fixed, scheme, workers, num_layers)) {
      const int width = shape.width;
      // (pipelines, recompute, sharding), which decide a Chimera plan's
      // memory, that a larger micro-batch already fits with.
      std::set<MemoryKnobs> fitted;
      const std::vector<int> sizes = MicroBatchSizes(
          job_, width, schedule::SlicesPerMicroBatch(shape.replication));
      for (int b : sizes) {
        ScheduleParams base;
        base.scheme = scheme;
        base.depth = shape.depth;
        base.width = width;
        base.replication = shape.replication;
        base.micro_batches = spec.training().global_batch_size() / (width * b);
        // The job's sharding; a width it cannot shard at fails validation.
        base.sharding = fixed.params.sharding;
        ASSIGN_OR_RETURN(std::set<MemoryKnobs> fitting,
                         TryVariants(Variants(fixed, base, num_layers), b,
                                     sizes.size() > 1, fitted));
        if (fitting.empty()) {
          if (const auto deepest = DeepestLoop(fixed, base, num_layers)) {
            ASSIGN_OR_RETURN(
                fitting, TryVariants({*deepest}, b, sizes.size() > 1, fitted));
          }
        }
        fitted.insert(fitting.begin(), fitting.end());
      }
    }
    return absl::OkStatus();
  }

  // Tries each of `variants` at micro-batch size `b` (Try). Returns the
  // memory knobs of those that fit. A fitting one is marked the largest
  // fitting micro-batch where the job leaves the size open (`sizes_open`:
  // sizes come largest first) and no larger size fitted with its knobs.
  absl::StatusOr<std::set<MemoryKnobs>> TryVariants(
      const std::vector<ScheduleParams>& variants, int b, bool sizes_open,
      const std::set<MemoryKnobs>& fitted) {
    std::set<MemoryKnobs> fitting;
    for (const ScheduleParams& params : variants) {
      ASSIGN_OR_RETURN(bool fits,
                       Try({params, b, kFirstPlacement, /*partition=*/{}}));
      if (!fits) continue;
      auto& [candidate, evaluation] = fitting_.back();
      const MemoryKnobs memory_knobs{params.pipelines,
                                     evaluation.plan.recompute(),
                                     candidate.params.sharding};
      evaluation.largest_fitting_micro_batch =
          sizes_open && fitted.count(memory_knobs) == 0;
      fitting.insert(memory_knobs);
    }
    return fitting;
  }

  // Re-evaluates the best `count` candidates with every data-parallel
  // replica simulated, so that the predictions of the plans that come first
  // are of the programs that run, and ranks them again.
  absl::Status SimulateFullWidth(int count) {
    PlanningContext full = context_;
    full.full_width = true;
    const int best = std::min<int>(count, static_cast<int>(fitting_.size()));
    for (int i = 0; i < best; ++i) {
      auto& [candidate, evaluation] = fitting_[i];
      if (candidate.params.width <= kSimulatedWidth) continue;  // All simulated.
      ASSIGN_OR_RETURN(Evaluation whole, Evaluate(candidate, full));
      whole.largest_fitting_micro_batch = evaluation.largest_fitting_micro_batch;
      evaluation = std::move(whole);
    }
    std::stable_sort(fitting_.begin(), fitting_.begin() + best, Faster);
    return absl::OkStatus();
  }

  // Re-evaluates the best candidates under every placement policy and keeps
  // each one's best: placement only changes links, so it is searched where
  // it can change the ranking.
  absl::Status RefinePlacement(int top_k) {
    Rank();
    fitting_.resize(std::min<size_t>(fitting_.size(), top_k));
    for (auto& [candidate, evaluation] : fitting_) {
      for (PlacementPolicy policy : kAllPlacementPolicies) {
        if (policy == candidate.placement) continue;
        Candidate moved = candidate;
        moved.placement = policy;
        ASSIGN_OR_RETURN(Evaluation other, Evaluate(moved));
        if (other.fits && other.plan.prediction().samples_per_second() >
                              evaluation.plan.prediction().samples_per_second()) {
          other.largest_fitting_micro_batch = evaluation.largest_fitting_micro_batch;
          candidate = moved;
          evaluation = std::move(other);
        }
      }
    }
    Rank();
    return absl::OkStatus();
  }

  void Rank() { std::stable_sort(fitting_.begin(), fitting_.end(), Faster); }

  // Higher predicted throughput first; at a tie, the smaller peak memory.
  static bool Faster(const std::pair<Candidate, Evaluation>& x,
                     const std::pair<Candidate, Evaluation>& y) {
    const auto& a = x.second.plan.prediction();
    const auto& b = y.second.plan.prediction();
    if (a.samples_per_second() != b.samples_per_second()) {
      return a.samples_per_second() > b.samples_per_second();
    }
    return a.peak_memory_bytes_max() < b.peak_memory_bytes_max();
  }

  const std::vector<std::pair<Candidate, Evaluation>>& fitting() const { return fitting_; }
  int evaluated() const { return evaluated_; }
  int64_t smallest_needed() const { return smallest_needed_; }
  const std::string& smallest_plan() const { return smallest_plan_; }

 private:
  // Every evaluation goes through here: the one place the search counts
  // candidates and stops once its caller has gone.
  absl::StatusOr<Evaluation> Evaluate(const Candidate& candidate) {
    return Evaluate(candidate, context_);
  }
  absl::StatusOr<Evaluation> Evaluate(const Candidate& candidate,
                                      const PlanningContext& context) {
    if (cancelled_ && cancelled_()) {
      return absl::CancelledError(absl::StrCat(
          "the plan search was cancelled after ", evaluated_,
          " candidates (its caller's deadline passed, or it hung up)"));
    }
    ++evaluated_;
    return EvaluateCandidate(context, candidate);
  }

  const chimera::v1::TrainJob& job_;
  PartitionCache partitions_;
  PlanningContext context_;
  const std::function<bool()> cancelled_;
  std::vector<std::pair<Candidate, Evaluation>> fitting_;
  int evaluated_ = 0;
  int64_t smallest_needed_ = -1;
  std::string smallest_plan_;
};

}  // namespace

std::string ExplainRanking(const Evaluation& best, const Evaluation& runner_up) {
  const auto& a = best.plan.prediction();
  const auto& b = runner_up.plan.prediction();
  std::vector<std::string> reasons;
  if (Differs(a.bubble_ratio(), b.bubble_ratio())) {
    reasons.push_back(absl::StrFormat("bubble ratio %.3f vs %.3f", a.bubble_ratio(),
                                      b.bubble_ratio()));
  }
  if (Differs(best.compute_seconds_per_sample, runner_up.compute_seconds_per_sample)) {
    reasons.push_back(absl::StrFormat(
        "compute per sample %.3g s vs %.3g s (micro-batch efficiency)",
        best.compute_seconds_per_sample, runner_up.compute_seconds_per_sample));
  }
  if (Differs(a.exposed_allreduce_seconds(), b.exposed_allreduce_seconds())) {
    reasons.push_back(absl::StrFormat("exposed allreduce %.3g s vs %.3g s",
                                      a.exposed_allreduce_seconds(),
                                      b.exposed_allreduce_seconds()));
  }
  if (Differs(best.recompute_seconds, runner_up.recompute_seconds)) {
    reasons.push_back(absl::StrFormat("recomputation %.3g s vs %.3g s per iteration",
                                      best.recompute_seconds,
                                      runner_up.recompute_seconds));
  }
  if (Differs(best.update_seconds, runner_up.update_seconds)) {
    reasons.push_back(
        absl::StrFormat("optimizer update %.3g s vs %.3g s per iteration",
                        best.update_seconds, runner_up.update_seconds));
  }
  if (reasons.empty()) reasons.push_back("the same bubbles, compute and communication");
  if (best.largest_fitting_micro_batch && best.plan.scheme() == "chimera") {
    reasons.push_back(absl::StrCat("B=", best.plan.micro_batch_size(),
                                   " is the largest micro-batch that fits, the one "
                                   "Chimera's paper picks without a search"));
  }
  const double gain = a.samples_per_second() / b.samples_per_second() - 1;
  // Below what Percent shows: "beats ... by 0.0%" would say nothing.
  if (gain < kTie) {
    return absl::StrCat(DescribePlan(best.plan), " ties with ", DescribePlan(runner_up.plan),
                        " on predicted throughput and comes first for its smaller peak "
                        "memory (",
                        absl::StrJoin(reasons, "; "), ")");
  }
  return absl::StrCat(DescribePlan(best.plan), " beats ", DescribePlan(runner_up.plan),
                      " by ", Percent(gain), " predicted throughput: ",
                      absl::StrJoin(reasons, "; "));
}

absl::StatusOr<SearchResult> SearchPlans(const chimera::v1::TrainJob& job,
                                         const chimera::v1::Cluster& given_cluster,
                                         const chimera::v1::ModelProfile& profile,
                                         const SearchOptions& options) {
  const auto& spec = job.spec();
  const chimera::v1::Cluster cluster = WithJobsMemoryLimit(job, given_cluster);
  schedule::SpecParams fixed;
  RETURN_IF_ERROR(
      schedule::ScheduleParamsFromSpec(spec.parallelism(), spec.training(), &fixed)
          .ToStatus());
  ASSIGN_OR_RETURN(const int workers, UsableWorkers(job, cluster));

  Search search(job, cluster, profile, options.cancelled);
  std::vector<Scheme> schemes(std::begin(kAllSchemes), std::end(kAllSchemes));
  // The asynchronous ones only where the job consents to them.
  for (Scheme scheme : {Scheme::kPipeDream, Scheme::kPipeDream2Bw}) {
    if (jobspec::AllowsAsynchronousScheme(job.spec(), scheme)) {
      schemes.push_back(scheme);
    }
  }
  for (Scheme scheme : schemes) {
    if (fixed.Gives(ScheduleParam::kScheme) && fixed.params.scheme != scheme) continue;
    RETURN_IF_ERROR(search.TryScheme(fixed, scheme, workers));
  }
  if (search.evaluated() == 0) {
    return absl::InvalidArgumentError(
        "no candidate plan: the job's fixed parallelism, micro-batch size and "
        "batch size leave nothing to evaluate on this cluster");
  }
  if (search.fitting().empty()) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "no plan fits in %d bytes of device memory; the smallest needs %d bytes "
        "(%s)",
        cluster.spec().device().memory_bytes(), search.smallest_needed(),
        search.smallest_plan()));
  }
  RETURN_IF_ERROR(search.RefinePlacement(options.top_k));
  RETURN_IF_ERROR(search.SimulateFullWidth(std::min(options.top_k, kFullWidthCandidates)));

  SearchResult result;
  result.evaluated = search.evaluated();
  for (const auto& [candidate, evaluation] : search.fitting()) {
    if (static_cast<int>(result.ranked.size()) == options.top_k) break;
    result.ranked.push_back(evaluation);
  }
  if (result.ranked.size() >= 2) {
    result.why_best = ExplainRanking(result.ranked[0], result.ranked[1]);
  }
  return result;
}

}  // namespace chimera::planner
