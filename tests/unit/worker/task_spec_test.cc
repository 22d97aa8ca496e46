// What a job's resources.device turns into: the device the executor computes
// on, and a clear refusal where this build cannot run it (no crash, no hang
// in the rendezvous).
#include "worker/runtime/task_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/support/path_swapper.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"
#include "worker/standalone/standalone.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string JobYaml(absl::string_view device, absl::string_view dtype) {
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_model()->set_dtype(std::string(dtype));
  job.mutable_spec()->mutable_resources()->set_device(std::string(device));
  return chimera::testing::JobYaml(job);
}

WorkerRoots Roots(const chimera::testing::TempDir& dir) {
  return *WorkerRootsFrom(dir.path(), dir.path());
}

// A worker whose roots are both `dir`, on GPU `gpu_index`.
TaskSite Site(const chimera::testing::TempDir& dir, int gpu_index = 0,
              absl::Duration timeout = absl::Minutes(1)) {
  return {.roots = Roots(dir), .gpu_index = gpu_index, .timeout = timeout};
}

TEST(TaskSpecTest, ThreadsByDefaultShareTheHostsCoresAmongItsWorkers) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  chimera::v1::ResourceSpec resources;
  EXPECT_EQ(ThreadsPerWorker(resources, 1), cores);
  EXPECT_EQ(ThreadsPerWorker(resources, 2), std::max(1, cores / 2));
  EXPECT_EQ(ThreadsPerWorker(resources, cores), 1);
  EXPECT_EQ(ThreadsPerWorker(resources, 3 * cores), 1);
}

TEST(TaskSpecTest, ThreadsAskedForAreGivenUpToTheCores) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  chimera::v1::ResourceSpec resources;
  resources.set_threads_per_worker(1);
  EXPECT_EQ(ThreadsPerWorker(resources, 1), 1);
  resources.set_threads_per_worker(cores);
  EXPECT_EQ(ThreadsPerWorker(resources, 4), cores);
  resources.set_threads_per_worker(4096);
  EXPECT_EQ(ThreadsPerWorker(resources, 1), cores);
}

TEST(TaskSpecTest, WorkersSharingAHostAreTheRanksPlacedOnItsNode) {
  chimera::v1::Plan plan;
  for (const auto& [rank, node] :
       std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 1}, {3, 0}}) {
    chimera::v1::Placement* placed = plan.add_placement();
    placed->set_rank(rank);
    placed->set_node(node);
  }
  EXPECT_EQ(WorkersSharingHost(plan, 0, 4), 3);
  EXPECT_EQ(WorkersSharingHost(plan, 3, 4), 3);
  EXPECT_EQ(WorkersSharingHost(plan, 2, 4), 1);
  // A standalone plan places nobody: all its ranks share the host.
  EXPECT_EQ(WorkersSharingHost(chimera::v1::Plan(), 1, 4), 4);
}

// ZB-H1 at D = 4 with the head on rank 3, the first three ranks on one
// two-core host: the head's rank keeps its priority, the others yield by
// their predicted busy share (1 - bubble) against the busiest of their host,
// whichever rank elsewhere computes more. Rank 3, alone on its node, has
// nobody to yield to.
TEST(TaskSpecTest, RanksThatComputeLessThanTheirHostsBusiestYieldItTheCores) {
  chimera::v1::Plan plan;
  for (const auto& [rank, node, bubble] :
       std::vector<std::tuple<int, int, double>>{
           {0, 0, 0.8}, {1, 0, 0.2}, {2, 0, 0.84}, {3, 1, 0.0}}) {
    chimera::v1::Placement* placed = plan.add_placement();
    placed->set_rank(rank);
    placed->set_node(node);
    plan.mutable_prediction()->add_rank_bubble_ratios(bubble);
  }
  EXPECT_EQ(NiceIncrementOf(plan, 0, 4, /*threads=*/1, /*cores=*/2), 6);
  EXPECT_EQ(NiceIncrementOf(plan, 1, 4, 1, 2), 0);
  EXPECT_EQ(NiceIncrementOf(plan, 2, 4, 1, 2), 7);
  EXPECT_EQ(NiceIncrementOf(plan, 3, 4, 1, 2), 0);
  // Where the host has a core for every rank's threads, nobody yields.
  EXPECT_EQ(NiceIncrementOf(plan, 0, 4, 1, 3), 0);
  EXPECT_EQ(NiceIncrementOf(plan, 0, 4, 2, 6), 0);
  EXPECT_EQ(NiceIncrementOf(plan, 0, 4, 2, 5), 6);
  // A plan without predictions (a standalone job's) changes nothing.
  chimera::v1::Plan unpredicted = plan;
  unpredicted.clear_prediction();
  EXPECT_EQ(NiceIncrementOf(unpredicted, 0, 4, 1, 2), 0);
}

