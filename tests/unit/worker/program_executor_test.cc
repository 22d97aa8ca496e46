// The executor in one process: programs of one worker (no communicator) and
// what it refuses before running anything; its schedule-derived groups and
// tags and links. Multi-process execution: tests/integration/worker/.
#include "worker/runtime/program_executor.h"

#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedule/generator.h"
#include "tests/support/split_backward_schedule.h"
#include "tests/unit/worker/test_models.h"
#include "worker/runtime/task_spec.h"

namespace chimera::worker {
namespace {

using schedule::Scheme;
using ::testing::HasSubstr;

schedule::Schedule Generate(
    Scheme scheme, int depth, int micro_batches, int width = 1,
    schedule::Concat concat = schedule::Concat::kDirect) {
  schedule::ScheduleParams params;
  params.scheme = scheme;
  params.depth = depth;
  params.micro_batches = micro_batches;
  params.width = width;
  params.concat = concat;
  return schedule::GenerateSchedule(params).value();
}

std::unique_ptr<DataSource> Synthetic(const ModelConfig& config) {
  DataSourceOptions options;
  options.vocab_size = config.vocab_size;
  options.sample_length = SampleLength(config);
  return DataSource::Open(options).value();
}

// `config` cut into `stages` (contiguous), the blocks of the last one
// ending the partition.
TaskSpec Spec(const ModelConfig& config, std::vector<LayerRange> stages) {
  TaskSpec spec;
  spec.model = config;
  const int64_t end = stages.back().end;
  spec.partition = Partition::Of(std::move(stages), end).value();
  spec.micro_batch_size = 2;
  spec.optimizer.kind = OptimizerKind::kAdamW;
  spec.optimizer.lr = 1e-2;
  return spec;
}

// The only worker of `s` (a one-stage schedule) over the whole of `config`
// (4 blocks).
std::unique_ptr<ProgramExecutor> OneWorker(const schedule::Schedule& s,
                                           const ModelConfig& config,
                                           const DataSource& data) {
  return ProgramExecutor::Create(schedule::RankScheduleOf(s, 0),
                                 Spec(config, {{0, 4}}), data, nullptr)
      .value();
}

TEST(ProgramExecutorTest, OneWorkerTrainsWithoutACommunicator) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  const schedule::Schedule s = Generate(Scheme::kGpipe, 1, 3);
  auto executor = OneWorker(s, config, *data);
  ASSERT_TRUE(executor->holds_last_stage());
  const StepMetrics first = executor->RunStep(0).value();
  EXPECT_TRUE(first.has_loss);
  // Random tokens from an untrained model: about ln(vocab) per sample.
  EXPECT_NEAR(first.loss, std::log(config.vocab_size), 0.5);
  EXPECT_EQ(first.samples, 6);
  EXPECT_EQ(first.tokens, 6 * config.seq_length);
  EXPECT_EQ(first.peak_stashed_slices, 3) << "GPipe stashes all N first";
  EXPECT_EQ(first.op_seconds.size(), s.workers[0].instructions.size());
  ASSERT_EQ(first.op_cpu_seconds.size(), first.op_seconds.size());
  double cpu_seconds = 0;
  for (size_t i = 0; i < first.op_seconds.size(); ++i) {
    // One compute thread: an op's CPU time is at most its wall time.
    EXPECT_LE(first.op_cpu_seconds[i], first.op_seconds[i] + 1e-3)
        << "op " << i;
    cpu_seconds += first.op_cpu_seconds[i];
  }
  EXPECT_GT(cpu_seconds, 0);
  EXPECT_NEAR(first.bubble_seconds, first.step_seconds - first.busy_seconds,
              1e-12);
  // The same step again, after one update, fits its samples better.
  double later = 0;
  for (int i = 0; i < 5; ++i) later = executor->RunStep(0).value().loss;
  EXPECT_LT(later, first.loss);
}

TEST(ProgramExecutorTest,
     SplitsThePeakIntoWeightsGradientsOptimizerAndActivations) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  auto executor = OneWorker(Generate(Scheme::kGpipe, 1, 2), config, *data);
  int64_t parameter_bytes = 0;
  for (const auto& [name, parameter] : executor->NamedParameters()) {
    parameter_bytes += static_cast<int64_t>(parameter.nbytes());
  }
  const StepMetrics step = executor->RunStep(0).value();
  EXPECT_EQ(step.weights_bytes, parameter_bytes);
  EXPECT_EQ(step.gradients_bytes, parameter_bytes);
  // AdamW: a first and a second moment per parameter.
  EXPECT_EQ(step.optimizer_bytes, 2 * parameter_bytes);
  EXPECT_GT(step.activations_bytes, 0);
  EXPECT_EQ(step.weights_bytes + step.gradients_bytes + step.optimizer_bytes +
                step.activations_bytes,
            step.memory_peak_bytes);
}

