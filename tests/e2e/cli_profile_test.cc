// `chimera-worker --profile` as a user runs it, and `chimera plan` reading the
// profile it writes.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

// Small enough to profile in a second; parallelism left to the planner.
constexpr char kJob[] = R"(apiVersion: chimera.dev/v1alpha1
kind: TrainJob
metadata: {name: tiny-gpt}
spec:
  model: {family: gpt, numLayers: 4, hiddenSize: 32, numHeads: 2, seqLength: 16}
  data: {format: synthetic}
  training: {globalBatchSize: 8, microBatchSize: 2, maxSteps: 1, optimizer: {name: sgd, lr: 0.1}}
  resources: {workers: 4, device: cpu}
)";

TEST(CliProfileTest, PlanAcceptsTheProfileTheWorkerWrites) {
  const chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", kJob);
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
                  dir.WriteFile("job.yaml", kJob)});
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
