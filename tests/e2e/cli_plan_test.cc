// `chimera plan` as a user runs it.
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/planner/test_jobs.h"

namespace chimera {
namespace {

using ::chimera::testing::ProcessResult;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

// `message` as a file: its protobuf JSON mapping, which is YAML as well.
std::string AsYaml(const google::protobuf::Message& message) {
  std::string json;
  EXPECT_TRUE(google::protobuf::util::MessageToJsonString(message, &json).ok());
  return json;
}

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
       {"scheme", "width", "depth", "microBatchSize", "microBatches",
        "pipelines", "concat", "replication", "sharding", "recompute",
        "predictedIterationSeconds", "predictedSamplesPerSecond", "bubbleRatio",
        "peakMemoryBytesMax", "peakMemoryBytesMin", "fits", "partition",
        "placement"}) {
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

// DAPPLE's case for replication, through the CLI: a model whose first half
// computes twice as long on an eighth of the weights (ReplicationSearchTest),
// on three devices across a 10 Gbit/s network, is planned 2:1, and the JSON
// shows the heavy stage's two ranks.
TEST(CliPlanTest, ReplicatesTheHeavyStageOfAHeavyFirstModel) {
  chimera::v1::TrainJob job = planner::testing::LargeJob(2, 48, 3);
  job.mutable_spec()->mutable_model()->set_vocab_size(1024);
  job.mutable_spec()->mutable_parallelism()->set_schedule("1f1b");
  const chimera::v1::Cluster cluster =
      planner::testing::TestCluster(3, 1, /*inter_bandwidth=*/1.25e9);
  chimera::testing::TempDir dir;
  const std::string job_file = dir.WriteFile("job.yaml", AsYaml(job));
  const std::string cluster_file =
      dir.WriteFile("cluster.yaml", AsYaml(cluster));
  const std::string profile_file = dir.WriteFile(
      "profile.yaml", AsYaml(planner::testing::HeavyFirstHalf(job, cluster)));
  const std::vector<std::string> plan = {"plan",      "-f",         job_file,
                                         "--cluster", cluster_file, "--profile",
                                         profile_file};

  ProcessResult text = Chimera(plan);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  const std::vector<std::string> lines = absl::StrSplit(text.out, '\n');
  ASSERT_GE(lines.size(), 2u) << text.out;
  EXPECT_THAT(lines[1], HasSubstr("replication=2:1")) << text.out;

  std::vector<std::string> json_plan = plan;
  json_plan.insert(json_plan.end(), {"-o", "json", "--top", "1"});
  ProcessResult json = Chimera(json_plan);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const nlohmann::json best = nlohmann::json::parse(json.out)["candidates"][0];
  EXPECT_EQ(best["replication"], "2:1") << best;
  EXPECT_EQ(best["depth"], 2) << best;
  ASSERT_EQ(best["partition"].size(), 2u) << best;
  EXPECT_EQ(best["partition"][0]["numLayers"], 1) << best;
  EXPECT_EQ(best["placement"].size(), 3u) << best;
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