// A checkpoint writer reads the state a step left while the next step
// computes: that step's optimizer step, and only it, waits for the reader.
TEST(ProgramExecutorTest, TheOptimizerStepWaitsForAReaderOfTheStateBeforeIt) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  const schedule::Schedule s = Generate(Scheme::kGpipe, 1, 2);
  auto executor = OneWorker(s, config, *data);
  ASSERT_TRUE(executor->RunStep(0).ok());
  const at::Tensor live = executor->NamedParameters().front().second;
  const at::Tensor before = live.clone();

  std::promise<void> read;
  executor->DeferUpdatesUntil(read.get_future().share());
  std::atomic<bool> done{false};
  std::thread step([&] {
    EXPECT_TRUE(executor->RunStep(1).ok());
    done = true;
  });
  // A step of this model takes milliseconds; unheld, it would be over.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(done);
  EXPECT_TRUE(at::equal(live, before)) << "changed while being read";
  read.set_value();
  step.join();
  EXPECT_FALSE(at::equal(live, before));

  // Once waited for, a reader holds no later step up.
  const StepMetrics after = executor->RunStep(2).value();
  EXPECT_EQ(after.op_seconds.size(), s.workers[0].instructions.size());
}

TEST(ProgramExecutorTest, RejectsAPartitionThatDoesNotTileTheModel) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  const schedule::Schedule s = Generate(Scheme::kGpipe, 2, 2);
  // A gap cannot be written: Partition::Of refuses it (partition_test.cc).
  const auto short_model =
      ProgramExecutor::Create(schedule::RankScheduleOf(s, 0),
                              Spec(config, {{0, 1}, {1, 3}}), *data, nullptr);
  EXPECT_EQ(short_model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_model.status().message().find("4 blocks"), std::string::npos)
      << short_model.status();
  const auto stages = ProgramExecutor::Create(
      schedule::RankScheduleOf(s, 0), Spec(config, {{0, 4}}), *data, nullptr);
  EXPECT_NE(stages.status().message().find("2 model stages"), std::string::npos)
      << stages.status();
}

TEST(ProgramExecutorTest, RejectsProgramsItCannotRun) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  const auto no_comm = ProgramExecutor::Create(
      schedule::RankScheduleOf(Generate(Scheme::kGpipe, 2, 2), 1),
      Spec(config, {{0, 2}, {2, 4}}), *data, nullptr);
  EXPECT_NE(no_comm.status().message().find("needs a communicator"),
            std::string::npos)
      << no_comm.status();
  TaskSpec single = Spec(config, {{0, 1}, {1, 2}, {2, 3}, {3, 4}});
  single.micro_batch_size = 1;
  const auto halves = ProgramExecutor::Create(
      schedule::RankScheduleOf(Generate(Scheme::kChimera, 4, 8, 1,
                                        schedule::Concat::kBackwardHalving),
                               0),
      single, *data, nullptr);
  EXPECT_EQ(halves.status().code(), absl::StatusCode::kInvalidArgument);
  // What came over the wire is checked before it reaches the transport.
  schedule::RankSchedule stranger =
      schedule::RankScheduleOf(Generate(Scheme::kGpipe, 2, 2), 0);
  schedule::Instruction& send = *std::find_if(
      stranger.program.instructions.begin(),
      stranger.program.instructions.end(),
      [](const auto& inst) { return inst.op == schedule::OpKind::kSendAct; });
  send.peer = 2;
  const TaskSpec halves_of_two = Spec(config, {{0, 2}, {2, 4}});
  EXPECT_THAT(ProgramExecutor::Create(stranger, halves_of_two, *data, nullptr)
                  .status()
                  .message(),
              HasSubstr("its peer is not another rank of the job"));
  send.peer = 1;
  send.num_parts = 2;
  EXPECT_THAT(ProgramExecutor::Create(stranger, halves_of_two, *data, nullptr)
                  .status()
                  .message(),
              HasSubstr("its part is not one of at most 1 parts"));
  schedule::RankSchedule outside =
      schedule::RankScheduleOf(Generate(Scheme::kGpipe, 1, 1), 0);
  outside.program.rank = 1;
  const auto rank =
      ProgramExecutor::Create(outside, Spec(config, {{0, 4}}), *data, nullptr);
  EXPECT_NE(rank.status().message().find("rank 1"), std::string::npos);
}

