#include "client/local_host_costs.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::client {
namespace {

using ::testing::MatchesRegex;

TEST(LocalHostCostsTest, TheCacheNameHashesTheBuildTheHostAndItsCores) {
  const std::string worker = "/opt/chimera/bin/chimera-worker 1000 1";
  const std::string name = HostCostsCacheName(worker, "host-a", 2);
  EXPECT_THAT(name, MatchesRegex("host-[0-9a-f]{16}\\.json"));
  EXPECT_EQ(HostCostsCacheName(worker, "host-a", 2), name);
  EXPECT_NE(HostCostsCacheName(worker + "0", "host-a", 2), name);
  EXPECT_NE(HostCostsCacheName(worker, "host-b", 2), name);
  EXPECT_NE(HostCostsCacheName(worker, "host-a", 4), name);
}

TEST(LocalHostCostsTest, FormatsEachFigureInItsUnit) {
  chimera::v1::HostCosts costs;
  costs.set_wake_up_seconds(1.9e-4);
  costs.set_message_post_seconds(7.4e-5);
  costs.set_message_receive_seconds(8.6e-4);
  costs.set_co_running_slowdown(0.021);
  EXPECT_EQ(FormatHostCosts(costs),
            "wake-up 0.19 ms; a message 0.07 ms to post, 0.86 ms to receive; "
            "co-running +2.1%");
}

}  // namespace
}  // namespace chimera::client