// A plan whose stages leave a block out is refused at the process
// boundary, naming the range, before the executor is ever built.
TEST(TaskSpecTest, APartitionWithAGapIsRefusedNamingTheRange) {
  chimera::testing::TempDir dir;
  chimera::v1::Plan plan;
  plan.set_scheme("1f1b");
  plan.set_policy("pa");
  plan.set_width(1);
  plan.set_depth(2);
  plan.set_micro_batches(2);
  plan.set_micro_batch_size(2);
  for (const auto& [first, count] :
       std::vector<std::pair<int, int>>{{0, 1}, {2, 0}}) {
    chimera::v1::StageRange* range = plan.add_partition();
    range->set_first_layer(first);
    range->set_num_layers(count);
  }
  const absl::StatusOr<TaskSpec> task =
      TaskSpecFor(chimera::testing::TinyJob(), plan, 0, "tiny-1", Site(dir));
  EXPECT_EQ(task.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(task.status().message(),
              HasSubstr("plan: partition[1] is blocks [2, 2); it must start "
                        "at block 1 and hold at least one block"));
}

TEST(TaskSpecTest, TheShardingComesFromThePlan) {
  chimera::testing::TempDir dir;
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_parallelism()->set_schedule("chimera");
  job.mutable_spec()->mutable_parallelism()->set_sharding("optimizer");
  const auto run = LoadStandaloneJob(
      dir.WriteFile("job.yaml", chimera::testing::JobYaml(job)), Site(dir));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->spec.sharding, schedule::Sharding::kOptimizer);
  job.mutable_spec()->mutable_parallelism()->clear_sharding();
  const auto unsharded = LoadStandaloneJob(
      dir.WriteFile("none.yaml", chimera::testing::JobYaml(job)), Site(dir));
  ASSERT_TRUE(unsharded.ok()) << unsharded.status();
  EXPECT_EQ(unsharded->spec.sharding, schedule::Sharding::kNone);
}

TEST(TaskSpecTest, CpuJobsComputeOnTheCpu) {
  chimera::testing::TempDir dir;
  const auto run = LoadStandaloneJob(
      dir.WriteFile("job.yaml", JobYaml("cpu", "float64")), Site(dir, 1));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->spec.gpu());
  EXPECT_EQ(run->spec.device, c10::Device(c10::DeviceType::CPU));
}

TEST(TaskSpecTest, GpuJobsComputeOnTheirGpuWhereTheBuildHasTheRuntime) {
  chimera::testing::TempDir dir;
  const auto run = LoadStandaloneJob(
      dir.WriteFile("job.yaml", JobYaml("gpu", "bfloat16")), Site(dir, 1));
  if (!kWorkerHasGpuRuntime) {
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(run.status().message()),
                HasSubstr("spec.resources.device: gpu tasks need a worker "
                          "built against a LibTorch with CUDA and with NCCL"));
    return;
  }
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->spec.gpu());
  EXPECT_EQ(run->spec.model.dtype, c10::ScalarType::BFloat16);
  EXPECT_EQ(run->spec.device, c10::Device(c10::DeviceType::CUDA, 1));
}

TEST(TaskSpecTest, AStandaloneJobsRanksShareTheCoresOfTheHost) {
  chimera::testing::TempDir dir;
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_resources()->set_threads_per_worker(0);
  const auto run = LoadStandaloneJob(
      dir.WriteFile("job.yaml", chimera::testing::JobYaml(job)), Site(dir));
  ASSERT_TRUE(run.ok()) << run.status();
  const int world = static_cast<int>(run->schedule.workers.size());
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  EXPECT_EQ(run->spec.threads, std::max(1, cores / world)) << world << " ranks";
}

