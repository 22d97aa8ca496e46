// What a job's resources.device turns into: the device the executor computes
// on, and a clear refusal where this build cannot run it (no crash, no hang
// in the rendezvous).
#include "worker/runtime/task_options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/string_view.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"
#include "worker/standalone/standalone.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

std::string JobYaml(absl::string_view device, absl::string_view dtype) {
  chimera::v1::TrainJob job = chimera::testing::TinyJob();
  job.mutable_spec()->mutable_model()->set_dtype(std::string(dtype));
  job.mutable_spec()->mutable_resources()->set_device(std::string(device));
  return chimera::testing::JobYaml(job);
}

TEST(TaskOptionsTest, ThreadsAreOneByDefaultAndNeverMoreThanTheCores) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  chimera::v1::ResourceSpec resources;
  EXPECT_EQ(ThreadsPerWorker(resources), 1);
  resources.set_threads_per_worker(1);
  EXPECT_EQ(ThreadsPerWorker(resources), 1);
  resources.set_threads_per_worker(4096);
  EXPECT_EQ(ThreadsPerWorker(resources), cores);
}

TEST(TaskOptionsTest, CpuJobsComputeOnTheCpu) {
  chimera::testing::TempDir dir;
  const auto run =
      LoadStandaloneJob(dir.WriteFile("job.yaml", JobYaml("cpu", "float64")));
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_FALSE(run->task.gpu);
  EXPECT_EQ(ExecutorOptionsFor(run->task, 1).device,
            c10::Device(c10::DeviceType::CPU));
}

TEST(TaskOptionsTest, GpuJobsComputeOnTheirGpuWhereTheBuildHasTheRuntime) {
  chimera::testing::TempDir dir;
  const auto run =
      LoadStandaloneJob(dir.WriteFile("job.yaml", JobYaml("gpu", "bfloat16")));
  if (!kWorkerHasGpuRuntime) {
    EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(run.status().message()),
                HasSubstr("spec.resources.device: gpu tasks need a worker "
                          "built against a LibTorch with CUDA and with NCCL"));
    return;
  }
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE(run->task.gpu);
  EXPECT_EQ(run->task.model.dtype, c10::ScalarType::BFloat16);
  EXPECT_EQ(ExecutorOptionsFor(run->task, 1).device,
            c10::Device(c10::DeviceType::CUDA, 1));
}

TEST(TaskOptionsTest, ExecutorOptionsPutAGpuTaskOnTheGivenDevice) {
  TaskOptions task;
  task.gpu = true;
  EXPECT_EQ(ExecutorOptionsFor(task, 3).device,
            c10::Device(c10::DeviceType::CUDA, 3));
  task.gpu = false;
  EXPECT_EQ(ExecutorOptionsFor(task, 3).device,
            c10::Device(c10::DeviceType::CPU));
}

}  // namespace
}  // namespace chimera::worker
