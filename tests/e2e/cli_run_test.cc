// `chimera run`: the whole system on one machine, as the README's first
// command runs it.
#include <signal.h>

#include <cstdint>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/example_job.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::ChildProcess;
using ::chimera::testing::ExampleChimeraJob;
using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

// The most a job file may hold (jobspec::kMaxYamlFileBytes).
constexpr uint64_t kMaxJobBytes = 1 << 20;

// Processes whose command line mentions `needle` (other than this test).
int ProcessesMentioning(const std::string& needle) {
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string text((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    if (absl::StrContains(text, needle)) ++count;
  }
  return count;
}

TEST(CliRunTest, TrainsTheExampleJobAndCleansUp) {
  chimera::testing::TempDir dir;
  ProcessResult run =
      RunProcess({CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 20)},
                 CHIMERA_SOURCE_DIR, absl::Minutes(3));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("step 20/20"));
  EXPECT_THAT(run.out, HasSubstr("SUCCEEDED"));
  // The summary's losses: training made progress.
  const size_t at = run.out.find("first loss ");
  ASSERT_NE(at, std::string::npos) << run.out;
  std::vector<std::string> words = absl::StrSplit(run.out.substr(at), ' ', absl::SkipEmpty());
  double first = 0, final = 0;
  ASSERT_TRUE(absl::SimpleAtod(words[2], &first));
  ASSERT_TRUE(absl::SimpleAtod(words[5], &final));
  EXPECT_LT(final, first - 0.5);
  // One line per rank with its bubble ratio and peak memory.
  EXPECT_THAT(run.out, HasSubstr("local-"));
  EXPECT_THAT(run.out, HasSubstr("MiB"));
}

TEST(CliRunTest, InvalidJobFileExitsTwoWithoutStartingAnything) {
  chimera::testing::TempDir dir;
  const std::string job = dir.WriteFile("bad.yaml", "apiVersion: chimera.dev/v1alpha1\n");
  ProcessResult run = RunProcess({CHIMERA_BINARY, "run", "-f", job});
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("kind: '' must be 'TrainJob'"));
}

TEST(CliRunTest, GpuJobOnWorkersWithoutAGpuEndsWithTheReason) {
  // The workers here have no GPU (and a CPU-only LibTorch): the run must end
  // with the reason instead of leaving the job pending for ever.
  chimera::testing::TempDir dir;
  absl::StatusOr<std::string> yaml =
      ReadTextFile(ExampleChimeraJob(dir, 2), kMaxJobBytes);
  ASSERT_TRUE(yaml.ok()) << yaml.status();
  const std::string from = "device: cpu";
  yaml->replace(yaml->find(from), from.size(), "device: gpu");
  ProcessResult run = RunProcess(
      {CHIMERA_BINARY, "run", "-f", dir.WriteFile("gpu.yaml", *yaml)},
      CHIMERA_SOURCE_DIR, absl::Minutes(2));
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("spec.resources.device is gpu, but local worker local-"));
  EXPECT_THAT(run.err, HasSubstr("offers no GPU"));
  // "coordinator on 127.0.0.1:PORT, 4 local workers, logs in DIR"
  const size_t at = run.out.find("coordinator on ");
  ASSERT_NE(at, std::string::npos) << run.out;
  const std::string address = run.out.substr(at + 15, run.out.find(',', at) - at - 15);
  EXPECT_EQ(ProcessesMentioning(address), 0) << "workers left behind";
}

TEST(CliRunTest, InterruptStopsTheJobAndLeavesNoProcessBehind) {
  chimera::testing::TempDir dir;
  net::ChildProcess run(
      {CHIMERA_BINARY, "run", "-f", ExampleChimeraJob(dir, 100000)},
      CHIMERA_SOURCE_DIR);
  absl::StatusOr<std::string> banner = run.ReadLine(absl::Seconds(60));
  ASSERT_TRUE(banner.ok()) << banner.status() << run.err();
  // "coordinator on 127.0.0.1:PORT, 4 local workers, logs in DIR"
  const std::string address = banner->substr(15, banner->find(',') - 15);
  // Wait until training runs, then press Ctrl-C.
  absl::StatusOr<std::string> line;
  do {
    line = run.ReadLine(absl::Seconds(60));
  } while (line.ok() && !absl::StartsWith(*line, "step "));
  ASSERT_TRUE(line.ok()) << line.status() << run.err();
  run.Signal(SIGINT);
  EXPECT_EQ(run.Wait(absl::Seconds(60)), 130) << run.out() << run.err();
  EXPECT_THAT(run.out(), HasSubstr("STOPPED"));
  EXPECT_EQ(ProcessesMentioning(address), 0) << "worker processes outlived chimera run";
}

}  // namespace
}  // namespace chimera
