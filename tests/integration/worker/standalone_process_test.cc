// `chimera-worker --standalone` as users run it: one process per rank on
// loopback, one line per step from the rank holding the last stage, and
// exit code 2 with the offending flag or field named for bad input.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera::worker {
namespace {

using chimera::testing::ChildProcess;
using chimera::testing::ProcessResult;
using chimera::testing::RunProcess;
using chimera::testing::TempDir;

constexpr absl::Duration kRunTimeout = absl::Seconds(120);
constexpr int kBadInput = 2;

// A tiny 1F1B job over two ranks; `parallelism` is its spec.parallelism.
std::string JobYaml(const std::string& parallelism) {
  return absl::StrCat(R"(apiVersion: chimera.dev/v1alpha1
kind: TrainJob
metadata: {name: tiny}
spec:
  model: {family: gpt, numLayers: 2, hiddenSize: 16, numHeads: 2, seqLength: 8}
  data: {format: text, path: )",
                      CHIMERA_SOURCE_DIR, R"(/examples/data/corpus.txt}
  training:
    globalBatchSize: 4
    microBatchSize: 2
    maxSteps: 3
    seed: 1
    optimizer: {name: adamw, lr: 1.0e-2}
  parallelism: )",
                      parallelism, R"(
  resources: {workers: 2, device: cpu}
)");
}

constexpr char kParallelism[] =
    "{schedule: 1f1b, pipeline: 2, data: 1, microBatches: 2}";

// A port nothing listens on right now (the kernel's next ephemeral one).
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  ::close(fd);
  return port;
}

std::vector<std::string> WorkerArgs(const std::string& job, int rank, int world,
                                    const std::string& store) {
  return {CHIMERA_WORKER_BINARY,
          "--standalone",
          "--job",
          job,
          "--rank",
          std::to_string(rank),
          "--world",
          std::to_string(world),
          "--store",
          store};
}

TEST(StandaloneProcessTest, TwoRanksTrainAndTheLastStagePrintsEachStep) {
  const TempDir dir;
  const std::string job = dir.WriteFile("job.yaml", JobYaml(kParallelism));
  const std::string store = absl::StrCat("127.0.0.1:", FreePort());
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(
        std::make_unique<ChildProcess>(WorkerArgs(job, rank, 2, store)));
  }
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(kRunTimeout), 0) << rank->err();
  }
  // 1F1B puts the last stage on rank 1; rank 0 prints nothing.
  EXPECT_EQ(ranks[0]->out(), "");
  const std::vector<std::string> lines =
      absl::StrSplit(ranks[1]->out(), '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << ranks[1]->out();
  for (int step = 0; step < 3; ++step) {
    EXPECT_TRUE(absl::StartsWith(lines[step],
                                 absl::StrCat("step ", step + 1, " loss ")))
        << lines[step];
    EXPECT_TRUE(absl::StrContains(lines[step], " bubble_ratio "));
    EXPECT_TRUE(absl::StrContains(lines[step], " peak_memory_bytes "));
  }
}

TEST(StandaloneProcessTest, BadInputExitsTwoNamingTheFieldOrFlag) {
  const TempDir dir;
  const std::string good = dir.WriteFile("good.yaml", JobYaml(kParallelism));
  const std::string unplanned = dir.WriteFile(
      "unplanned.yaml", JobYaml("{schedule: 1f1b, data: 1}"));
  const struct {
    std::vector<std::string> args;
    std::string named;
  } cases[] = {
      {WorkerArgs(unplanned, 0, 2, "127.0.0.1:1"), "spec.parallelism.pipeline"},
      {WorkerArgs(good, 0, 3, "127.0.0.1:1"), "--world is 3"},
      {WorkerArgs(good, 2, 2, "127.0.0.1:1"), "--rank is 2"},
      {WorkerArgs(good, 0, 2, "localhost"), "--store"},
      {{CHIMERA_WORKER_BINARY, "--standalone", "--rank", "0"}, "--job"},
  };
  for (const auto& c : cases) {
    const ProcessResult result = RunProcess(c.args);
    EXPECT_EQ(result.exit_code, kBadInput) << c.named << ": " << result.err;
    EXPECT_TRUE(absl::StrContains(result.err, c.named)) << result.err;
  }
}

}  // namespace
}  // namespace chimera::worker
