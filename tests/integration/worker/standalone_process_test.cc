// `chimera-worker standalone` as users run it: one process per rank on
// loopback, one line per step from the rank holding the last stage, and
// exit code 2 with the offending flag or field named for bad input.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/free_port.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera::worker {
namespace {

using chimera::testing::ChildProcess;
using chimera::testing::FreePort;
using chimera::testing::JobYaml;
using chimera::testing::ProcessResult;
using chimera::testing::RunProcess;
using chimera::testing::TempDir;
using chimera::testing::TinyJob;

constexpr absl::Duration kRunTimeout = absl::Seconds(120);
constexpr int kBadInput = 2;

// The tiny job (1F1B on two ranks) training 4 seeded steps of AdamW in
// float64 on the example corpus; with a `checkpoint_dir`, checkpointing every
// step to `checkpoint_dir`/tiny under the checkpoint root.
chimera::v1::TrainJob StandaloneJob(const std::string& checkpoint_dir = "") {
  chimera::v1::TrainJob job = TinyJob();
  chimera::v1::JobSpec& spec = *job.mutable_spec();
  spec.mutable_model()->set_dtype("float64");
  spec.mutable_data()->set_format("text");
  spec.mutable_data()->set_path("examples/data/corpus.txt");
  chimera::v1::TrainingSpec& training = *spec.mutable_training();
  training.set_max_steps(4);
  training.set_seed(1);
  training.mutable_optimizer()->set_name("adamw");
  training.mutable_optimizer()->set_lr(1.0e-2);
  if (!checkpoint_dir.empty()) {
    training.set_checkpoint_every(1);
    training.set_checkpoint_dir(checkpoint_dir);
  }
  return job;
}

// Data from the source tree; checkpoints beside the job file.
std::vector<std::string> WorkerArgs(const std::string& job, int rank, int world,
                                    const std::string& store) {
  return {CHIMERA_WORKER_BINARY,
          "standalone",
          "--job",
          job,
          "--rank",
          std::to_string(rank),
          "--world",
          std::to_string(world),
          "--store",
          store,
          "--data-root",
          CHIMERA_SOURCE_DIR,
          "--checkpoint-root",
          std::filesystem::path(job).parent_path().string()};
}

using Ranks = std::vector<std::unique_ptr<net::ChildProcess>>;

// Starts one rank per entry of `jobs` (rank r runs jobs[r]) around a fresh
// rendezvous store, each with `extra` flags.
Ranks StartRanks(const std::vector<std::string>& jobs,
                 const std::vector<std::string>& extra = {}) {
  const std::string store = absl::StrCat("127.0.0.1:", FreePort());
  const int world = static_cast<int>(jobs.size());
  Ranks ranks;
  for (int rank = 0; rank < world; ++rank) {
    std::vector<std::string> args = WorkerArgs(jobs[rank], rank, world, store);
    args.insert(args.end(), extra.begin(), extra.end());
    ranks.push_back(std::make_unique<net::ChildProcess>(args));
  }
  return ranks;
}

TEST(StandaloneProcessTest, TwoRanksTrainAndTheLastStagePrintsEachStep) {
  const TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", JobYaml(StandaloneJob()));
  const Ranks ranks = StartRanks({job, job});
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(kRunTimeout), 0) << rank->err();
  }
  // 1F1B puts the last stage on rank 1; rank 0 prints nothing.
  EXPECT_EQ(ranks[0]->out(), "");
  const std::vector<std::string> lines =
      absl::StrSplit(ranks[1]->out(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << ranks[1]->out();
  for (int step = 0; step < 4; ++step) {
    EXPECT_TRUE(absl::StartsWith(lines[step],
                                 absl::StrCat("step ", step + 1, " loss ")))
        << lines[step];
    EXPECT_TRUE(absl::StrContains(lines[step], " bubble_ratio "));
    EXPECT_TRUE(absl::StrContains(lines[step], " peak_memory_bytes "));
    // Per rank, rank 0 first: bubble ratio, peak, memory split, process peak.
    const std::vector<std::string> fields = absl::StrSplit(lines[step], ' ');
    ASSERT_EQ(fields.size(), 18u) << lines[step];
    EXPECT_EQ(fields[10], "rank_bubble_ratios");
    EXPECT_EQ(std::vector<std::string>(absl::StrSplit(fields[11], ',')).size(),
              2u);
    EXPECT_EQ(fields[12], "rank_peak_memory_bytes");
    const std::vector<std::string> peaks = absl::StrSplit(fields[13], ',');
    ASSERT_EQ(peaks.size(), 2u) << lines[step];
    EXPECT_EQ(peaks[1], fields[9]) << "the reporting rank 1's own peak";
    EXPECT_EQ(fields[14], "rank_memory_split_bytes");
    const std::vector<std::string> splits = absl::StrSplit(fields[15], ',');
    ASSERT_EQ(splits.size(), 2u) << lines[step];
    EXPECT_EQ(fields[16], "rank_process_peak_memory_bytes");
    const std::vector<std::string> process_peaks =
        absl::StrSplit(fields[17], ',');
    ASSERT_EQ(process_peaks.size(), 2u) << lines[step];
    for (int rank = 0; rank < 2; ++rank) {
      // weights/gradients/optimizer/activations add up to the step's peak,
      // which the process's peak bounds.
      int64_t peak = 0, process_peak = 0, sum = 0;
      ASSERT_TRUE(absl::SimpleAtoi(peaks[rank], &peak)) << peaks[rank];
      ASSERT_TRUE(absl::SimpleAtoi(process_peaks[rank], &process_peak));
      const std::vector<std::string> parts = absl::StrSplit(splits[rank], '/');
      ASSERT_EQ(parts.size(), 4u) << splits[rank];
      for (const std::string& part : parts) {
        int64_t bytes = 0;
        ASSERT_TRUE(absl::SimpleAtoi(part, &bytes)) << part;
        EXPECT_GE(bytes, 0) << splits[rank];
        sum += bytes;
      }
      EXPECT_GT(peak, 0) << lines[step];
      EXPECT_EQ(sum, peak) << "rank " << rank << ": " << lines[step];
      EXPECT_GE(process_peak, peak) << "rank " << rank << ": " << lines[step];
    }
  }
}

// The asynchronous schedules' last sends of a step are received in the
// next, and the ranks print a summary of every step, which waits for all of
// them: a step must end without waiting for those sends (once it did, and
// two ranks waited for each other until the transfer timeout). The weights
// reported count every version kept: PipeDream's first stage two, its
// second one, 2BW's two each.
TEST(StandaloneProcessTest, AsynchronousRanksPrintEveryStepWithoutWaiting) {
  for (const auto& [schedule, versions] :
       {std::pair<std::string, std::vector<int64_t>>{"pipedream", {2, 1}},
        {"pipedream-2bw", {2, 2}}}) {
    SCOPED_TRACE(schedule);
    const TempDir dir;
    chimera::v1::TrainJob asynchronous = StandaloneJob();
    auto* parallelism = asynchronous.mutable_spec()->mutable_parallelism();
    parallelism->set_schedule(schedule);
    parallelism->set_allow_asynchronous(true);
    const std::string job = dir.WriteFile("job.yaml", JobYaml(asynchronous));
    const Ranks ranks = StartRanks({job, job}, {"--timeout", "20"});
    for (auto& rank : ranks) {
      EXPECT_EQ(rank->Wait(kRunTimeout), 0) << rank->err();
    }
    const std::vector<std::string> lines =
        absl::StrSplit(ranks[1]->out(), '\n', absl::SkipEmpty());
    ASSERT_EQ(lines.size(), 4u) << ranks[1]->out();
    // Each rank's memory split: weights/gradients/optimizer/activations,
    // its gradients one version's bytes (SGD's state none, AdamW's two).
    const std::vector<std::string> fields = absl::StrSplit(lines[3], ' ');
    ASSERT_EQ(fields.size(), 18u) << lines[3];
    const std::vector<std::string> splits = absl::StrSplit(fields[15], ',');
    ASSERT_EQ(splits.size(), 2u);
    for (int rank = 0; rank < 2; ++rank) {
      const std::vector<std::string> parts = absl::StrSplit(splits[rank], '/');
      int64_t weights = 0, gradients = 0;
      ASSERT_TRUE(absl::SimpleAtoi(parts[0], &weights)) << splits[rank];
      ASSERT_TRUE(absl::SimpleAtoi(parts[1], &gradients)) << splits[rank];
      EXPECT_EQ(weights, versions[rank] * gradients)
          << "rank " << rank << ": " << lines[3];
    }
  }
}

// A loss that went nan from the second step on ended SUCCEEDED. Training
// stops at the first non-finite loss, naming the step and the rank.
TEST(StandaloneProcessTest, ADivergingRunStopsAtTheFirstNonFiniteLossNamingIt) {
  const TempDir dir;
  chimera::v1::TrainJob diverging = StandaloneJob();
  diverging.mutable_spec()->mutable_training()->mutable_optimizer()->set_lr(
      1e300);
  const std::string job = dir.WriteFile("job.yaml", JobYaml(diverging));
  const Ranks ranks = StartRanks({job, job});
  // The last stage is rank 1's: it sees the loss. Rank 0 would wait for it
  // until its collective timeout; a coordinator would stop it at once.
  EXPECT_EQ(ranks[1]->Wait(kRunTimeout), 1);
  ranks[0]->Signal(SIGTERM);
  EXPECT_TRUE(absl::StrContains(ranks[1]->err(), ": the training loss is "))
      << ranks[1]->err();
  EXPECT_TRUE(absl::StrContains(ranks[1]->err(), "on rank 1"))
      << ranks[1]->err();
  EXPECT_TRUE(absl::StrContains(ranks[1]->err(), "training diverged"))
      << ranks[1]->err();
  EXPECT_LT(std::count(ranks[1]->out().begin(), ranks[1]->out().end(), '\n'),
            4)
      << "it trained on after the loss went non-finite";
}

// A rank that stops (SIGSTOP: a frozen host, a debugger) is named by its
// partner once the job's timeout passes. The executor's waits used to stay
// at 5 minutes whatever the timeout, so the partner named it that late.
TEST(StandaloneProcessTest, AStoppedPeerIsNamedByItsPartnerWithinTheTimeout) {
  const TempDir dir;
  chimera::v1::TrainJob long_steps = StandaloneJob();
  chimera::v1::JobSpec& spec = *long_steps.mutable_spec();
  // Steps long enough (tens of ms) that rank 1, stopped as it starts one,
  // still owes rank 0 its gradients.
  spec.mutable_model()->set_hidden_size(128);
  spec.mutable_model()->set_seq_length(32);
  spec.mutable_training()->set_global_batch_size(16);
  spec.mutable_parallelism()->set_micro_batches(8);
  spec.mutable_training()->set_max_steps(100000);
  const std::string job = dir.WriteFile("job.yaml", JobYaml(long_steps));
  const Ranks ranks = StartRanks({job, job}, {"--timeout", "5"});
  // Rank 1 reports each step once every rank finished it.
  for (;;) {
    absl::StatusOr<std::string> line = ranks[1]->ReadLine(kRunTimeout);
    ASSERT_TRUE(line.ok()) << line.status() << "\n" << ranks[1]->err();
    if (absl::StartsWith(*line, "step 2 ")) break;
  }
  ranks[1]->Signal(SIGSTOP);
  // Well within the 5 minutes it once took, and not by being killed.
  EXPECT_EQ(ranks[0]->Wait(absl::Seconds(60)), 1) << ranks[0]->err();
  EXPECT_TRUE(absl::StrContains(
      ranks[0]->err(), "rank 1 sent nothing within 5s (stopped, hung or cut off)"))
      << ranks[0]->err();
  ranks[1]->Signal(SIGKILL);
  ranks[1]->Wait(kRunTimeout);
}

TEST(StandaloneProcessTest, RanksOfDifferentSchedulesStopBeforeAnyStep) {
  const TempDir dir;
  chimera::v1::TrainJob gpipe = StandaloneJob();
  gpipe.mutable_spec()->mutable_parallelism()->set_schedule("gpipe");
  // Two ranks of two stages each, but one runs 1F1B and the other GPipe:
  // they would deadlock or train wrong weights.
  const std::vector<std::string> jobs = {
      dir.WriteFile("1f1b.yaml", JobYaml(StandaloneJob())),
      dir.WriteFile("gpipe.yaml", JobYaml(gpipe))};
  const Ranks ranks = StartRanks(jobs, {"--timeout", "5"});
  EXPECT_EQ(ranks[1]->Wait(kRunTimeout), 1) << ranks[1]->err();
  EXPECT_TRUE(absl::StrContains(ranks[1]->err(), "rank 1 was sent schedule "))
      << ranks[1]->err();
  EXPECT_TRUE(absl::StrContains(ranks[1]->err(),
                                "the ranks were not started for one schedule"))
      << ranks[1]->err();
  // Rank 0 waits for a partner that never comes, no longer than told.
  EXPECT_EQ(ranks[0]->Wait(kRunTimeout), 1) << ranks[0]->err();
  EXPECT_EQ(ranks[0]->out(), "");
  EXPECT_EQ(ranks[1]->out(), "");
}

// Runs `world` ranks of `job` with `extra` flags; the reporting rank's lines
// as step -> loss.
std::map<int, double> RunRanks(const std::string& job, int world,
                               const std::vector<std::string>& extra = {}) {
  const Ranks ranks = StartRanks(std::vector<std::string>(world, job), extra);
  std::map<int, double> losses;
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(kRunTimeout), 0) << rank->err();
    for (absl::string_view line :
         absl::StrSplit(rank->out(), '\n', absl::SkipEmpty())) {
      const std::vector<absl::string_view> words = absl::StrSplit(line, ' ');
      int step = 0;
      double loss = 0;
      if (words.size() > 3 && absl::SimpleAtoi(words[1], &step) &&
          absl::SimpleAtod(words[3], &loss)) {
        losses[step] = loss;
      }
    }
  }
  return losses;
}

