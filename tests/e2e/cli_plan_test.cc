// `chimera plan` as a user runs it.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

ProcessResult Chimera(std::vector<std::string> args) {
  args.insert(args.begin(), CHIMERA_BINARY);
  return RunProcess(args, CHIMERA_SOURCE_DIR);
}

TEST(CliPlanTest, TextTableRanksPlansAndExplainsTheBest) {
  ProcessResult r = Chimera({"plan", "-f", "examples/bert-auto.yaml", "--cluster",
                             "examples/clusters/v100-4x8.yaml", "--top", "3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("samples/s"));
  EXPECT_THAT(r.out, HasSubstr("mem_max"));
  EXPECT_THAT(r.out, HasSubstr("\n1    "));
  EXPECT_THAT(r.out, HasSubstr("\n3    "));
  EXPECT_THAT(r.out, HasSubstr("why: "));
  // Columns line up however long a cell: every row's bubble ends where the
  // header's does, and recomputation is named in full.
  EXPECT_THAT(r.out, HasSubstr(" recompute "));
  const std::vector<std::string> lines = absl::StrSplit(r.out, '\n');
  const size_t end = lines[0].find("bubble") + std::string("bubble").size();
  for (size_t i = 1; i <= 3; ++i) {
    ASSERT_GT(lines[i].size(), end) << lines[i];
    EXPECT_NE(lines[i][end - 1], ' ') << "row " << i << " is out of line:\n" << r.out;
    EXPECT_EQ(lines[i][end], ' ') << "row " << i << " is out of line:\n" << r.out;
  }
}

TEST(CliPlanTest, JsonHasTheStableFields) {
  ProcessResult r = Chimera({"plan", "-f", "examples/chimera.yaml", "--cluster",
                             "examples/clusters/local-cpu.yaml", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_FALSE(out["candidates"].empty());
  for (const char* field :
       {"scheme", "width", "depth", "microBatchSize", "microBatches", "pipelines",
        "concat", "recompute", "predictedIterationSeconds", "predictedSamplesPerSecond",
        "bubbleRatio", "peakMemoryBytesMax", "peakMemoryBytesMin", "fits"}) {
    EXPECT_TRUE(out["candidates"][0].contains(field)) << field;
  }
  // The job fixes chimera, D = 4, W = 1.
  EXPECT_EQ(out["candidates"][0]["scheme"], "chimera");
  EXPECT_EQ(out["candidates"][0]["depth"], 4);
  ProcessResult yaml = Chimera({"plan", "-f", "examples/chimera.yaml", "--cluster",
                                "examples/clusters/local-cpu.yaml", "-o", "yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  EXPECT_THAT(yaml.out, HasSubstr("scheme: chimera"));
  EXPECT_THAT(yaml.out, HasSubstr("whyBest: "));
}

// Llama 3 8B from its preset on 64 H100s: every plan that fits holds, per
// worker, at least its share of the training state (bfloat16 weights and
// gradients and AdamW's two moments: 8 bytes for each of the published
// 8,030,261,248 parameters, split over the pipeline's D stages), and no more
// than the GPU's 80 GiB.
TEST(CliPlanTest, PlansLlama3EightBFromItsPresetWithItsTrainingState) {
  ProcessResult r =
      Chimera({"plan", "-f", "examples/llama3-8b.yaml", "--cluster",
               "examples/clusters/h100-8x8.yaml", "-o", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json out = nlohmann::json::parse(r.out);
  ASSERT_FALSE(out["candidates"].empty());
  const double state_bytes = 8.0 * 8030261248;
  for (const auto& candidate : out["candidates"]) {
    if (!candidate["fits"].get<bool>()) continue;
    const double peak = candidate["peakMemoryBytesMax"].get<double>();
    EXPECT_GE(peak, state_bytes / candidate["depth"].get<int>()) << candidate;
    EXPECT_LE(peak, 80.0 * (1 << 30)) << candidate;
  }
}

TEST(CliPlanTest, NothingFittingExitsOneWithTheMemoryNeeded) {
  chimera::testing::TempDir dir;
  const std::string cluster = dir.WriteFile("tiny.yaml", R"(apiVersion: chimera.dev/v1alpha1
kind: Cluster
metadata: {name: tiny}
spec:
  nodes: 1
  devicesPerNode: 4
  device: {memoryBytes: 1000, peakFlops: 1.0e12}
  links:
    intraNode: {latencySeconds: 1.0e-6, bandwidthBytesPerSecond: 1.0e10}
)");
  ProcessResult r = Chimera({"plan", "-f", "examples/chimera.yaml", "--cluster", cluster});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no plan fits in 1000 bytes"));
}

TEST(CliPlanTest, InvalidClusterFileNamesTheField) {
  chimera::testing::TempDir dir;
  const std::string cluster = dir.WriteFile("bad.yaml", R"(apiVersion: chimera.dev/v1alpha1
kind: Cluster
spec: {nodes: 0, devicesPerNode: 4, device: {memoryBytes: 1, peakFlops: 1}, links: {intraNode: {bandwidthBytesPerSecond: 1}}}
)");
  ProcessResult r = Chimera({"plan", "-f", "examples/chimera.yaml", "--cluster", cluster});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr(cluster + ": spec.nodes: 0 must be > 0"));
}

}  // namespace
}  // namespace chimera
