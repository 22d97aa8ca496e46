// Chimera actually trains: a tiny GPT on examples/data/corpus.txt, run as a
// D = 4 Chimera pipeline in four processes for 200 steps, brings the
// byte-level loss from about ln 256 ≈ 5.5 well down towards the text's
// entropy.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "schedule/generator.h"
#include "tests/support/temp_dir.h"
#include "worker/harness/forked_ranks.h"
#include "worker/harness/pipeline_job.h"
#include "worker/harness/training_record.h"

namespace chimera::worker {
namespace {

using harness::PipelineJob;
using harness::RankExit;
using harness::RankRecordPath;
using harness::ReadTrainingRecord;
using harness::RunForkedRanks;
using harness::RunPipelineRank;
using harness::TrainingRecord;

constexpr int kSteps = 200;
constexpr int kDepth = 4;
// Whole run, all processes; it takes about 7 s on two shared cores.
constexpr absl::Duration kDeadline = absl::Seconds(240);
constexpr absl::Duration kOpTimeout = absl::Seconds(60);
// Last steps averaged, against step-to-step noise.
constexpr int kWindow = 10;

PipelineJob ChimeraOnCorpus() {
  schedule::ScheduleParams params;
  params.scheme = schedule::Scheme::kChimera;
  params.depth = kDepth;
  params.micro_batches = kDepth;
  ModelConfig model;
  model.num_layers = kDepth;
  model.hidden_size = 32;
  model.ffn_size = 128;
  model.num_heads = 4;
  model.vocab_size = 256;
  model.seq_length = 32;
  PipelineJob job = harness::MakePipelineJob(
      schedule::GenerateSchedule(params).value(), model,
      /*micro_batch_size=*/4, /*seed=*/5, kOpTimeout);
  job.spec.optimizer.kind = OptimizerKind::kAdamW;
  job.spec.optimizer.lr = 3e-3;
  job.spec.data.format = DataFormat::kText;
  job.spec.data.path = CHIMERA_SOURCE_DIR "/examples/data/corpus.txt";
  job.spec.max_steps = kSteps;
  return job;
}

double Mean(const std::vector<double>& values, size_t begin, size_t end) {
  return std::accumulate(values.begin() + begin, values.begin() + end, 0.0) /
         static_cast<double>(end - begin);
}

TEST(LossCurveTest, ChimeraTrainsATinyGptOnText) {
  const PipelineJob job = ChimeraOnCorpus();
  const chimera::testing::TempDir dir;
  for (const RankExit& exit : RunForkedRanks(
           kDepth, kDeadline, [&](int rank, TcpRendezvous&rendezvous) {
             return RunPipelineRank(job, RankRecordPath(dir.path(), rank), rank,
                                    rendezvous);
           })) {
    ASSERT_TRUE(exit.ok()) << exit;
  }
  // Each step's mini-batch loss is the sum over the ranks' shares.
  std::vector<double> losses(kSteps, 0.0);
  for (int rank = 0; rank < kDepth; ++rank) {
    const absl::StatusOr<TrainingRecord> record =
        ReadTrainingRecord(RankRecordPath(dir.path(), rank));
    ASSERT_TRUE(record.ok()) << record.status();
    ASSERT_EQ(record->losses.size(), kSteps);
    for (int step = 0; step < kSteps; ++step) {
      losses[step] += record->losses[step];
    }
  }
  const double start = losses.front();
  const double end = Mean(losses, kSteps - kWindow, kSteps);
  RecordProperty("start_loss", absl::StrCat(start));
  RecordProperty("end_loss", absl::StrCat(end));
  EXPECT_GT(start, 5.0) << "an untrained byte model starts near ln 256";
  EXPECT_LT(end, start - 2.0) << "start " << start << ", end " << end;
}

}  // namespace
}  // namespace chimera::worker
