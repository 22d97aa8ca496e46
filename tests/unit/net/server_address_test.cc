#include "net/server_address.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::net {
namespace {

using ::testing::HasSubstr;

TEST(ServerAddressTest, ParsesHostAndPort) {
  absl::StatusOr<net::ServerAddress> address = net::ParseServerAddress("127.0.0.1:50051");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->host, "127.0.0.1");
  EXPECT_EQ(address->port, 50051);
  EXPECT_TRUE(address->IsLoopback());
}

TEST(ServerAddressTest, ParsesBracketedIpv6AndPrintsItBack) {
  absl::StatusOr<net::ServerAddress> address = net::ParseServerAddress("[::1]:0");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(address->host, "::1");
  EXPECT_TRUE(address->IsLoopback());
  EXPECT_EQ(address->ToString(), "[::1]:0");
}

TEST(ServerAddressTest, WildcardHostIsNotLoopback) {
  EXPECT_FALSE(net::ParseServerAddress("0.0.0.0:50051")->IsLoopback());
  EXPECT_FALSE(net::ParseServerAddress("[::]:50051")->IsLoopback());
}

// Loopback by what a host resolves to: the check used to compare spellings,
// so a name beginning "127." passed, wherever its DNS pointed.
TEST(ServerAddressTest, LoopbackIsJudgedByTheAddressesAHostResolvesTo) {
  EXPECT_TRUE(net::ParseServerAddress("localhost:1")->IsLoopback());
  EXPECT_TRUE(net::ParseServerAddress("127.0.0.2:1")->IsLoopback());
  EXPECT_FALSE(net::ParseServerAddress("127.attacker.invalid:1")->IsLoopback());
  EXPECT_FALSE(net::ParseServerAddress("10.0.0.1:1")->IsLoopback());
}

TEST(ServerAddressTest, RejectsMissingOrBadPorts) {
  EXPECT_THAT(net::ParseServerAddress("localhost").status().message(),
              HasSubstr("must be HOST:PORT"));
  EXPECT_THAT(net::ParseServerAddress("localhost:http").status().message(),
              HasSubstr("port 'http'"));
  EXPECT_THAT(net::ParseServerAddress("localhost:70000").status().message(),
              HasSubstr("0-65535"));
  EXPECT_THAT(net::ParseServerAddress(":80").status().message(), HasSubstr("no host"));
}

TEST(ServerAddressTest, DialAddressNeedsARealPortAndNoScheme) {
  EXPECT_EQ(net::ParseDialAddress("127.0.0.1:50051")->port, 50051);
  EXPECT_THAT(net::ParseDialAddress("127.0.0.1:0").status().message(),
              HasSubstr("has port 0"));
  EXPECT_THAT(
      net::ParseDialAddress("http://127.0.0.1:50051").status().message(),
      HasSubstr("is a URL; give HOST:PORT"));
  EXPECT_THAT(net::ParseDialAddress("127.0.0.1").status().message(),
              HasSubstr("must be HOST:PORT"));
}

TEST(HostNameTest, AcceptsAddressesAndDnsNames) {
  for (const char* host : {"127.0.0.1", "10.1.2.3", "::1", "fe80::1", "localhost",
                           "worker-0", "chimera-worker-7.chimera.svc.cluster.local"}) {
    EXPECT_TRUE(IsHostNameOrAddress(host)) << host;
  }
}

// A worker's host is joined with a port to reach its rendezvous store, and
// shown by `chimera workers`: a port, brackets or a line break in it used to
// be taken as they came.
TEST(HostNameTest, RefusesPortsBracketsSpacesAndBadLabels) {
  for (const char* host : {"", "127.0.0.1:80", "[::1]", "::1]:80", "host\nname", "a b",
                           "-worker", "worker-", "a..b", ".worker", "worker.", "wörker",
                           "under_score"}) {
    EXPECT_FALSE(IsHostNameOrAddress(host)) << host;
  }
  EXPECT_TRUE(IsHostNameOrAddress(std::string(63, 'a')));
  EXPECT_FALSE(IsHostNameOrAddress(std::string(64, 'a')));
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  long_name += "d";  // 257 characters
  EXPECT_FALSE(IsHostNameOrAddress(long_name));
}

}  // namespace
}  // namespace chimera::net