// A job's data file and checkpoint directory lie under the worker's roots,
// the checkpoints in the job's own directory.
TEST(TaskSpecTest, PathsResolveUnderTheWorkersRoots) {
  chimera::testing::TempDir data;
  chimera::testing::TempDir checkpoints;
  data.WriteFile("corpus.txt", std::string(200, 'a'));
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_data()->set_format("text");
  job.mutable_spec()->mutable_data()->set_path("corpus.txt");
  job.mutable_spec()->mutable_training()->set_checkpoint_every(1);
  job.mutable_spec()->mutable_training()->set_checkpoint_dir("runs");
  const auto run = LoadStandaloneJob(
      data.WriteFile("job.yaml", chimera::testing::JobYaml(job)),
      {.roots = *WorkerRootsFrom(data.path(), checkpoints.path())});
  ASSERT_TRUE(run.ok()) << run.status();
  // Both opened beneath their roots when the task starts (DataSource,
  // CheckpointDir).
  EXPECT_EQ(run->spec.data.root,
            std::filesystem::canonical(data.path()).string());
  EXPECT_EQ(run->spec.data.path, "corpus.txt");
  EXPECT_EQ(run->spec.checkpoints.every, 1);
  EXPECT_EQ(run->spec.checkpoints.root,
            std::filesystem::canonical(checkpoints.path()).string());
  EXPECT_EQ(run->spec.checkpoints.dir, "runs/tiny");
}

TEST(TaskSpecTest, ATorchScriptModelsPiecesAreBeneathTheDataRoot) {
  chimera::testing::TempDir data;
  std::filesystem::create_directory(data.path() + "/model");
  for (const char* piece :
       {"embedding.pt", "block-0.pt", "block-1.pt", "head.pt", "loss.pt"}) {
    data.WriteFile(std::string("model/") + piece,
                   "loaded when the task starts");
  }
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_model()->set_family("torchscript");
  job.mutable_spec()->mutable_model()->set_modules("model");
  const auto run = LoadStandaloneJob(
      data.WriteFile("job.yaml", chimera::testing::JobYaml(job)), Site(data));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->spec.model.family, ModelFamily::kTorchscript);
  ASSERT_TRUE(run->spec.modules.has_value());
  EXPECT_EQ(run->spec.modules->root,
            std::filesystem::canonical(data.path()).string());
  EXPECT_EQ(run->spec.modules->path, "model");
}

// What the job file's text cannot show: a link inside the data root to a
// file outside it. The worker refuses it without reading a byte of it.
TEST(TaskSpecTest, ALinkOutOfTheDataRootIsRefusedWithoutItsContent) {
  chimera::testing::TempDir outside;
  chimera::testing::TempDir data;
  const std::string secret =
      outside.WriteFile("secret.txt", std::string(200, 'S'));
  std::filesystem::create_symlink(secret, data.path() + "/innocent.txt");
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_data()->set_format("text");
  job.mutable_spec()->mutable_data()->set_path("innocent.txt");
  const auto run = LoadStandaloneJob(
      data.WriteFile("job.yaml", chimera::testing::JobYaml(job)), Site(data));
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(run.status().message()),
      HasSubstr("spec.data.path: 'innocent.txt' leads out of the root"));
  EXPECT_THAT(std::string(run.status().message()),
              Not(HasSubstr(outside.path())));
}

// The tiny job reading `data`'s corpus.txt (200 'a's, written here) as
// text, with `data` its data root.
absl::StatusOr<StandaloneRun> TextJobOnCorpus(
    const chimera::testing::TempDir& data) {
  data.WriteFile("corpus.txt", std::string(200, 'a'));
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_data()->set_format("text");
  job.mutable_spec()->mutable_data()->set_path("corpus.txt");
  return LoadStandaloneJob(
      data.WriteFile("job.yaml", chimera::testing::JobYaml(job)), Site(data));
}

