// `chimera-worker profile` as a user runs it, and `chimera plan` reading the
// profile it writes.
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/algorithm/container.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera {
namespace {

using ::chimera::testing::ChildProcess;
using ::chimera::testing::JobYaml;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::chimera::testing::TinyJob;
using ::testing::HasSubstr;

// Small enough to profile in a second; parallelism left to the planner.
std::string ProfiledJobYaml() {
  chimera::v1::TrainJob job = TinyJob();
  chimera::v1::JobSpec& spec = *job.mutable_spec();
  spec.mutable_model()->set_num_layers(4);
  spec.mutable_model()->set_hidden_size(32);
  spec.mutable_model()->set_seq_length(16);
  spec.mutable_training()->set_global_batch_size(8);
  spec.clear_parallelism();
  spec.mutable_resources()->set_workers(4);
  return JobYaml(job);
}

TEST(CliProfileTest, PlanAcceptsTheProfileTheWorkerWrites) {
  const chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", ProfiledJobYaml());
  const std::string profile = dir.path() + "/profile.json";
  ProcessResult r = RunProcess(
      {CHIMERA_WORKER_BINARY, "profile", "--job", job, "--out", profile});
  ASSERT_EQ(r.exit_code, 0) << r.err;

  r = RunProcess({CHIMERA_BINARY, "plan", "-f", job, "--cluster",
                  "examples/clusters/local-cpu.yaml", "--profile", profile},
                 CHIMERA_SOURCE_DIR);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("samples/s"));
}

TEST(CliProfileTest, ProfileWritesJsonToStdoutByDefault) {
  const chimera::testing::TempDir dir;
  const ProcessResult r =
      RunProcess({CHIMERA_WORKER_BINARY, "profile", "--job",
                  dir.WriteFile("job.yaml", ProfiledJobYaml())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"ModelProfile\""));
  EXPECT_THAT(r.out, HasSubstr("\"source\": \"measured\""));
}

// Every layer's backward is timed whole and in its two halves, for the
// zero-bubble schedules' costs.
TEST(CliProfileTest, TimesTheBackwardsHalvesOfEveryLayer) {
  const chimera::testing::TempDir dir;
  const ProcessResult r =
      RunProcess({CHIMERA_WORKER_BINARY, "profile", "--job",
                  dir.WriteFile("job.yaml", ProfiledJobYaml())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json profile = nlohmann::json::parse(r.out);
  ASSERT_FALSE(profile.at("layers").empty());
  for (const nlohmann::json& layer : profile.at("layers")) {
    for (const nlohmann::json& timing : layer.at("timings")) {
      EXPECT_GT(timing.value("backwardInputSeconds", 0.0), 0) << layer.at("kind");
      EXPECT_GT(timing.value("backwardWeightSeconds", 0.0), 0) << layer.at("kind");
    }
  }
}

// The environment a running process started with, or last exec'd with.
std::vector<std::string> EnvironmentOf(pid_t pid) {
  std::ifstream file("/proc/" + std::to_string(pid) + "/environ");
  const std::string text((std::istreambuf_iterator<char>(file)),
                         std::istreambuf_iterator<char>());
  return absl::StrSplit(text, '\0', absl::SkipEmpty());
}

// LibTorch's OpenMP threads and OpenBLAS's spin against each other unless
// OpenMP's idle threads sleep, which its runtime reads only when it loads:
// a worker started without it starts itself again with it, before it
// measures anything (compute_threads.h has the figures).
TEST(CliProfileTest, ProfilesWithOpenMpThreadsThatSleepWhenIdle) {
  ASSERT_EQ(::unsetenv("OMP_WAIT_POLICY"), 0);
  const chimera::testing::TempDir dir;
  ChildProcess worker({CHIMERA_WORKER_BINARY, "profile", "--job",
                       dir.WriteFile("job.yaml", ProfiledJobYaml()), "--out",
                       dir.path() + "/profile.json"});
  ASSERT_TRUE(worker.started());
  bool passive = false;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(30);
       !passive && absl::Now() < deadline; absl::SleepFor(absl::Milliseconds(2))) {
    passive = absl::c_linear_search(EnvironmentOf(worker.pid()),
                                    "OMP_WAIT_POLICY=passive");
  }
  EXPECT_TRUE(passive) << "the profiling worker never ran with it";
  EXPECT_EQ(worker.Wait(absl::Seconds(60)), 0) << worker.err();
}

TEST(CliProfileTest, ProfileWithoutAJobExitsTwo) {
  const ProcessResult r = RunProcess({CHIMERA_WORKER_BINARY, "profile"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--job is required"));
}

}  // namespace
}  // namespace chimera