TEST(StandaloneProcessTest, ResumesFromTheCheckpointUnderAnotherPartition) {
  const TempDir dir;
  chimera::v1::TrainJob job = StandaloneJob("ck");
  const std::string pipelined = dir.WriteFile("pipelined.yaml", JobYaml(job));
  const std::map<int, double> uninterrupted = RunRanks(pipelined, 2);
  ASSERT_EQ(uninterrupted.size(), 4u);
  // Only the last two checkpoints are kept.
  for (int step = 1; step <= 4; ++step) {
    EXPECT_EQ(std::filesystem::exists(
                  absl::StrCat(dir.path(), "/ck/tiny/step-", step)),
              step >= 3)
        << step;
  }

  // Two steps on two pipeline stages, then the rest on one process holding
  // the whole model: the loss goes on exactly as without the interruption.
  EXPECT_EQ(RunRanks(pipelined, 2, {"--steps", "2"}).size(), 2u);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/ck/tiny/step-3"))
      << "a fresh run replaces the job's checkpoints";
  job.mutable_spec()->mutable_parallelism()->set_schedule("gpipe");
  job.mutable_spec()->mutable_parallelism()->set_pipeline(1);
  job.mutable_spec()->mutable_resources()->set_workers(1);
  const std::string whole = dir.WriteFile("whole.yaml", JobYaml(job));
  const std::map<int, double> resumed = RunRanks(whole, 1, {"--resume"});
  ASSERT_EQ(resumed.size(), 2u);
  for (int step : {3, 4}) {
    ASSERT_EQ(resumed.count(step), 1u) << step;
    EXPECT_NEAR(resumed.at(step), uninterrupted.at(step), 1e-6) << step;
  }
}

