// `chimera-worker --profile` as a user runs it, and `chimera plan` reading the
// profile it writes.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/support/tiny_job.h"

namespace chimera {
namespace {

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
      {CHIMERA_WORKER_BINARY, "--profile", "--job", job, "--out", profile});
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
      RunProcess({CHIMERA_WORKER_BINARY, "--profile", "--job",
                  dir.WriteFile("job.yaml", ProfiledJobYaml())});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"kind\": \"ModelProfile\""));
  EXPECT_THAT(r.out, HasSubstr("\"source\": \"measured\""));
}

TEST(CliProfileTest, ProfileWithoutAJobExitsTwo) {
  const ProcessResult r = RunProcess({CHIMERA_WORKER_BINARY, "--profile"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--job is required with --profile"));
}

}  // namespace
}  // namespace chimera
