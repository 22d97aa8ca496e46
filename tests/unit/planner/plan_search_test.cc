// The planner's search and its trade-offs, on synthetic (analytic) profiles.
#include "planner/plan_search.h"

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "planner/analytic_profile.h"
#include "tests/unit/planner/test_jobs.h"

namespace chimera::planner {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::LargeJob;
using testing::TestCluster;

SearchResult MustSearch(const chimera::v1::TrainJob& job,
                        const chimera::v1::Cluster& cluster, int top_k = 10) {
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  SearchOptions options;
  options.top_k = top_k;
  absl::StatusOr<SearchResult> result =
      SearchPlans(job, cluster, profile, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : SearchResult{};
}

const chimera::v1::Plan& Best(const SearchResult& result) {
  static const chimera::v1::Plan kNone;
  return result.ranked.empty() ? kNone : result.ranked[0].plan;
}

// SCHEME at W x D with N micro-batches of B samples, partition and placement
// left to the planner.
Candidate CandidateAt(schedule::Scheme scheme, int width, int depth,
                      int micro_batches, int micro_batch_size) {
  Candidate candidate;
  candidate.params.scheme = scheme;
  candidate.params.width = width;
  candidate.params.depth = depth;
  candidate.params.micro_batches = micro_batches;
  candidate.micro_batch_size = micro_batch_size;
  return candidate;
}

// The predicted peak memory of `candidate` sharded as `sharding`; 0 (and a
// test failure) when it cannot be evaluated.
int64_t PredictedPeak(const PlanningContext& context, Candidate candidate,
                      schedule::Sharding sharding) {
  candidate.params.sharding = sharding;
  absl::StatusOr<Evaluation> evaluation = EvaluateCandidate(context, candidate);
  EXPECT_TRUE(evaluation.ok()) << evaluation.status();
  return evaluation.ok() ? evaluation->plan.prediction().peak_memory_bytes_max()
                         : 0;
}

// With recomputation a worker stashes each micro-batch's boundary, and its
// backward runs the stage's forward again, whole, before it backpropagates:
// the worker holds the stage's activations, every block's, and the largest
// layer's backward working memory on top. One stage of all eight blocks.
TEST(PlanEvaluatorTest, ARecomputingBackwardHoldsItsWholeStage) {
  const auto job = LargeJob(8, 32, 1);
  const auto cluster = TestCluster(1, 1);
  auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  Candidate candidate = CandidateAt(schedule::Scheme::kOneFOneB, 1, 1, 8, 4);
  candidate.params.recompute = true;
  const auto peak = [&] {
    const PlanningContext context{job, cluster.spec(), profile};
    return PredictedPeak(context, candidate, schedule::Sharding::kNone);
  };
  const int64_t before = peak();
  constexpr int64_t kMore = 1000;  // per sample
  for (auto& layer : *profile.mutable_layers()) {
    if (layer.kind() != "block") continue;
    layer.set_activation_bytes_per_sample(layer.activation_bytes_per_sample() +
                                          kMore);
  }
  const int64_t more_activations = peak();
  EXPECT_EQ(more_activations - before, 8 * kMore * 4);
  profile.mutable_layers(3)->set_backward_extra_bytes_per_sample(kMore);
  EXPECT_EQ(peak() - more_activations, kMore * 4);
}

// Breadth-first with two chunks per worker: with its gradients
// reduce-scattered a worker holds one stage's at a time (the generator ends
// the first stage's sum before the second's backward), and its predicted
// peak drops by the other stage's; allreduced, it holds both.
TEST(PlanEvaluatorTest, ScatteredGradientsAreChargedAsLongAsTheyAreHeld) {
  const auto job = LargeJob(8, 32, 8);
  const auto cluster = TestCluster(2, 4);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  const PlanningContext context{job, cluster.spec(), profile};
  Candidate candidate =
      CandidateAt(schedule::Scheme::kBreadthFirst, 2, 2, 4, 4);
  candidate.params.chunks = 2;
  const int64_t allreduced =
      PredictedPeak(context, candidate, schedule::Sharding::kOptimizer);
  const int64_t scattered = PredictedPeak(
      context, candidate, schedule::Sharding::kGradientsAndOptimizer);
  // The other stage: two blocks of 12·h² float32 weights (h = 1024) at
  // least.
  EXPECT_GE(allreduced - scattered, int64_t{2} * 12 * 1024 * 1024 * 4)
      << allreduced << " allreduced, " << scattered << " scattered";
}

// Sharding full keeps each stage's shard and at most two stages whole at
// once: a breadth-first worker of four stages in groups of four saves a
// stage's weights at its peak over gradients-and-optimizer (4 - 4/4 - 2 = 1
// stage); a Chimera worker, which gathers both of its stages for the whole
// step, holds its shards on top.
TEST(PlanEvaluatorTest, FullyShardedWeightsAreChargedAsTheProgramGathersThem) {
  const auto job = LargeJob(16, 64, 8);
  const auto cluster = TestCluster(2, 4);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  const PlanningContext context{job, cluster.spec(), profile};
  // A stage: two blocks of 12·h² float32 weights (h = 1024) at least.
  const int64_t stage = int64_t{2} * 12 * 1024 * 1024 * 4;
  Candidate looping = CandidateAt(schedule::Scheme::kBreadthFirst, 4, 2, 4, 4);
  looping.params.chunks = 4;
  EXPECT_GE(PredictedPeak(context, looping,
                          schedule::Sharding::kGradientsAndOptimizer) -
                PredictedPeak(context, looping, schedule::Sharding::kFull),
            stage);
  const Candidate chimera = CandidateAt(schedule::Scheme::kChimera, 2, 4, 4, 4);
  EXPECT_GT(PredictedPeak(context, chimera, schedule::Sharding::kFull),
            PredictedPeak(context, chimera,
                          schedule::Sharding::kGradientsAndOptimizer));
}

TEST(PlanEvaluatorTest, PredictionIsTheSimulatorsMakespanForTheSameProgram) {
  const auto job = LargeJob(8, 32, 8);
  const auto cluster = TestCluster(2, 4);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  PlanningContext context{job, cluster.spec(), profile};
  const Candidate candidate = CandidateAt(schedule::Scheme::kChimera, 2, 4, 4, 4);
  absl::StatusOr<Evaluation> evaluation = EvaluateCandidate(context, candidate);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  absl::StatusOr<SimulationInputs> inputs = PrepareSimulation(context, candidate);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  absl::StatusOr<schedule::SimulationResult> simulated =
      schedule::Simulate(inputs->program, inputs->costs);
  ASSERT_TRUE(simulated.ok()) << simulated.status();
  EXPECT_EQ(evaluation->plan.prediction().iteration_seconds(), simulated->makespan);
  EXPECT_EQ(evaluation->plan.prediction().samples_per_second(), 32 / simulated->makespan);
}

// The search simulates two data-parallel replicas; the final ranking, the
// program that runs. On identical replicas and links the two agree: the
// others enter only through the allreduce groups.
TEST(PlanEvaluatorTest, TheFullWidthProgramPredictsWhatTwoReplicasDo) {
  const auto job = LargeJob(8, 64, 8);
  const auto cluster = TestCluster(4, 4);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  const Candidate candidate = CandidateAt(schedule::Scheme::kChimera, 4, 4, 4, 4);
  PlanningContext two{job, cluster.spec(), profile};
  PlanningContext full = two;
  full.full_width = true;
  absl::StatusOr<SimulationInputs> two_inputs = PrepareSimulation(two, candidate);
  absl::StatusOr<SimulationInputs> full_inputs = PrepareSimulation(full, candidate);
  ASSERT_TRUE(two_inputs.ok()) << two_inputs.status();
  ASSERT_TRUE(full_inputs.ok()) << full_inputs.status();
  EXPECT_EQ(two_inputs->program.workers.size(), 2u * 4);
  EXPECT_EQ(full_inputs->program.workers.size(), 4u * 4);

  absl::StatusOr<Evaluation> sampled = EvaluateCandidate(two, candidate);
  absl::StatusOr<Evaluation> whole = EvaluateCandidate(full, candidate);
  ASSERT_TRUE(sampled.ok()) << sampled.status();
  ASSERT_TRUE(whole.ok()) << whole.status();
  const chimera::v1::Prediction& a = sampled->plan.prediction();
  const chimera::v1::Prediction& b = whole->plan.prediction();
  EXPECT_NEAR(a.iteration_seconds(), b.iteration_seconds(), 1e-9 * a.iteration_seconds());
  EXPECT_EQ(a.peak_memory_bytes_max(), b.peak_memory_bytes_max());
  ASSERT_EQ(a.rank_bubble_ratios_size(), b.rank_bubble_ratios_size());
  for (int rank = 0; rank < a.rank_bubble_ratios_size(); ++rank) {
    EXPECT_NEAR(a.rank_bubble_ratios(rank), b.rank_bubble_ratios(rank), 1e-9) << rank;
  }
}

// A profile that times the backward's halves gives the split schedules
// their costs; B costing three times W makes zb-h1 slower than at half and
// half, as its bubble (D-1)(F+B-W) says.
TEST(PlanEvaluatorTest, MeasuredBackwardHalvesAreTheSplitSchedulesCosts) {
  const auto job = LargeJob(8, 32, 8);
  const auto cluster = TestCluster(2, 4);
  auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  const Candidate candidate = CandidateAt(schedule::Scheme::kZbH1, 1, 4, 8, 4);
  PlanningContext halves{job, cluster.spec(), profile};
  absl::StatusOr<Evaluation> even = EvaluateCandidate(halves, candidate);
  ASSERT_TRUE(even.ok()) << even.status();

  for (auto& layer : *profile.mutable_layers()) {
    for (auto& timing : *layer.mutable_timings()) {
      timing.set_backward_input_seconds(0.75 * timing.backward_seconds());
      timing.set_backward_weight_seconds(0.25 * timing.backward_seconds());
    }
  }
  PlanningContext measured{job, cluster.spec(), profile};
  absl::StatusOr<SimulationInputs> inputs = PrepareSimulation(measured, candidate);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  for (size_t s = 0; s < inputs->stages.size(); ++s) {
    EXPECT_DOUBLE_EQ(inputs->costs.stage_backward_input[s],
                     0.75 * inputs->costs.stage_backward[s]);
    EXPECT_DOUBLE_EQ(inputs->costs.stage_backward_weight[s],
                     0.25 * inputs->costs.stage_backward[s]);
  }
  absl::StatusOr<Evaluation> uneven = EvaluateCandidate(measured, candidate);
  ASSERT_TRUE(uneven.ok()) << uneven.status();
  EXPECT_GT(uneven->plan.prediction().iteration_seconds(),
            even->plan.prediction().iteration_seconds());
}

// Chimera D = 2 holds the first stage on both ranks of one node: its
// allreduce moves its parameters less the token embedding rows that the
// step's 2 x 4 x 512 tokens cannot use, plus the used-rows mask.
TEST(PlanEvaluatorTest, TheFirstStagesAllreduceMovesTheEmbeddingRowsAStepCanUse) {
  const auto job = LargeJob(8, 8, 2);
  const auto cluster = TestCluster(1, 2);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  PlanningContext context{job, cluster.spec(), profile};
  const Candidate candidate = CandidateAt(schedule::Scheme::kChimera, 1, 2, 2, 4);
  absl::StatusOr<SimulationInputs> inputs = PrepareSimulation(context, candidate);
  ASSERT_TRUE(inputs.ok()) << inputs.status();

  const double tokens = 2 * 4 * 512;
  const double unused_rows = 30522 - tokens;
  const double bytes = inputs->stages[0].parameter_bytes -
                       unused_rows * 1024 * 4 + 30522 * 4;
  const auto& link = cluster.spec().links().intra_node();
  // Two ranks: 2 log2(2) latencies and (2 - 1) / 2 of the bytes both ways.
  EXPECT_DOUBLE_EQ(inputs->costs.stage_allreduce[0],
                   2 * link.latency_seconds() +
                       bytes / link.bandwidth_bytes_per_second());
  EXPECT_DOUBLE_EQ(inputs->costs.stage_allreduce[1],
                   2 * link.latency_seconds() +
                       inputs->stages[1].parameter_bytes /
                           link.bandwidth_bytes_per_second());
}

// Gloo's CPU allreduce pays more per step than a message: the link's
// collective latency, where it gives one, is each step's alpha; messages
// keep the link's latency.
TEST(PlanEvaluatorTest, AllreduceStepsPayTheLinksCollectiveLatency) {
  const auto job = LargeJob(8, 8, 2);
  auto cluster = TestCluster(1, 2);
  auto* link = cluster.mutable_spec()->mutable_links()->mutable_intra_node();
  link->set_collective_latency_seconds(link->latency_seconds() + 0.5);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  PlanningContext context{job, cluster.spec(), profile};
  const Candidate candidate = CandidateAt(schedule::Scheme::kChimera, 1, 2, 2, 4);
  absl::StatusOr<SimulationInputs> inputs = PrepareSimulation(context, candidate);
  ASSERT_TRUE(inputs.ok()) << inputs.status();

  EXPECT_DOUBLE_EQ(inputs->costs.stage_allreduce[1],
                   2 * link->collective_latency_seconds() +
                       inputs->stages[1].parameter_bytes /
                           link->bandwidth_bytes_per_second());
  EXPECT_DOUBLE_EQ(inputs->costs.p2p_time(0, 1, 1000),
                   link->latency_seconds() +
                       1000 / link->bandwidth_bytes_per_second());
}

TEST(PlanEvaluatorTest, PredictPlanSimulatesThePlansOwnPartition) {
  const auto job = LargeJob(8, 32, 8);
  const auto cluster = TestCluster(2, 4);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  PlanningContext context{job, cluster.spec(), profile};
  const Candidate candidate = CandidateAt(schedule::Scheme::kOneFOneB, 2, 4, 4, 4);
  absl::StatusOr<Evaluation> balanced = EvaluateCandidate(context, candidate);
  ASSERT_TRUE(balanced.ok()) << balanced.status();

  absl::StatusOr<chimera::v1::Prediction> same =
      PredictPlan(context, balanced->plan);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(same->iteration_seconds(),
            balanced->plan.prediction().iteration_seconds());

  // All but one block on the last stage: a slower plan, predicted as such.
  chimera::v1::Plan lopsided = balanced->plan;
  for (int s = 0; s < 4; ++s) {
    lopsided.mutable_partition(s)->set_first_layer(s);
    lopsided.mutable_partition(s)->set_num_layers(s == 3 ? 5 : 1);
  }
  absl::StatusOr<chimera::v1::Prediction> slower =
      PredictPlan(context, lopsided);
  ASSERT_TRUE(slower.ok()) << slower.status();
  EXPECT_GT(slower->iteration_seconds(), same->iteration_seconds());

  lopsided.mutable_partition()->RemoveLast();
  EXPECT_THAT(PredictPlan(context, lopsided).status().message(),
              HasSubstr("the partition has 3 stages; the plan has 4"));
}

TEST(PlanSearchTest, RespectsWhatTheJobFixes) {
  auto job = LargeJob(8, 64, 8);
  job.mutable_spec()->mutable_parallelism()->set_schedule("chimera");
  job.mutable_spec()->mutable_parallelism()->set_pipeline(4);
  SearchResult result = MustSearch(job, TestCluster(2, 4));
  ASSERT_FALSE(result.ranked.empty());
  for (const Evaluation& e : result.ranked) {
    EXPECT_EQ(e.plan.scheme(), "chimera");
    EXPECT_EQ(e.plan.depth(), 4);
    EXPECT_EQ(e.plan.width(), 2);
    EXPECT_TRUE(e.fits);
  }
}

// An open search ranks the split-backward schemes with the others; a job that
// names one gets plans of that scheme only.
TEST(PlanSearchTest, OpenSearchWeighsEverySplitBackwardSchemeAndANamedOneIsKept) {
  auto job = LargeJob(8, 64, 8);
  const std::vector<std::string> split = {"zb-h1", "zb-h2",     "zb-auto",
                                          "zbv",   "dualpipev", "chimera-zb"};
  std::set<std::string> open_schemes;
  for (const Evaluation& e : MustSearch(job, TestCluster(2, 4), 1000).ranked) {
    open_schemes.insert(e.plan.scheme());
  }
  for (const std::string& scheme : split) {
    EXPECT_THAT(open_schemes, Contains(scheme));
    job.mutable_spec()->mutable_parallelism()->set_schedule(scheme);
    SearchResult named = MustSearch(job, TestCluster(2, 4));
    ASSERT_FALSE(named.ranked.empty()) << scheme;
    for (const Evaluation& e : named.ranked) {
      EXPECT_EQ(e.plan.scheme(), scheme);
      EXPECT_TRUE(e.fits);
      // The V's cut the model into 2D stages, two per worker.
      const bool v = scheme == "zbv" || scheme == "dualpipev";
      EXPECT_EQ(e.plan.partition_size(), (v ? 2 : 1) * e.plan.depth())
          << scheme;
    }
  }
}

TEST(PlanSearchTest, FixedKnobsOutsideTheDefaultChoicesAreSearched) {
  auto job = LargeJob(16, 64, 8);
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  parallelism->set_schedule("mixpipe");
  parallelism->set_pipeline(8);
  parallelism->set_mixpipe_k(4);
  parallelism->set_mixpipe_gamma(2);
  const chimera::v1::Plan best = Best(MustSearch(job, TestCluster(1, 8)));
  EXPECT_EQ(best.mixpipe_k(), 4);
  EXPECT_EQ(best.mixpipe_gamma(), 2);
}

TEST(PlanSearchTest, RanksByPredictedThroughputAndExplainsTheWinner) {
  SearchResult result = MustSearch(LargeJob(8, 64, 8), TestCluster(2, 4), 5);
  ASSERT_GE(result.ranked.size(), 2u);
  for (size_t i = 1; i < result.ranked.size(); ++i) {
    EXPECT_GE(result.ranked[i - 1].plan.prediction().samples_per_second(),
              result.ranked[i].plan.prediction().samples_per_second());
  }
  EXPECT_THAT(result.why_best, HasSubstr(" beats "));
  EXPECT_THAT(result.why_best, HasSubstr("predicted throughput"));
}

// An exact tie used to read "beats ... by 0.0%".
TEST(PlanSearchTest, ATieIsCalledOneNotAWinByNothing) {
  SearchResult result = MustSearch(LargeJob(8, 64, 8), TestCluster(2, 4), 2);
  ASSERT_EQ(result.ranked.size(), 2u);
  Evaluation twin = result.ranked[0];
  twin.plan.mutable_prediction()->set_peak_memory_bytes_max(
      twin.plan.prediction().peak_memory_bytes_max() + 1);
  const std::string why = ExplainRanking(result.ranked[0], twin);
  EXPECT_THAT(why, HasSubstr(" ties with "));
  EXPECT_THAT(why, Not(HasSubstr("0.0%")));
  EXPECT_THAT(ExplainRanking(result.ranked[0], result.ranked[1]), HasSubstr(" beats "));
}

TEST(PlanSearchTest, MoreMicroBatchesShrinkOneFOneBsBubble) {
  double previous = 1.0;
  for (int global_batch : {4, 8, 16, 32}) {
    auto job = LargeJob(8, global_batch, 4);
    job.mutable_spec()->mutable_parallelism()->set_schedule("1f1b");
    job.mutable_spec()->mutable_parallelism()->set_pipeline(4);
    job.mutable_spec()->mutable_training()->set_micro_batch_size(1);
    const double bubble = Best(MustSearch(job, TestCluster(1, 4))).prediction().bubble_ratio();
    EXPECT_LT(bubble, previous) << "global batch " << global_batch;
    previous = bubble;
  }
}

TEST(PlanSearchTest, ChimeraPrefersALargerMicroBatchThan1F1B) {
  auto best_micro_batch = [](const char* scheme) {
    auto job = LargeJob(8, 64, 4);
    job.mutable_spec()->mutable_parallelism()->set_schedule(scheme);
    job.mutable_spec()->mutable_parallelism()->set_pipeline(4);
    return Best(MustSearch(job, TestCluster(1, 4))).micro_batch_size();
  };
  EXPECT_GT(best_micro_batch("chimera"), best_micro_batch("1f1b"));
}

TEST(PlanSearchTest, ChimeraSearchesMicroBatchesBelowTheLargestThatFits) {
  // 32 samples per replica: the largest micro-batch that fits leaves fewer
  // micro-batches than stages, which the paper's greedy choice assumes away.
  auto job = LargeJob(48, 256, 32);
  job.mutable_spec()->mutable_parallelism()->set_schedule("chimera");
  job.mutable_spec()->mutable_parallelism()->set_pipeline(4);
  const SearchResult result = MustSearch(job, TestCluster(4, 8), 1000);
  std::set<int> sizes;
  for (const Evaluation& evaluation : result.ranked) {
    sizes.insert(evaluation.plan.micro_batch_size());
  }
  EXPECT_GE(sizes.size(), 3u);
  EXPECT_GE(Best(result).micro_batches(), Best(result).depth());
}

TEST(PlanSearchTest, WhySaysWhenChimerasLargestFittingMicroBatchWins) {
  // 256 samples per pipeline: the largest micro-batch leaves enough of them.
  auto job = LargeJob(8, 1024, 4);
  job.mutable_spec()->mutable_parallelism()->set_schedule("chimera");
  job.mutable_spec()->mutable_parallelism()->set_pipeline(4);
  const SearchResult result = MustSearch(job, TestCluster(1, 4));
  ASSERT_TRUE(result.ranked[0].largest_fitting_micro_batch);
  EXPECT_THAT(result.why_best,
              HasSubstr(absl::StrCat("B=", Best(result).micro_batch_size(),
                                     " is the largest micro-batch that fits")));
  for (const Evaluation& smaller : result.ranked) {
    if (smaller.plan.pipelines() == Best(result).pipelines() &&
        smaller.plan.micro_batch_size() < Best(result).micro_batch_size()) {
      EXPECT_FALSE(smaller.largest_fitting_micro_batch) << DescribePlan(smaller.plan);
    }
  }
}

TEST(PlanSearchTest, WorkersLeftOpenAreAllDevicesAFixedPipelineCanUse) {
  auto job = LargeJob(8, 64, 0);
  const chimera::v1::Plan open = Best(MustSearch(job, TestCluster(2, 4)));
  EXPECT_EQ(open.width() * open.depth(), 8);
  job.mutable_spec()->mutable_parallelism()->set_pipeline(4);
  const chimera::v1::Plan best = Best(MustSearch(job, TestCluster(1, 6)));
  EXPECT_EQ(best.depth(), 4);
  EXPECT_EQ(best.width(), 1);
}

TEST(PlanSearchTest, SlowInterNodeLinkMovesTheChoiceTowardDeeperPipelines) {
  auto best_depth = [](double inter_bandwidth) {
    auto job = LargeJob(32, 64, 32);
    job.mutable_spec()->mutable_parallelism()->set_schedule("1f1b");
    return Best(MustSearch(job, TestCluster(4, 8, inter_bandwidth))).depth();
  };
  const int fast = best_depth(1e12);
  const int slow = best_depth(1e8);
  EXPECT_GT(slow, fast);
}

// The quick start's Chimera (examples/chimera.yaml: W = 1, D = 4, B = 2,
// N = 4) with its pipelines left open, on one CPU host of `cores` cores
// linked as examples/clusters/local-cpu.yaml, planned from a measured profile
// whose every layer takes `forward_seconds` per sample (twice that backward)
// and a quarter of it to step (the quick start's blocks measure 0.19 ms and
// 0.043 ms on a 2-vCPU VM): with four pipelines every rank steps the whole
// model, with two half of it.
int ChimeraPipelinesChosen(int cores, double forward_seconds) {
  auto job = LargeJob(8, 8, 4);
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  parallelism->set_schedule("chimera");
  parallelism->set_pipeline(4);
  parallelism->set_data(1);
  parallelism->set_micro_batches(4);
  job.mutable_spec()->mutable_training()->set_micro_batch_size(2);
  auto cluster = TestCluster(1, 4);
  auto* device = cluster.mutable_spec()->mutable_device();
  device->set_peak_flops(5e10);
  device->set_cores_per_node(cores);
  auto* link = cluster.mutable_spec()->mutable_links()->mutable_intra_node();
  link->set_latency_seconds(1e-4);
  link->set_bandwidth_bytes_per_second(2e9);
  link->set_collective_latency_seconds(5e-5);

  chimera::v1::ModelProfile profile;
  profile.mutable_metadata()->set_name("uniform");
  profile.set_source("measured");
  profile.set_device("cpu");
  for (int layer = 0; layer < 10; ++layer) {
    auto* measured = profile.add_layers();
    measured->set_kind(layer == 0   ? "embedding"
                       : layer == 9 ? "head"
                                    : "block");
    auto* timing = measured->add_timings();
    timing->set_micro_batch_size(1);
    timing->set_forward_seconds(forward_seconds);
    timing->set_backward_seconds(2 * forward_seconds);
    measured->set_activation_bytes_per_sample(1000);
    measured->set_output_bytes_per_sample(1000);
    measured->set_parameter_bytes(1000);
    measured->set_optimizer_seconds(forward_seconds / 4);
  }
  absl::StatusOr<SearchResult> result =
      SearchPlans(job, cluster, profile, SearchOptions{});
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? Best(*result).pipelines() : 0;
}

// Four pipelines halve Chimera's bubble but give each rank four allreduces
// instead of two, and the whole model to step instead of half. With a core
// per rank the bubble wins; where four ranks share two cores no rank's idle
// time is lost to the host and the extra work decides (measured on a 2-vCPU
// VM: 0.025 s a step with two, 0.026 s with four), as where compute is so
// short that the allreduces' latency is the step. At the quick start's own
// magnitudes.
TEST(PlanSearchTest, ChimeraPipelinesFollowTheHostsCoresAndTheComputeTime) {
  EXPECT_EQ(ChimeraPipelinesChosen(4, 2e-4), 4);
  EXPECT_EQ(ChimeraPipelinesChosen(2, 2e-4), 2);
  EXPECT_EQ(ChimeraPipelinesChosen(4, 1e-5), 2);
}

// PipeDream-2BW is a candidate only where the job consents to
// asynchronous training. At the same W = 1, D = 4, N = 8 its steps overlap,
// so its predicted step is shorter than 1F1B's, which flushes, and its
// memory holds a second copy of the weights.
TEST(PlanSearchTest, PipeDreamAnd2BwArePlannedOnlyWithConsent) {
  const auto plans = [](bool consent, const std::string& schedule) {
    auto job = LargeJob(16, 64, 4);
    auto* parallelism = job.mutable_spec()->mutable_parallelism();
    parallelism->set_allow_asynchronous(consent);
    parallelism->set_pipeline(4);
    parallelism->set_data(1);
    parallelism->set_micro_batches(8);
    if (!schedule.empty()) parallelism->set_schedule(schedule);
    // 2BW's warm-up: D - i forwards on stage i.
    if (schedule == "1f1b") parallelism->set_policy("pa");
    return MustSearch(job, TestCluster(1, 4), 100);
  };
  const auto has_2bw = [](const SearchResult& result) {
    for (const Evaluation& e : result.ranked) {
      if (e.plan.scheme() == "pipedream-2bw") return true;
    }
    return false;
  };
  EXPECT_FALSE(has_2bw(plans(false, "")));
  EXPECT_TRUE(has_2bw(plans(true, "")));
  const chimera::v1::Plan two_bw = Best(plans(true, "pipedream-2bw"));
  const chimera::v1::Plan one_f_one_b = Best(plans(false, "1f1b"));
  ASSERT_EQ(two_bw.scheme(), "pipedream-2bw");
  EXPECT_LT(two_bw.prediction().iteration_seconds(),
            0.9 * one_f_one_b.prediction().iteration_seconds());
  EXPECT_LT(two_bw.prediction().bubble_ratio(),
            one_f_one_b.prediction().bubble_ratio());
  EXPECT_GT(two_bw.prediction().peak_memory_bytes_max(),
            one_f_one_b.prediction().peak_memory_bytes_max());
  // PipeDream, also planned only with consent, keeps D - i weight versions
  // on stage i: four on the first stage where 2BW keeps two.
  const auto has = [](const SearchResult& result, const std::string& scheme) {
    for (const Evaluation& e : result.ranked) {
      if (e.plan.scheme() == scheme) return true;
    }
    return false;
  };
  EXPECT_FALSE(has(plans(false, ""), "pipedream"));
  EXPECT_TRUE(has(plans(true, ""), "pipedream"));
  const chimera::v1::Plan pipedream = Best(plans(true, "pipedream"));
  ASSERT_EQ(pipedream.scheme(), "pipedream");
  EXPECT_GT(pipedream.prediction().peak_memory_bytes_max(),
            two_bw.prediction().peak_memory_bytes_max());
}

// At W = 2 every asynchronous update waits for its stage's allreduce:
// PipeDream's N = 8 a step against 2BW's one, none overlapped.
TEST(PlanSearchTest, AsynchronousPlansPayAnAllreducePerUpdate) {
  const auto exposed_allreduce = [](const std::string& schedule) {
    auto job = LargeJob(16, 64, 8);
    auto* parallelism = job.mutable_spec()->mutable_parallelism();
    parallelism->set_allow_asynchronous(true);
    parallelism->set_schedule(schedule);
    parallelism->set_pipeline(4);
    parallelism->set_data(2);
    parallelism->set_micro_batches(8);
    const chimera::v1::Plan best = Best(MustSearch(job, TestCluster(2, 4)));
    EXPECT_EQ(best.width(), 2) << DescribePlan(best);
    return best.prediction().exposed_allreduce_seconds();
  };
  const double two_bw = exposed_allreduce("pipedream-2bw");
  EXPECT_GT(two_bw, 0.0);
  EXPECT_GT(exposed_allreduce("pipedream"), 4 * two_bw);
}

TEST(PlanSearchTest, MemoryPressureTurnsOnRecomputationOrDeepensThePipeline) {
  auto best = [](int64_t memory) {
    auto job = LargeJob(16, 64, 8);
    job.mutable_spec()->mutable_parallelism()->set_schedule("1f1b");
    return Best(MustSearch(job, TestCluster(1, 8, 1.2e10, memory)));
  };
  const chimera::v1::Plan roomy = best(int64_t{64} << 30);
  const chimera::v1::Plan tight = best(int64_t{3} << 30);
  EXPECT_FALSE(roomy.recompute());
  EXPECT_TRUE(tight.recompute() || tight.depth() > roomy.depth())
      << "roomy D=" << roomy.depth() << ", tight D=" << tight.depth();
  EXPECT_LE(tight.prediction().peak_memory_bytes_max(), int64_t{3} << 30);
}

// Chimera at D = 4 on 8 workers (W = 2), with its knobs, micro-batch size
// and recomputation fixed, so that only the sharding is left to choose.
chimera::v1::TrainJob ChimeraLeavingOnlyTheShardingOpen() {
  auto job = LargeJob(16, 64, 8);
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  parallelism->set_schedule("chimera");
  parallelism->set_pipeline(4);
  parallelism->set_pipelines(2);
  parallelism->set_concat("direct");
  job.mutable_spec()->mutable_training()->set_micro_batch_size(4);
  job.mutable_spec()->mutable_training()->set_recompute(false);
  return job;
}

TEST(PlanSearchTest, AJobThatDoesNotFitUnshardedIsPlannedSharded) {
  const auto job = ChimeraLeavingOnlyTheShardingOpen();
  const chimera::v1::Plan roomy =
      Best(MustSearch(job, TestCluster(1, 8, 1.2e10, int64_t{64} << 30)));
  EXPECT_THAT(roomy.sharding(), ::testing::AnyOf("", "none"));
  // The same plan sharded needs less: AdamW's two moments of each stage
  // over its group of 2W = 4 (the same for both sharding modes).
  const auto cluster = TestCluster(1, 8);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  absl::StatusOr<Candidate> candidate = CandidateOf(roomy);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  candidate->params.sharding = schedule::Sharding::kOptimizer;
  absl::StatusOr<Evaluation> sharded =
      EvaluateCandidate({job, cluster.spec(), profile}, *candidate);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  const int64_t unsharded_peak = roomy.prediction().peak_memory_bytes_max();
  const int64_t sharded_peak =
      sharded->plan.prediction().peak_memory_bytes_max();
  ASSERT_LT(sharded_peak, unsharded_peak);

  const int64_t between = (sharded_peak + unsharded_peak) / 2;
  const chimera::v1::Plan tight =
      Best(MustSearch(job, TestCluster(1, 8, 1.2e10, between)));
  EXPECT_EQ(tight.sharding(), "gradients-and-optimizer") << DescribePlan(tight);
  EXPECT_LE(tight.prediction().peak_memory_bytes_max(), between);
  EXPECT_THAT(DescribePlan(tight),
              HasSubstr("sharding=gradients-and-optimizer"));
}

TEST(PlanSearchTest, AJobThatFitsOnlyWithItsWeightsShardedIsPlannedFull) {
  // Breadth-first, D = 2, v = 4, W = 4: each worker holds four stages.
  auto job = LargeJob(16, 64, 8);
  auto* parallelism = job.mutable_spec()->mutable_parallelism();
  parallelism->set_schedule("breadth-first");
  parallelism->set_pipeline(2);
  parallelism->set_data(4);
  parallelism->set_chunks(4);
  job.mutable_spec()->mutable_training()->set_micro_batch_size(4);
  job.mutable_spec()->mutable_training()->set_recompute(false);
  const auto cluster = TestCluster(2, 4);
  const auto profile =
      AnalyticProfile(job.spec().model(), cluster.spec().device());
  const chimera::v1::Plan roomy =
      Best(MustSearch(job, TestCluster(2, 4, 1.2e10, int64_t{64} << 30)));
  absl::StatusOr<Candidate> candidate = CandidateOf(roomy);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  const PlanningContext context{job, cluster.spec(), profile};
  const int64_t scattered = PredictedPeak(
      context, *candidate, schedule::Sharding::kGradientsAndOptimizer);
  const int64_t full =
      PredictedPeak(context, *candidate, schedule::Sharding::kFull);
  ASSERT_LT(full, scattered);

  const int64_t between = (full + scattered) / 2;
  const chimera::v1::Plan tight =
      Best(MustSearch(job, TestCluster(2, 4, 1.2e10, between)));
  EXPECT_EQ(tight.sharding(), "full") << DescribePlan(tight);
  EXPECT_LE(tight.prediction().peak_memory_bytes_max(), between);
  EXPECT_THAT(DescribePlan(tight), HasSubstr("sharding=full"));
}

TEST(PlanSearchTest, AJobsShardingIsKeptAndCostsTheGatherOfTheWeights) {
  auto job = ChimeraLeavingOnlyTheShardingOpen();
  const auto cluster = TestCluster(1, 8, 1.2e10, int64_t{64} << 30);
  const chimera::v1::Plan open = Best(MustSearch(job, cluster));
  job.mutable_spec()->mutable_parallelism()->set_sharding("optimizer");
  const chimera::v1::Plan sharded = Best(MustSearch(job, cluster));
  EXPECT_EQ(sharded.sharding(), "optimizer");
  EXPECT_LT(sharded.prediction().peak_memory_bytes_max(),
            open.prediction().peak_memory_bytes_max());
  // A quarter of the update, then an all-gather of the weights: on this fast
  // link and device the gather costs more than the update saves.
  EXPECT_GT(sharded.prediction().iteration_seconds(),
            open.prediction().iteration_seconds());
  // Reduce-scattering the gradients instead of allreducing them saves half
  // of their sum's bytes, and so the gather's cost back.
  job.mutable_spec()->mutable_parallelism()->set_sharding(
      "gradients-and-optimizer");
  const chimera::v1::Plan reduce_scattered = Best(MustSearch(job, cluster));
  EXPECT_EQ(reduce_scattered.sharding(), "gradients-and-optimizer");
  EXPECT_EQ(reduce_scattered.prediction().peak_memory_bytes_max(),
            sharded.prediction().peak_memory_bytes_max());
  EXPECT_LT(reduce_scattered.prediction().iteration_seconds(),
            sharded.prediction().iteration_seconds());
}

// A job that leaves the sharding open, with memory to spare, is planned
// sharded where its update is slow enough that stepping a quarter of it
// saves clearly more than gathering the weights costs (a measured profile in
// which AdamW over a block takes 50 ms, as on a CPU), and whole where the
// update is free (the analytic profile counts none) and the gather all cost.
TEST(PlanSearchTest, AJobIsPlannedShardedWhereThatIsClearlyFaster) {
  const auto job = ChimeraLeavingOnlyTheShardingOpen();
  const auto cluster = TestCluster(1, 8, 1.2e10, int64_t{64} << 30);
  const auto profile_with = [&](double block_update_seconds) {
    auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
    for (auto& layer : *profile.mutable_layers()) {
      if (layer.kind() == "block")
        layer.set_optimizer_seconds(block_update_seconds);
    }
    return profile;
  };
  const auto best = [&](const chimera::v1::ModelProfile& profile) {
    absl::StatusOr<SearchResult> result =
        SearchPlans(job, cluster, profile, SearchOptions{});
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() && !result->ranked.empty() ? result->ranked[0]
                                                  : Evaluation{};
  };
  const auto slow_update = profile_with(0.05);
  const Evaluation sharded = best(slow_update);
  EXPECT_EQ(sharded.plan.sharding(), "gradients-and-optimizer")
      << DescribePlan(sharded.plan);
  // The same plan unsharded: at least 5% slower, its update four times the
  // sharded one's.
  absl::StatusOr<Candidate> candidate = CandidateOf(sharded.plan);
  ASSERT_TRUE(candidate.ok()) << candidate.status();
  candidate->params.sharding = schedule::Sharding::kNone;
  absl::StatusOr<Evaluation> whole =
      EvaluateCandidate({job, cluster.spec(), slow_update}, *candidate);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_GT(sharded.plan.prediction().samples_per_second(),
            1.05 * whole->plan.prediction().samples_per_second());
  EXPECT_DOUBLE_EQ(whole->update_seconds, 4 * sharded.update_seconds);
  EXPECT_THAT(ExplainRanking(sharded, *whole), HasSubstr("optimizer update"));

  EXPECT_THAT(best(profile_with(0)).plan.sharding(),
              ::testing::AnyOf("", "none"));
}

TEST(PlanSearchTest, MixPipePlacementKeepsStageReplicasWithinANode) {
  const auto job = LargeJob(8, 64, 16);
  const auto cluster = TestCluster(2, 8);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  Candidate candidate;
  candidate.params.scheme = schedule::Scheme::kMixPipe;
  candidate.params.width = 2;
  candidate.params.depth = 8;
  candidate.params.micro_batches = 8;
  candidate.params.mixpipe_k = 8;
  candidate.micro_batch_size = 4;
  candidate.placement = PlacementPolicy::kReplicasTogether;
  absl::StatusOr<Evaluation> evaluation =
      EvaluateCandidate({job, cluster.spec(), profile}, candidate);
  ASSERT_TRUE(evaluation.ok()) << evaluation.status();
  const auto& placement = evaluation->plan.placement();
  // Stage s lives on positions s and 7-s of both replicas: one node for all.
  for (int s = 0; s < 4; ++s) {
    std::set<int> nodes;
    for (int dp = 0; dp < 2; ++dp) {
      nodes.insert(placement[dp * 8 + s].node());
      nodes.insert(placement[dp * 8 + 7 - s].node());
    }
    EXPECT_EQ(nodes.size(), 1u) << "stage " << s;
  }
}

TEST(PlanSearchTest, NothingFitsNamesTheSmallestMemoryThatWould) {
  const auto job = LargeJob(8, 64, 4);
  const auto cluster = TestCluster(1, 4, 1.2e10, int64_t{64} << 20);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  absl::StatusOr<SearchResult> result = SearchPlans(job, cluster, profile, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("no plan fits in 67108864 bytes"));
  EXPECT_THAT(result.status().message(), HasSubstr("the smallest needs"));
}

// spec.resources.memoryBytesPerWorker was validated and then ignored.
TEST(PlanSearchTest, TheJobsMemoryLimitIsWhatPlansMustFitIn) {
  auto job = LargeJob(8, 64, 4);
  const auto cluster = TestCluster(1, 4);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  ASSERT_TRUE(SearchPlans(job, cluster, profile, {}).ok());
  job.mutable_spec()->mutable_resources()->set_memory_bytes_per_worker(int64_t{64} << 20);
  absl::StatusOr<SearchResult> limited = SearchPlans(job, cluster, profile, {});
  EXPECT_EQ(limited.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(limited.status().message(), HasSubstr("no plan fits in 67108864 bytes"));
}

TEST(PlanSearchTest, MoreWorkersThanDevicesIsAFailedPrecondition) {
  const auto job = LargeJob(8, 64, 64);
  const auto cluster = TestCluster(1, 4);
  const auto profile = AnalyticProfile(job.spec().model(), cluster.spec().device());
  absl::StatusOr<SearchResult> result = SearchPlans(job, cluster, profile, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(result.status().message(), HasSubstr("asks for 64 workers"));
}

}  // namespace
}  // namespace chimera::planner