// Chimera at D = 2 holds each stage on both ranks: with sharding, each
// writes its part of every stage; one process holding the whole model
// unsharded resumes from them as from the job that never stopped.
TEST(StandaloneProcessTest,
     AShardedJobsCheckpointResumesUnshardedOnOneProcess) {
  const TempDir dir;
  chimera::v1::TrainJob job = StandaloneJob("ck");
  job.mutable_spec()->mutable_parallelism()->set_schedule("gpipe");
  job.mutable_spec()->mutable_parallelism()->set_pipeline(1);
  job.mutable_spec()->mutable_resources()->set_workers(1);
  const std::string whole = dir.WriteFile("whole.yaml", JobYaml(job));
  const std::map<int, double> uninterrupted = RunRanks(whole, 1);
  ASSERT_EQ(uninterrupted.size(), 4u);

  chimera::v1::ParallelismSpec& parallelism =
      *job.mutable_spec()->mutable_parallelism();
  parallelism.set_schedule("chimera");
  parallelism.set_pipeline(2);
  parallelism.set_sharding("optimizer");
  job.mutable_spec()->mutable_resources()->set_workers(2);
  const std::string sharded = dir.WriteFile("sharded.yaml", JobYaml(job));
  EXPECT_EQ(RunRanks(sharded, 2, {"--steps", "2"}).size(), 2u);
  for (const char* part : {"part-0-of-2", "part-1-of-2"}) {
    EXPECT_TRUE(std::filesystem::exists(
        absl::StrCat(dir.path(), "/ck/tiny/step-2/blocks-0-1.", part, ".pt")))
        << part;
  }
  const std::map<int, double> resumed = RunRanks(whole, 1, {"--resume"});
  ASSERT_EQ(resumed.size(), 2u);
  for (int step : {3, 4}) {
    ASSERT_EQ(resumed.count(step), 1u) << step;
    EXPECT_NEAR(resumed.at(step), uninterrupted.at(step), 1e-9) << step;
  }
}