TEST(ProgramExecutorTest, RefusesADeviceThisProcessCannotComputeOn) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  TaskSpec options = Spec(config, {{0, 4}});
  // No machine has 64 GPUs: refused on every build, for its own reason.
  options.device = c10::Device(c10::DeviceType::CUDA, 63);
  const auto executor = ProgramExecutor::Create(
      schedule::RankScheduleOf(Generate(Scheme::kGpipe, 1, 1), 0), options,
      *data, nullptr);
  ASSERT_FALSE(executor.ok());
  EXPECT_THAT(executor.status().message(), HasSubstr("device cuda:63"));
  if (!kWorkerHasGpuRuntime) {
    EXPECT_EQ(executor.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(executor.status().message(),
                HasSubstr("needs a worker built against a LibTorch with CUDA"));
  }
}

// One worker's parameters after `steps` steps of `s`, and the last step's
// metrics.
struct Trained {
  std::vector<std::pair<std::string, at::Tensor>> parameters;
  StepMetrics last;
};

Trained Train(const schedule::Schedule& s, const TaskSpec& options, int steps) {
  const auto data = Synthetic(options.model);
  auto executor = ProgramExecutor::Create(schedule::RankScheduleOf(s, 0),
                                          options, *data, nullptr)
                      .value();
  Trained trained;
  for (int step = 0; step < steps; ++step) {
    trained.last = executor->RunStep(step).value();
  }
  trained.parameters = executor->NamedParameters();
  return trained;
}

TEST(ProgramExecutorTest, SplitBackwardTrainsBitForBitLikeTheFusedOne) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  // Two chained chunks on one worker: the first stage's input gradient goes
  // to the local second stage, and the first stage gets token ids.
  schedule::ScheduleParams params;
  params.scheme = Scheme::kBreadthFirst;
  params.micro_batches = 3;
  params.chunks = 2;
  for (const bool recompute : {false, true}) {
    SCOPED_TRACE(recompute ? "recompute" : "stashed activations");
    params.recompute = recompute;
    const schedule::Schedule fused = schedule::GenerateSchedule(params).value();
    const TaskSpec options = Spec(config, {{0, 2}, {2, 4}});
    const Trained expected = Train(fused, options, 2);
    const Trained split =
        Train(chimera::testing::DeferEveryWeightGradient(fused), options, 2);
    ASSERT_EQ(split.parameters.size(), expected.parameters.size());
    for (size_t i = 0; i < split.parameters.size(); ++i) {
      EXPECT_TRUE(
          at::equal(split.parameters[i].second, expected.parameters[i].second))
          << split.parameters[i].first;
    }
    EXPECT_EQ(split.last.loss, expected.last.loss);
    EXPECT_GT(split.last.seconds_by_op.backward, 0);
    // Every entry waits for its deferred BACKWARD_WEIGHT.
    EXPECT_EQ(split.last.peak_stashed_slices, 2 * 3);
  }
}

