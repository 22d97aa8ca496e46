#include "planner/cluster_file.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::planner {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kCluster[] = R"(apiVersion: chimera.dev/v1alpha1
kind: Cluster
metadata: {name: test}
spec:
  nodes: 2
  devicesPerNode: 8
  device: {memoryBytes: 1000, peakFlops: 1.0e12, coresPerNode: 16, coRunningSlowdown: 0.25, wakeUpSeconds: 4.0e-4, messagePostSeconds: 6.0e-5, messageReceiveSeconds: 1.5e-4}
  links:
    intraNode: {latencySeconds: 1.0e-6, bandwidthBytesPerSecond: 1.0e11, collectiveLatencySeconds: 2.0e-6}
    interNode: {latencySeconds: 1.0e-5, bandwidthBytesPerSecond: 1.0e10}
)";

std::vector<std::string> Paths(const FieldErrors& errors) {
  std::vector<std::string> paths;
  for (const auto& error : errors.errors()) paths.push_back(error.path);
  return paths;
}

FieldErrors ParseWith(const std::string& from, const std::string& to) {
  chimera::v1::Cluster cluster;
  return ParseCluster(absl::StrReplaceAll(kCluster, {{from, to}}), &cluster);
}

TEST(ClusterFileTest, ParsesEveryField) {
  chimera::v1::Cluster cluster;
  FieldErrors errors = ParseCluster(kCluster, &cluster);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_EQ(cluster.spec().nodes(), 2);
  EXPECT_EQ(cluster.spec().device().memory_bytes(), 1000);
  EXPECT_DOUBLE_EQ(cluster.spec().links().inter_node().bandwidth_bytes_per_second(), 1e10);
  EXPECT_DOUBLE_EQ(cluster.spec().links().intra_node().collective_latency_seconds(), 2e-6);
  EXPECT_EQ(cluster.spec().device().cores_per_node(), 16);
  EXPECT_DOUBLE_EQ(cluster.spec().device().co_running_slowdown(), 0.25);
  EXPECT_DOUBLE_EQ(cluster.spec().device().wake_up_seconds(), 4e-4);
  EXPECT_DOUBLE_EQ(cluster.spec().device().message_post_seconds(), 6e-5);
  EXPECT_DOUBLE_EQ(cluster.spec().device().message_receive_seconds(), 1.5e-4);
}

TEST(ClusterFileTest, ZeroBandwidthIsNamed) {
  FieldErrors errors = ParseWith("bandwidthBytesPerSecond: 1.0e10", "bandwidthBytesPerSecond: 0");
  EXPECT_THAT(Paths(errors), ElementsAre("spec.links.interNode.bandwidthBytesPerSecond"));
}

TEST(ClusterFileTest, NegativeLatencyIsNamed) {
  FieldErrors errors = ParseWith("latencySeconds: 1.0e-6", "latencySeconds: -1");
  EXPECT_THAT(Paths(errors), ElementsAre("spec.links.intraNode.latencySeconds"));
}

TEST(ClusterFileTest, NegativeCollectiveLatencyIsNamed) {
  FieldErrors errors = ParseWith("latencySeconds: 1.0e-5,",
                                 "latencySeconds: 1.0e-5, collectiveLatencySeconds: -1,");
  EXPECT_THAT(Paths(errors), ElementsAre("spec.links.interNode.collectiveLatencySeconds"));
}

TEST(ClusterFileTest, NegativeCoRunningSlowdownIsNamed) {
  FieldErrors errors = ParseWith("coRunningSlowdown: 0.25", "coRunningSlowdown: -0.1");
  EXPECT_THAT(Paths(errors), ElementsAre("spec.device.coRunningSlowdown"));
}