// The job's path was checked, then swapped between a file inside the root
// and a link out of it while the task opened it: 1 open in 8 read the
// outside file, and its size showed in the error. The kernel now resolves
// the path beneath the root as it opens it.
TEST(TaskSpecTest, ADataFileSwappedForALinkOutAfterItsCheckIsNeverRead) {
  chimera::testing::TempDir outside;
  chimera::testing::TempDir data;
  const std::string secret =
      outside.WriteFile("secret.txt", std::string(4099, 'S'));
  const std::string inside =
      data.WriteFile("inside.txt", std::string(200, 'a'));
  const absl::StatusOr<StandaloneRun> run = TextJobOnCorpus(data);
  ASSERT_TRUE(run.ok()) << run.status();

  const chimera::testing::PathSwapper swapper(data.path() + "/corpus.txt",
                                              inside, secret);
  int opened = 0;
  int refused = 0;
  while (!swapper.Raced(opened, refused)) {
    const absl::StatusOr<std::unique_ptr<DataSource>> source =
        DataSource::Open(run->spec.data);
    if (source.ok()) {
      ++opened;
      // 200 'a's are 200 tokens of id 97; the secret would be 4099 'S's.
      const absl::StatusOr<at::Tensor> sample = (*source)->Samples(0, 0, 1);
      ASSERT_TRUE(sample.ok()) << sample.status();
      ASSERT_EQ((*sample)[0][0].item<int64_t>(), 'a');
      continue;
    }
    ++refused;
    ASSERT_EQ(source.status().code(), absl::StatusCode::kPermissionDenied)
        << source.status();
    ASSERT_THAT(std::string(source.status().message()), Not(HasSubstr("4099")));
    ASSERT_THAT(std::string(source.status().message()),
                HasSubstr("data file 'corpus.txt' leads out of the root"));
  }
  EXPECT_GT(opened, 0);
  EXPECT_GT(refused, 0);
}

// A task's errors reach whoever submitted the job: they showed the worker's
// absolute data root. They name the data file as the job does now.
TEST(TaskSpecTest, DataFileErrorsNameItAsTheJobDoesNotByTheWorkersRoot) {
  chimera::testing::TempDir data;
  const absl::StatusOr<StandaloneRun> run = TextJobOnCorpus(data);
  ASSERT_TRUE(run.ok()) << run.status();
  const std::string root = std::filesystem::canonical(data.path()).string();

  // Replaced by a binary file after the job was checked.
  data.WriteFile("corpus.txt", std::string(200, '\0'));
  const std::string binary(DataSource::Open(run->spec.data).status().message());
  EXPECT_THAT(binary, HasSubstr("'corpus.txt' is binary"));
  EXPECT_THAT(binary, Not(HasSubstr(root)));
  EXPECT_THAT(binary, Not(HasSubstr(data.path())));

  std::filesystem::remove(data.path() + "/corpus.txt");
  const std::string missing(
      DataSource::Open(run->spec.data).status().message());
  EXPECT_THAT(missing, HasSubstr("data file 'corpus.txt' does not exist"));
  EXPECT_THAT(missing, Not(HasSubstr(root)));
}

TEST(TaskSpecTest, RootsMustBeExistingDirectoriesNamedByTheirFlag) {
  chimera::testing::TempDir dir;
  const absl::StatusOr<WorkerRoots> roots =
      WorkerRootsFrom(dir.path() + "/missing", dir.WriteFile("file", "x"));
  EXPECT_EQ(roots.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(roots.status().message()),
              HasSubstr("--data-root: root '"));
  EXPECT_THAT(std::string(roots.status().message()),
              HasSubstr("--checkpoint-root: root '"));
}

// The executor's waits used to stay at 5 minutes whatever the job's timeout,
// so a stopped peer was named minutes late.
TEST(TaskSpecTest, EveryWaitIsBoundedByTheJobsTimeout) {
  chimera::testing::TempDir dir;
  const auto run =
      LoadStandaloneJob(dir.WriteFile("job.yaml", JobYaml("cpu", "float64")),
                        Site(dir, 0, absl::Seconds(7)));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->spec.timeouts.rendezvous, absl::Seconds(7));
  EXPECT_EQ(run->spec.timeouts.transfer, absl::Seconds(7));
  EXPECT_EQ(run->spec.timeouts.collective, absl::Seconds(7));
}

}  // namespace
}  // namespace chimera::worker