TEST(ProgramExecutorTest, HoldsEachStashEntryUntilItsBackwardWeight) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  // One stage, 1F1B: the fused backward frees each entry right away.
  const schedule::Schedule fused = Generate(Scheme::kOneFOneB, 1, 3);
  const TaskSpec options = Spec(config, {{0, 4}});
  const StepMetrics eager = Train(fused, options, 1).last;
  EXPECT_EQ(eager.peak_stashed_slices, 1);
  const StepMetrics deferred =
      Train(chimera::testing::DeferEveryWeightGradient(fused), options, 1).last;
  EXPECT_EQ(deferred.peak_stashed_slices, 3);
  EXPECT_GT(deferred.activations_bytes, eager.activations_bytes);
}

// `s` with the instructions of rank 0 for which `pick` holds replaced by
// what `edit` returns for them (nothing: removed).
schedule::Schedule Edited(
    schedule::Schedule s,
    const std::function<bool(const schedule::Instruction&)>& pick,
    const std::function<
        std::vector<schedule::Instruction>(schedule::Instruction)>& edit) {
  std::vector<schedule::Instruction> edited;
  for (schedule::Instruction& inst : s.workers[0].instructions) {
    if (!pick(inst)) {
      edited.push_back(std::move(inst));
      continue;
    }
    for (schedule::Instruction& replacement : edit(inst)) {
      edited.push_back(std::move(replacement));
    }
  }
  s.workers[0].instructions = std::move(edited);
  return s;
}

TEST(ProgramExecutorTest, RefusesSplitBackwardsOutOfOrderNamingTheInstruction) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  const schedule::Schedule split = chimera::testing::DeferEveryWeightGradient(
      Generate(Scheme::kGpipe, 1, 2));
  const auto of = [](schedule::OpKind op, int mb) {
    return [op, mb](const schedule::Instruction& inst) {
      return inst.op == op && inst.micro_batches[0] == mb;
    };
  };
  const auto removed = [](const schedule::Instruction&) {
    return std::vector<schedule::Instruction>{};
  };
  const auto twice = [](const schedule::Instruction& inst) {
    return std::vector<schedule::Instruction>{inst, inst};
  };
  const auto recomputing = [](schedule::Instruction inst) {
    inst.recompute = true;
    return std::vector<schedule::Instruction>{inst};
  };
  schedule::Instruction weight;
  weight.op = schedule::OpKind::kBackwardWeight;
  weight.micro_batches = {1};
  schedule::Instruction input = weight;
  input.op = schedule::OpKind::kBackwardInput;
  input.micro_batches = {0};
  schedule::Instruction recomputing_weight = weight;
  recomputing_weight.recompute = true;
  const struct {
    schedule::Schedule program;
    schedule::Instruction named;
    std::string why;
  } cases[] = {
      {Edited(split, of(schedule::OpKind::kBackwardWeight, 0), removed), input,
       "no BACKWARD_WEIGHT of its slice follows it"},
      {Edited(split, of(schedule::OpKind::kBackwardInput, 1), removed), weight,
       "no BACKWARD_INPUT of its slice comes before it"},
      {Edited(split, of(schedule::OpKind::kBackwardInput, 0), twice), input,
       "the backward of its slice already ran"},
      {Edited(split, of(schedule::OpKind::kBackwardWeight, 1), recomputing),
       recomputing_weight, "a BACKWARD_WEIGHT never recomputes"},
  };
  for (const auto& c : cases) {
    const auto executor =
        ProgramExecutor::Create(schedule::RankScheduleOf(c.program, 0),
                                Spec(config, {{0, 4}}), *data, nullptr);
    ASSERT_FALSE(executor.ok()) << c.why;
    EXPECT_EQ(executor.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(executor.status().message(),
                HasSubstr(absl::StrCat("rank 0 instruction ",
                                       schedule::DescribeInstruction(c.named),
                                       ": ", c.why)));
  }
}