// An asynchronous pipeline drains before each checkpoint and goes on from
// the newest weights, as a run resumed from that checkpoint does: stopped
// after step 2 and resumed, PipeDream and 2BW train steps 3 and 4 exactly
// as without the interruption.
TEST(StandaloneProcessTest, AnAsynchronousRunResumesAsIfItHadNotStopped) {
  for (const char* schedule : {"pipedream", "pipedream-2bw"}) {
    SCOPED_TRACE(schedule);
    const TempDir dir;
    chimera::v1::TrainJob job = StandaloneJob("ck");
    job.mutable_spec()->mutable_training()->set_checkpoint_every(2);
    auto* parallelism = job.mutable_spec()->mutable_parallelism();
    parallelism->set_schedule(schedule);
    parallelism->set_allow_asynchronous(true);
    const std::string file = dir.WriteFile("job.yaml", JobYaml(job));
    const std::map<int, double> uninterrupted = RunRanks(file, 2);
    ASSERT_EQ(uninterrupted.size(), 4u);

    EXPECT_EQ(RunRanks(file, 2, {"--steps", "2"}).size(), 2u);
    const std::map<int, double> resumed = RunRanks(file, 2, {"--resume"});
    ASSERT_EQ(resumed.size(), 2u);
    for (int step : {3, 4}) {
      ASSERT_EQ(resumed.count(step), 1u) << step;
      EXPECT_NEAR(resumed.at(step), uninterrupted.at(step), 1e-9) << step;
    }
  }
}

