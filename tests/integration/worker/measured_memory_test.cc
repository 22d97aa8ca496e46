// Measured memory follows the schedule and the sharding.
//
// With D = N = 4, Chimera's workers each hold a stage of the down and of the
// up pipeline, so their peak activation memory is more balanced than 1F1B's,
// where the first worker stashes D micro-batches and the last one (Chimera
// paper, Table 2 and Fig. 4: between (D/2 + 1)·Ma and D·Ma per worker
// against Ma..D·Ma).
//
// Peak activation bytes of a worker, as measured here: the tracked CPU
// tensor memory's peak during step s (s >= 1) minus the tracked memory at the
// end of step s - 1. Between steps the executor holds nothing but weights,
// gradients and optimizer state (its stash and transfer buffers are empty,
// FinishStep checks that), and from step 1 on the optimizer state exists, so
// the difference is everything the step itself allocated at its worst
// moment: stashed activations, the transient buffers of the op running then
// and in-flight transfer buffers.
//
// Sharding saves what it should. Each worker's tracked memory between steps
// drops by (1 - 1/G) of its AdamW state, two moments per weight, in gradient
// groups of G = 2 (Chimera, W = 1) and 4 (W = 2); with the gradients
// reduce-scattered, by its gradient buckets as well, which it holds within a
// step only; with the parameters sharded too (full), by (1 - 1/G) of its
// weights as well. A breadth-first worker, whose stages' backward passes follow
// each other, then holds one stage's bucket at a time, and its peak drops by
// the other's; fully sharded at one block per stage, it holds two blocks
// whole, the breadth-first paper's DP_FS.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "schedule/generator.h"
#include "tests/support/temp_dir.h"
#include "worker/harness/pipeline_job.h"
#include "worker/model/transformer_stage.h"