TEST(ProgramExecutorTest, RefusesAShardStepOfAStageItDoesNotShard) {
  const ModelConfig config = testing::TinyConfig(ModelFamily::kGpt);
  const auto data = Synthetic(config);
  schedule::Schedule s = Generate(Scheme::kGpipe, 1, 2);
  schedule::Instruction step;
  step.op = schedule::OpKind::kShardStep;
  auto& program = s.workers[0].instructions;
  program.insert(program.end() - 1, step);
  const auto executor = ProgramExecutor::Create(
      schedule::RankScheduleOf(s, 0), Spec(config, {{0, 4}}), *data, nullptr);
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(executor.status().message(),
              HasSubstr("rank 0 instruction SHARD_STEP chunk=0 stage=0: this "
                        "rank does not shard the stage (sharding: none)"));
}

TEST(GradientGroupsTest, OneGroupPerStageOverEveryReplica) {
  // Chimera D = 4, W = 2: stage s lives on positions s and 3 - s of both
  // replicas (ranks 0-3 and 4-7).
  const std::vector<CommGroup> groups =
      GradientGroups(schedule::OutlineOf(Generate(Scheme::kChimera, 4, 4, 2)),
                     /*tie_embeddings=*/false);
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].name, "stage-0");
  EXPECT_EQ(groups[0].ranks, (std::vector<int>{0, 3, 4, 7}));
  EXPECT_EQ(groups[1].ranks, (std::vector<int>{1, 2, 5, 6}));
  EXPECT_TRUE(ValidateCommGroups(groups, 8).ok());
  // One pipeline, one replica: nothing to reduce.
  EXPECT_TRUE(
      GradientGroups(schedule::OutlineOf(Generate(Scheme::kOneFOneB, 4, 4)),
                     /*tie_embeddings=*/false)
          .empty());
}

TEST(GradientGroupsTest, TiedEmbeddingsJoinTheFirstAndLastStagesHolders) {
  // 1F1B D = 4, W = 2: the first stage on ranks 0 and 4, the last on 3 and 7.
  const std::vector<CommGroup> groups =
      GradientGroups(schedule::OutlineOf(Generate(Scheme::kOneFOneB, 4, 4, 2)),
                     /*tie_embeddings=*/true);
  ASSERT_EQ(groups.size(), 5u);
  EXPECT_EQ(groups.back().name, kTiedEmbeddingGroup);
  EXPECT_EQ(groups.back().ranks, (std::vector<int>{0, 3, 4, 7}));
  EXPECT_TRUE(ValidateCommGroups(groups, 8).ok());
  // One stage: the head and the embedding share one tensor, no copies.
  EXPECT_TRUE(
      GradientGroups(schedule::OutlineOf(Generate(Scheme::kOneFOneB, 1, 2)),
                     /*tie_embeddings=*/true)
          .empty());
}

TEST(TiedGradientsCompleteTest, AfterTheLastWeightGradientOfAnEndStage) {
  // ZB-V, D = 2: rank 0 holds model stages 0 and 3, rank 1 stages 1 and 2.
  const schedule::Schedule s = Generate(Scheme::kZbV, 2, 4);
  for (int rank = 0; rank < 2; ++rank) {
    const schedule::WorkerProgram& program = s.workers[rank];
    const std::vector<size_t> complete =
        TiedGradientsComplete(program, s.topology);
    std::vector<size_t> expected;
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const schedule::Instruction& inst = program.instructions[i];
      const int model_stage = s.topology.ModelStage({inst.chunk, inst.stage});
      if (schedule::ComputesWeightGradient(inst.op) &&
          (model_stage == 0 || model_stage == 3)) {
        expected = {i};
      }
    }
    EXPECT_EQ(complete, expected) << "rank " << rank;
    EXPECT_EQ(complete.empty(), rank != 0);
  }
}