TEST(StandaloneProcessTest, ResumeWithoutACheckpointIsBadInput) {
  const TempDir dir;
  const std::string job =
      dir.WriteFile("job.yaml", JobYaml(StandaloneJob("ck")));
  std::vector<std::string> args = WorkerArgs(job, 0, 2, "127.0.0.1:1");
  args.push_back("--resume");
  const ProcessResult result = RunProcess(args);
  EXPECT_EQ(result.exit_code, kBadInput);
  EXPECT_TRUE(absl::StrContains(result.err, "--resume: no complete checkpoint"))
      << result.err;
}

TEST(StandaloneProcessTest, BadInputExitsTwoNamingTheFieldOrFlag) {
  const TempDir dir;
  const std::string good = dir.WriteFile("good.yaml", JobYaml(StandaloneJob()));
  chimera::v1::TrainJob unplanned_job = StandaloneJob();
  unplanned_job.mutable_spec()->mutable_parallelism()->clear_pipeline();
  unplanned_job.mutable_spec()->mutable_parallelism()->clear_micro_batches();
  const std::string unplanned =
      dir.WriteFile("unplanned.yaml", JobYaml(unplanned_job));
  chimera::v1::TrainJob gpu_job = StandaloneJob();
  gpu_job.mutable_spec()->mutable_resources()->set_device("gpu");
  const std::string gpu = dir.WriteFile("gpu.yaml", JobYaml(gpu_job));
  chimera::v1::TrainJob outside_job = StandaloneJob();
  outside_job.mutable_spec()->mutable_data()->set_path("/etc/passwd");
  const std::string outside =
      dir.WriteFile("outside.yaml", JobYaml(outside_job));
  auto with_transport = [](std::vector<std::string> args,
                           const char* transport) {
    args.insert(args.end(), {"--gpu-transport", transport});
    return args;
  };
  std::vector<std::string> missing_root = WorkerArgs(good, 0, 2, "127.0.0.1:1");
  missing_root.back() = dir.path() + "/missing";
  const struct {
    std::vector<std::string> args;
    std::string named;
  } cases[] = {
      {WorkerArgs(unplanned, 0, 2, "127.0.0.1:1"), "spec.parallelism.pipeline"},
      {WorkerArgs(good, 0, 3, "127.0.0.1:1"), "--world is 3"},
      {WorkerArgs(good, 2, 2, "127.0.0.1:1"), "--rank is 2"},
      {WorkerArgs(good, 0, 2, "localhost"), "--store"},
      {{CHIMERA_WORKER_BINARY, "standalone", "--rank", "0"}, "--job"},
      {with_transport(WorkerArgs(good, 0, 2, "127.0.0.1:1"), "gloo"),
       "--gpu-transport is 'gloo'; only gpu jobs choose"},
      {with_transport(WorkerArgs(gpu, 0, 2, "127.0.0.1:1"), "tcp"),
       "--gpu-transport is 'tcp'; use nccl or gloo"},
      {WorkerArgs(outside, 0, 2, "127.0.0.1:1"),
       "spec.data.path: '/etc/passwd' is absolute"},
      {missing_root, "--checkpoint-root: root '"},
  };
  for (const auto& c : cases) {
    const ProcessResult result = RunProcess(c.args);
    EXPECT_EQ(result.exit_code, kBadInput) << c.named << ": " << result.err;
    EXPECT_TRUE(absl::StrContains(result.err, c.named)) << result.err;
  }
}

}  // namespace
}  // namespace chimera::worker