namespace chimera::worker {
namespace {

using harness::MakePipelineJob;
using harness::MeasurePipeline;
using harness::PipelineJob;
using harness::PipelineMeasurements;
using schedule::Scheme;

constexpr absl::Duration kCaseDeadline = absl::Seconds(120);
constexpr absl::Duration kOpTimeout = absl::Seconds(30);
constexpr int kDepth = 4;
constexpr int kSteps = 3;

// Two blocks per stage; a vocabulary no larger than the hidden size keeps the
// head's logits from dominating the last stage, so the stash counts decide.
ModelConfig SmallGpt() {
  ModelConfig config;
  config.num_layers = 8;
  config.hidden_size = 64;
  config.ffn_size = 128;
  config.num_heads = 4;
  config.vocab_size = 64;
  config.seq_length = 32;
  config.dtype = at::kFloat;
  return config;
}

struct ActivationPeaks {
  std::vector<int64_t> bytes;  // per rank
  double Imbalance() const {
    const auto [min, max] = std::minmax_element(bytes.begin(), bytes.end());
    return static_cast<double>(*max) / static_cast<double>(*min);
  }
};

// Each rank's metrics of kSteps steps of `params` on `model`, micro-batches
// of `micro_batch_size` samples, `optimizer`, run in forked ranks; empty
// after a failure.
std::vector<std::vector<StepMetrics>> MeasureRun(
    const schedule::ScheduleParams& params, const ModelConfig& model,
    int micro_batch_size, OptimizerKind optimizer) {
  absl::StatusOr<schedule::Schedule> generated =
      schedule::GenerateSchedule(params);
  EXPECT_TRUE(generated.ok()) << generated.status();
  if (!generated.ok()) return {};
  PipelineJob job = MakePipelineJob(*std::move(generated), model,
                                    micro_batch_size, /*seed=*/5, kOpTimeout);
  job.spec.optimizer.kind = optimizer;
  job.spec.sharding = params.sharding;
  job.spec.max_steps = kSteps;
  const chimera::testing::TempDir scratch;
  absl::StatusOr<PipelineMeasurements> measured =
      MeasurePipeline(std::move(job), scratch.path(), kCaseDeadline);
  EXPECT_TRUE(measured.ok()) << measured.status();
  if (!measured.ok()) return {};
  return std::move(measured->ranks);
}

// Each rank's metrics of kSteps steps of `scheme` at N = 4, D = 4 (or 2 with
// two chunks per worker, the same four model stages) and `width` on
// SmallGpt, micro-batches of 4, with `optimizer` and `sharding`.
std::vector<std::vector<StepMetrics>> Measure(
    Scheme scheme, int width = 1, OptimizerKind optimizer = OptimizerKind::kSgd,
    schedule::Sharding sharding = schedule::Sharding::kNone, int chunks = 1) {
  schedule::ScheduleParams params;
  params.scheme = scheme;
  params.depth = kDepth / chunks;
  params.chunks = chunks;
  params.micro_batches = kDepth;
  params.width = width;
  params.sharding = sharding;
  return MeasureRun(params, SmallGpt(), /*micro_batch_size=*/4, optimizer);
}

// Each rank's peak activation bytes (see the file comment) of `scheme`, the
// largest over steps 1..S-1.
ActivationPeaks MeasurePeaks(Scheme scheme) {
  ActivationPeaks peaks;
  for (const std::vector<StepMetrics>& steps : Measure(scheme)) {
    int64_t peak = 0;
    for (int step = 1; step < kSteps; ++step) {
      peak = std::max(peak, steps[step].memory_peak_bytes -
                                steps[step - 1].memory_current_bytes);
    }
    peaks.bytes.push_back(peak);
  }
  return peaks;
}

std::string Describe(const ActivationPeaks& peaks) {
  std::string text;
  for (size_t rank = 0; rank < peaks.bytes.size(); ++rank) {
    text += " rank" + std::to_string(rank) + "=" +
            std::to_string(peaks.bytes[rank]);
  }
  return text + " max/min=" + std::to_string(peaks.Imbalance());
}

TEST(MemoryBalanceTest, ChimeraActivationPeaksAreMoreBalancedThanOneFOneB) {
  const ActivationPeaks chimera = MeasurePeaks(Scheme::kChimera);
  const ActivationPeaks one_f_one_b = MeasurePeaks(Scheme::kOneFOneB);
  ASSERT_EQ(chimera.bytes.size(), kDepth);
  ASSERT_EQ(one_f_one_b.bytes.size(), kDepth);
  for (int64_t bytes : chimera.bytes) ASSERT_GT(bytes, 0);
  for (int64_t bytes : one_f_one_b.bytes) ASSERT_GT(bytes, 0);
  RecordProperty("chimera_peak_activation_bytes", Describe(chimera));
  RecordProperty("1f1b_peak_activation_bytes", Describe(one_f_one_b));

  EXPECT_LT(chimera.Imbalance(), one_f_one_b.Imbalance())
      << "chimera:" << Describe(chimera) << "\n1f1b:" << Describe(one_f_one_b);
  // 1F1B's first worker stashes D micro-batches of its stage, its last one:
  // the measured ratio must show that, or the measurement sees no stash.
  EXPECT_GT(one_f_one_b.bytes.front(), 2 * one_f_one_b.bytes.back())
      << Describe(one_f_one_b);
}

// Stages of large weights and small activations (one sample of 8 tokens),
// so that the versions show beside the stash.
ModelConfig WideShortGpt() {
  ModelConfig config = SmallGpt();
  config.hidden_size = 256;
  config.ffn_size = 1024;
  config.seq_length = 8;
  return config;
}

// Each rank's metrics of kSteps steps of `scheme` at D = N = 4 on
// WideShortGpt, micro-batches of one sample, plain SGD (no optimizer state).
std::vector<std::vector<StepMetrics>> MeasureVersions(Scheme scheme) {
  schedule::ScheduleParams params;
  params.scheme = scheme;
  params.depth = kDepth;
  params.micro_batches = kDepth;
  return MeasureRun(params, WideShortGpt(), /*micro_batch_size=*/1,
                    OptimizerKind::kSgd);
}

TEST(WeightVersionsMemoryTest, AsynchronousRulesKeepTheirVersionsAndNoMore) {
  const auto one_f_one_b = MeasureVersions(Scheme::kOneFOneB);
  const auto two_bw = MeasureVersions(Scheme::kPipeDream2Bw);
  const auto pipedream = MeasureVersions(Scheme::kPipeDream);
  ASSERT_EQ(one_f_one_b.size(), kDepth);
  ASSERT_EQ(two_bw.size(), kDepth);
  ASSERT_EQ(pipedream.size(), kDepth);
  for (int rank = 0; rank < kDepth; ++rank) {
    // The last step: the pipeline is full, every version in use.
    const StepMetrics& base = one_f_one_b[rank].back();
    const double weights = static_cast<double>(base.weights_bytes);
    for (const auto& [measured, versions] :
         {std::pair{&two_bw, 2}, std::pair{&pipedream, kDepth - rank}}) {
      const StepMetrics& step = (*measured)[rank].back();
      EXPECT_EQ(step.weights_bytes, versions * base.weights_bytes)
          << "rank " << rank << ", " << versions << " versions";
      const double rise =
          static_cast<double>(step.memory_peak_bytes - base.memory_peak_bytes);
      EXPECT_NEAR(rise, (versions - 1) * weights, 0.1 * weights)
          << "rank " << rank << ", " << versions << " versions: peak "
          << step.memory_peak_bytes << " against 1F1B's "
          << base.memory_peak_bytes;
    }
  }
}

// DAPPLE's 1:3 at W = 1 with AdamW: stage 1's three replicas each keep a
// third of its optimizer state once sharded; stage 0, on one worker, keeps
// all of its own.
TEST(ReplicatedShardingMemoryTest, AReplicatedStageShardsOverItsReplicas) {
  const auto measure = [](schedule::Sharding sharding) {
    schedule::ScheduleParams params;
    params.scheme = Scheme::kOneFOneB;
    params.depth = 2;
    params.micro_batches = 2;
    params.replication = {1, 3};
    params.sharding = sharding;
    return MeasureRun(params, SmallGpt(), /*micro_batch_size=*/3,
                      OptimizerKind::kAdamW);
  };
  const auto whole = measure(schedule::Sharding::kNone);
  const auto sharded = measure(schedule::Sharding::kOptimizer);
  ASSERT_EQ(whole.size(), 4u);
  ASSERT_EQ(sharded.size(), 4u);
  for (size_t rank = 0; rank < whole.size(); ++rank) {
    const double state =
        static_cast<double>(whole[rank].back().optimizer_bytes);
    ASSERT_GT(state, 0) << "rank " << rank;
    const double share = rank == 0 ? state : state / 3;
    EXPECT_NEAR(static_cast<double>(sharded[rank].back().optimizer_bytes),
                share, 0.1 * share)
        << "rank " << rank;
  }
}

// Chimera at a data width (groups of 2W), sharded in a mode.
class ShardedMemoryTest
    : public ::testing::TestWithParam<std::tuple<int, schedule::Sharding>> {};

TEST_P(ShardedMemoryTest, TheTrainingStateOfEachWorkerDropsAsShardingSays) {
  const auto [width, mode] = GetParam();
  const int members = 2 * width;  // the replicas of a Chimera stage
  const auto whole = Measure(Scheme::kChimera, width, OptimizerKind::kAdamW);
  const auto sharded =
      Measure(Scheme::kChimera, width, OptimizerKind::kAdamW, mode);
  ASSERT_EQ(whole.size(), sharded.size());
  ASSERT_FALSE(whole.empty());
  const bool full = mode == schedule::Sharding::kFull;
  const bool scattered =
      full || mode == schedule::Sharding::kGradientsAndOptimizer;
  for (size_t rank = 0; rank < whole.size(); ++rank) {
    const StepMetrics& unsharded_step = whole[rank].back();
    const StepMetrics& sharded_step = sharded[rank].back();
    const double state = static_cast<double>(unsharded_step.optimizer_bytes);
    ASSERT_EQ(state, 2.0 * static_cast<double>(unsharded_step.weights_bytes));
    const double gradients =
        static_cast<double>(unsharded_step.gradients_bytes);
    ASSERT_EQ(gradients, static_cast<double>(unsharded_step.weights_bytes));
    const double weights = static_cast<double>(unsharded_step.weights_bytes);
    const double expected_drop = state * (1.0 - 1.0 / members) +
                                 (scattered ? gradients : 0.0) +
                                 (full ? weights * (1.0 - 1.0 / members) : 0.0);
    const double measured_drop =
        static_cast<double>(unsharded_step.memory_current_bytes -
                            sharded_step.memory_current_bytes);
    EXPECT_NEAR(measured_drop, expected_drop, 0.1 * expected_drop)
        << "rank " << rank << ": " << unsharded_step.memory_current_bytes
        << " bytes unsharded, " << sharded_step.memory_current_bytes
        << " sharded over " << members;
    EXPECT_NEAR(static_cast<double>(sharded_step.optimizer_bytes),
                state / members, 0.1 * state / members)
        << "rank " << rank;
    if (full) {
      // Chimera gathers both of a worker's stages for the whole step: its
      // shards, and every weight whole at the step's peak.
      EXPECT_NEAR(static_cast<double>(sharded_step.weights_bytes),
                  weights / members + weights, 0.1 * weights)
          << "rank " << rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    ChimeraWidths, ShardedMemoryTest,
    ::testing::Combine(
        ::testing::Values(1, 2),
        ::testing::Values(schedule::Sharding::kOptimizer,
                          schedule::Sharding::kGradientsAndOptimizer,
                          schedule::Sharding::kFull)),
    [](const ::testing::TestParamInfo<ShardedMemoryTest::ParamType>& info) {
      std::string mode;
      for (absl::string_view word :
           absl::StrSplit(schedule::ShardingName(std::get<1>(info.param)),
                          '-')) {
        absl::StrAppend(&mode, absl::AsciiStrToUpper(word.substr(0, 1)),
                        word.substr(1));
      }
      return "W" + std::to_string(std::get<0>(info.param)) + mode;
    });

// Breadth-first, D = 2 with two chunks per worker, W = 2: both modes shard
// the optimizer state over G = 2, so what differs is the gradient buckets.
TEST(ScatteredGradientsMemoryTest, ABreadthFirstWorkerHoldsOneStagesAtATime) {
  const auto whole =
      Measure(Scheme::kBreadthFirst, /*width=*/2, OptimizerKind::kAdamW,
              schedule::Sharding::kOptimizer, /*chunks=*/2);
  const auto scattered =
      Measure(Scheme::kBreadthFirst, /*width=*/2, OptimizerKind::kAdamW,
              schedule::Sharding::kGradientsAndOptimizer, /*chunks=*/2);
  ASSERT_EQ(whole.size(), scattered.size());
  ASSERT_EQ(whole.size(), 4u);
  for (size_t rank = 0; rank < whole.size(); ++rank) {
    const StepMetrics& kept = whole[rank].back();
    const StepMetrics& held = scattered[rank].back();
    // Two buckets: the larger of them alone is at least half of both.
    const int64_t both = kept.gradients_bytes;
    EXPECT_LT(held.gradients_bytes, both) << "rank " << rank;
    EXPECT_GE(2 * held.gradients_bytes, both) << "rank " << rank;

    const double between_steps = static_cast<double>(kept.memory_current_bytes -
                                                     held.memory_current_bytes);
    EXPECT_NEAR(between_steps, both, 0.1 * both)
        << "rank " << rank << ": " << kept.memory_current_bytes
        << " bytes with the buckets kept, " << held.memory_current_bytes
        << " held within steps";
    const int64_t other = both - held.gradients_bytes;
    EXPECT_GE(kept.memory_peak_bytes - held.memory_peak_bytes, 0.9 * other)
        << "rank " << rank << ": peaks " << kept.memory_peak_bytes << " and "
        << held.memory_peak_bytes << ", the other bucket " << other;
  }
}

// The parameter bytes of each block of `model` as a stage of its own (the
// first with the embedding, the last with the head).
std::vector<int64_t> BytesPerBlock(const ModelConfig& model) {
  std::vector<int64_t> bytes;
  for (int64_t block = 0; block < model.num_layers; ++block) {
    absl::StatusOr<std::shared_ptr<TransformerStage>> stage =
        BuildTransformerStage(model, LayerRange{block, block + 1}, /*seed=*/5);
    EXPECT_TRUE(stage.ok()) << stage.status();
    if (!stage.ok()) return {};
    int64_t sum = 0;
    for (const at::Tensor& p : (*stage)->parameters()) sum += p.nbytes();
    bytes.push_back(sum);
  }
  return bytes;
}

// The breadth-first paper's DP_FS (its Appendix A.2.1): with one block per
// model stage, a stage is the paper's layer, and a worker holds whole only
// the two layers it computes and gathers next, besides its shards. Breadth-
// first D = 2 with eight chunks per worker, groups of G = 2 and 4; against
// gradients-and-optimizer, which differs only in keeping the weights whole.
TEST(FullyShardedMemoryTest, ABreadthFirstWorkerHoldsTwoLayersWholeAndShards) {
  ModelConfig model = SmallGpt();
  model.num_layers = 16;
  constexpr int kDepthHere = 2;
  const std::vector<int64_t> block_bytes = BytesPerBlock(model);
  ASSERT_EQ(block_bytes.size(), 16u);
  for (int members : {2, 4}) {
    const auto measure = [&](schedule::Sharding sharding) {
      schedule::ScheduleParams params;
      params.scheme = Scheme::kBreadthFirst;
      params.depth = kDepthHere;
      params.chunks = 8;
      params.micro_batches = 4;
      params.width = members;
      params.sharding = sharding;
      return MeasureRun(params, model, /*micro_batch_size=*/4,
                        OptimizerKind::kAdamW);
    };
    const auto whole = measure(schedule::Sharding::kGradientsAndOptimizer);
    const auto full = measure(schedule::Sharding::kFull);
    ASSERT_EQ(whole.size(), static_cast<size_t>(kDepthHere * members));
    ASSERT_EQ(full.size(), whole.size());
    for (size_t rank = 0; rank < full.size(); ++rank) {
      // Rank r of a replica holds blocks r, r + D, ...: its two largest.
      std::vector<int64_t> held;
      for (size_t b = rank % kDepthHere; b < block_bytes.size();
           b += kDepthHere) {
        held.push_back(block_bytes[b]);
      }
      std::sort(held.rbegin(), held.rend());
      const double two_layers = static_cast<double>(held[0] + held[1]);
      const StepMetrics& kept = whole[rank].back();
      const StepMetrics& sharded = full[rank].back();
      const double weights = static_cast<double>(kept.weights_bytes);
      const double shards = weights / members;
      const std::string where = absl::StrCat("G = ", members, ", rank ", rank);

      // What the executor reports: its shards and at most two layers whole.
      const double gathered = sharded.weights_bytes - shards;
      EXPECT_LE(gathered, 1.01 * two_layers) << where;
      EXPECT_GE(gathered, 0.99 * held.back()) << where;

      // What the tracking allocator measured: the shards alone between
      // steps, and a peak lower by all weights but the shards and two layers.
      const double between_steps = static_cast<double>(
          kept.memory_current_bytes - sharded.memory_current_bytes);
      EXPECT_NEAR(between_steps, weights - shards, 0.1 * (weights - shards))
          << where;
      const double at_peak = static_cast<double>(kept.memory_peak_bytes -
                                                 sharded.memory_peak_bytes);
      EXPECT_GE(at_peak, 0.9 * (weights - shards - two_layers))
          << where << ": peaks " << kept.memory_peak_bytes << " and "
          << sharded.memory_peak_bytes;
    }
  }
}

}  // namespace
}  // namespace chimera::worker