// Under PipeDream every update needs the tied gradient of its own
// micro-batch: complete after that micro-batch's backward on an end stage.
TEST(TiedGradientsCompleteTest, AfterEachUpdatesBackwardUnderPipeDream) {
  const schedule::Schedule s = Generate(Scheme::kPipeDream, 2, 2);
  for (int rank = 0; rank < 2; ++rank) {
    const schedule::WorkerProgram& program = s.workers[rank];
    std::vector<size_t> expected;
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      if (program.instructions[i].op != schedule::OpKind::kOptimizerStep) {
        continue;
      }
      size_t backward = i;
      while (program.instructions[backward].op != schedule::OpKind::kBackward) {
        --backward;
      }
      EXPECT_EQ(program.instructions[backward].micro_batches,
                program.instructions[i].micro_batches);
      expected.push_back(backward);
    }
    ASSERT_EQ(expected.size(), 2u) << "rank " << rank;
    EXPECT_EQ(TiedGradientsComplete(program, s.topology), expected)
        << "rank " << rank;
  }
}

TEST(MessageTagsTest, EveryTransferOfAScheduleHasItsOwnTag) {
  const schedule::Schedule s =
      Generate(Scheme::kChimera, 4, 8, 1, schedule::Concat::kBackwardHalving);
  const MessageTags tags(schedule::OutlineOf(s));
  std::set<int64_t> seen;
  int transfers = 0;
  for (int kind = 0; kind < 2; ++kind) {
    for (int chunk = 0; chunk < s.topology.num_chunks; ++chunk) {
      for (int stage = 0; stage < s.topology.depth; ++stage) {
        for (int mb = 0; mb < s.topology.micro_batches; ++mb) {
          for (int part = 0; part < 2; ++part, ++transfers) {
            const int64_t tag = tags.Of(static_cast<TransferKind>(kind),
                                        {chunk, stage}, mb, part);
            EXPECT_GE(tag, 0);
            EXPECT_EQ(P2pLane(tag), kind) << "tag " << tag;
            seen.insert(tag);
          }
        }
      }
    }
  }
  EXPECT_EQ(static_cast<int>(seen.size()), transfers);
}

TEST(P2pLinksTest, ChimeraLinksEveryNeighbourBothWays) {
  const schedule::Schedule s = Generate(Scheme::kChimera, 4, 4, 2);
  // Every rank lists the links it is on, and both ends of a link list it.
  std::set<std::pair<int, int>> listed;
  std::map<std::pair<int, int>, int> ends;
  for (const schedule::WorkerProgram& program : s.workers) {
    for (const P2pLink& link : P2pLinks(program)) {
      EXPECT_TRUE(link.src == program.rank || link.dst == program.rank);
      listed.emplace(link.src, link.dst);
      ++ends[{link.src, link.dst}];
    }
  }
  for (const auto& [link, count] : ends) EXPECT_EQ(count, 2);
  const std::vector<P2pLink> middle = P2pLinks(s.workers[1]);
  EXPECT_EQ(middle.size(), 4u) << "rank 1 talks to ranks 0 and 2 both ways";
  std::vector<P2pLink> links;
  for (const auto& [src, dst] : listed) links.push_back({src, dst});
  const std::vector<std::pair<int, int>> pairs(listed.begin(), listed.end());
  // Two replicas of ranks 0-3 and 4-7, each a chain in both directions.
  EXPECT_EQ(pairs, (std::vector<std::pair<int, int>>{{0, 1},
                                                     {1, 0},
                                                     {1, 2},
                                                     {2, 1},
                                                     {2, 3},
                                                     {3, 2},
                                                     {4, 5},
                                                     {5, 4},
                                                     {5, 6},
                                                     {6, 5},
                                                     {6, 7},
                                                     {7, 6}}));
  EXPECT_TRUE(ValidateP2pLinks(links, 8).ok());
}

TEST(P2pLinksTest, BadLinksAreRefusedNamingTheLink) {
  EXPECT_THAT(ValidateP2pLinks({{0, 0}}, 2).message(),
              HasSubstr("p2p link from rank 0 to rank 0 must join two "
                        "distinct ranks of [0, 2)"));
  EXPECT_THAT(ValidateP2pLinks({{0, 2}}, 2).message(),
              HasSubstr("from rank 0 to rank 2"));
  EXPECT_THAT(ValidateP2pLinks({{0, 1}, {0, 1}}, 2).message(),
              HasSubstr("is listed twice"));
}

}  // namespace
}  // namespace chimera::worker