TEST(ClusterFileTest, NegativeOrInfiniteHostCostsAreNamed) {
  EXPECT_THAT(Paths(ParseWith("wakeUpSeconds: 4.0e-4", "wakeUpSeconds: -1")),
              ElementsAre("spec.device.wakeUpSeconds"));
  EXPECT_THAT(Paths(ParseWith("messagePostSeconds: 6.0e-5",
                              "messagePostSeconds: .inf")),
              ElementsAre("spec.device.messagePostSeconds"));
  EXPECT_THAT(Paths(ParseWith("messageReceiveSeconds: 1.5e-4",
                              "messageReceiveSeconds: -1.5e-4")),
              ElementsAre("spec.device.messageReceiveSeconds"));
}

TEST(ClusterFileTest, SeveralNodesNeedAnInterNodeLink) {
  FieldErrors errors = ParseWith(
      "    interNode: {latencySeconds: 1.0e-5, bandwidthBytesPerSecond: 1.0e10}\n", "");
  EXPECT_THAT(Paths(errors), ElementsAre("spec.links.interNode.bandwidthBytesPerSecond"));
}

TEST(ClusterFileTest, MissingSizesAreAllReported) {
  chimera::v1::Cluster cluster;
  FieldErrors errors = ParseCluster(
      "apiVersion: chimera.dev/v1alpha1\nkind: Cluster\nspec: {nodes: 1}\n", &cluster);
  EXPECT_THAT(Paths(errors),
              ElementsAre("spec.devicesPerNode", "spec.device.memoryBytes",
                          "spec.device.peakFlops",
                          "spec.links.intraNode.bandwidthBytesPerSecond"));
}

TEST(ClusterFileTest, JobFileIsNotACluster) {
  FieldErrors errors = ParseWith("kind: Cluster", "kind: TrainJob");
  ASSERT_THAT(Paths(errors), ElementsAre("kind"));
  EXPECT_THAT(errors.errors()[0].message, HasSubstr("must be 'Cluster'"));
}

// What `chimera-worker host-costs` writes.
constexpr char kHostCosts[] = R"({
 "wakeUpSeconds": 0.00019,
 "messagePostSeconds": 7.4e-05,
 "messageReceiveSeconds": 0.00086,
 "coRunningSlowdown": 0.02
})";

TEST(ClusterFileTest, HostCostsParseEveryField) {
  chimera::v1::HostCosts costs;
  const FieldErrors errors = ParseHostCosts(kHostCosts, &costs);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_DOUBLE_EQ(costs.wake_up_seconds(), 1.9e-4);
  EXPECT_DOUBLE_EQ(costs.message_post_seconds(), 7.4e-5);
  EXPECT_DOUBLE_EQ(costs.message_receive_seconds(), 8.6e-4);
  EXPECT_DOUBLE_EQ(costs.co_running_slowdown(), 0.02);
}

TEST(ClusterFileTest, HostCostsOutOfRangeOrUnknownAreNamed) {
  chimera::v1::HostCosts costs;
  EXPECT_THAT(
      Paths(ParseHostCosts(absl::StrReplaceAll(kHostCosts, {{"0.02", "-0.5"},
                                                            {"7.4e-05", "-1"}}),
                           &costs)),
      ElementsAre("coRunningSlowdown", "messagePostSeconds"));
  EXPECT_THAT(Paths(ParseHostCosts(
                  absl::StrReplaceAll(kHostCosts,
                                      {{"\"wakeUpSeconds\"", "\"wakeUp\""}}),
                  &costs)),
              ElementsAre("wakeUp"));
  EXPECT_FALSE(ParseHostCosts("{\"wakeUpSeconds\": \"soon\"}", &costs).empty());
}

TEST(ClusterFileTest, ShippedExamplesAreValid) {
  int examples = 0;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::path(CHIMERA_SOURCE_DIR) / "examples" / "clusters")) {
    chimera::v1::Cluster cluster;
    FieldErrors errors = LoadClusterFile(entry.path().string(), &cluster);
    EXPECT_TRUE(errors.empty()) << entry.path() << "\n" << errors.ToStatus();
    ++examples;
  }
  EXPECT_GE(examples, 2);
}

}  // namespace
}  // namespace chimera::planner
