// chimera-coordinator as a real process on loopback: it picks a free port,
// answers the standard gRPC health check, refuses to listen beyond loopback
// without authentication, and exits cleanly on SIGTERM.
#include "tests/support/coordinator_process.h"

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "client/coordinator_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::CoordinatorProcess;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

TEST(CoordinatorProcessTest, ServesHealthOnAnEphemeralPortAndStopsOnSigterm) {
  chimera::testing::TempDir dir;
  absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
      CHIMERA_COORDINATOR_BINARY, {"--db", dir.path() + "/jobs.db"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string& address = coordinator->address();
  ASSERT_TRUE(absl::StartsWith(address, "127.0.0.1:")) << address;
  ASSERT_FALSE(absl::EndsWith(address, ":0")) << "the chosen port is printed";

  client::ConnectionOptions options;
  options.address = address;
  absl::StatusOr<std::unique_ptr<client::CoordinatorClient>> client =
      client::CoordinatorClient::Connect(options);
  ASSERT_TRUE(client.ok()) << client.status();
  const absl::Status health = (*client)->CheckHealth();
  EXPECT_TRUE(health.ok()) << health;

  EXPECT_EQ(coordinator->Stop(), 0) << coordinator->err();
  EXPECT_THAT(coordinator->err(), HasSubstr("shutting down"));
}

TEST(CoordinatorProcessTest, RefusesANonLoopbackAddressWithoutAuthentication) {
  auto result = RunProcess(
      {CHIMERA_COORDINATOR_BINARY, "--listen", "0.0.0.0:0", "--db", ":memory:"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("refusing to serve on non-loopback host '0.0.0.0' without a "
                                    "client token and a worker token"));
}

// A token of one space or one letter, or one token for both roles, used to
// be taken for a non-loopback coordinator.
TEST(CoordinatorProcessTest, RefusesWeakOrSharedTokensNamingTheFlagAndTheRule) {
  const std::string good = "0123456789abcdef";
  const struct {
    std::string client_token;
    std::string worker_token;
    std::string expected;
  } cases[] = {
      {" ", good + "-w", "--client-token (or CHIMERA_CLIENT_TOKEN) is only spaces"},
      {good, "x",
       "--worker-token (or CHIMERA_WORKER_TOKEN) is too short: 1 of the at least 16 "
       "characters a token needs"},
      {std::string(20, ' '), good, "--client-token (or CHIMERA_CLIENT_TOKEN) is only spaces"},
      {good, good + "\n", "--worker-token (or CHIMERA_WORKER_TOKEN) holds a character that "
                          "is not printable ASCII"},
      {good, good, "--client-token and --worker-token (or CHIMERA_CLIENT_TOKEN and "
                   "CHIMERA_WORKER_TOKEN) are the same"},
  };
  for (const auto& [client_token, worker_token, expected] : cases) {
    const auto result = RunProcess({CHIMERA_COORDINATOR_BINARY, "--listen", "0.0.0.0:0", "--db",
                                    ":memory:", "--client-token", client_token,
                                    "--worker-token", worker_token});
    EXPECT_EQ(result.exit_code, 2) << expected << "\n" << result.err;
    EXPECT_THAT(result.err, HasSubstr(expected));
  }
}

// /metrics has no token and names jobs, workers and hosts.
TEST(CoordinatorProcessTest, ServesMetricsBeyondLoopbackOnlyWithMetricsPublic) {
  auto refused = RunProcess({CHIMERA_COORDINATOR_BINARY, "--db", ":memory:", "--listen",
                             "127.0.0.1:0", "--metrics-listen", "0.0.0.0:0"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("refusing to serve metrics on non-loopback host "
                                     "'0.0.0.0' without --metrics-public"));

  absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
      CHIMERA_COORDINATOR_BINARY,
      {"--db", ":memory:", "--metrics-listen", "0.0.0.0:0", "--metrics-public"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  absl::StatusOr<std::string> metrics =
      chimera::testing::AwaitAnnouncedAddress(coordinator->process(), "metrics on ");
  EXPECT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(coordinator->Stop(), 0) << coordinator->err();
}

TEST(CoordinatorProcessTest, RejectsAMalformedAddress) {
  auto result = RunProcess(
      {CHIMERA_COORDINATOR_BINARY, "--listen", "localhost:http", "--db", ":memory:"});
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("address 'localhost:http' has port 'http'"));
}

// Start-up failures end with exit 2 and the reason, never a crash.
TEST(CoordinatorProcessTest, AStoreItCannotOpenIsExit2WithTheReason) {
  chimera::testing::TempDir dir;
  auto unwritable = RunProcess(
      {CHIMERA_COORDINATOR_BINARY, "--db", "/nonexistent-dir/jobs.db"});
  EXPECT_EQ(unwritable.exit_code, 2) << unwritable.err;
  EXPECT_THAT(unwritable.err, HasSubstr("'/nonexistent-dir/jobs.db'"));

  const std::string garbage =
      dir.WriteFile("garbage.db", std::string(4096, 'z'));
  auto corrupt = RunProcess({CHIMERA_COORDINATOR_BINARY, "--db", garbage});
  EXPECT_EQ(corrupt.exit_code, 2) << corrupt.err;
  EXPECT_THAT(corrupt.err, HasSubstr("not a database"));
}

// The harness's own error for a coordinator that ends before it serves says
// how it ended, so a test failing there is diagnosed from its log.
TEST(CoordinatorProcessTest, AStartThatEndsEarlySaysTheExitStatusAndWhy) {
  absl::StatusOr<CoordinatorProcess> ended = CoordinatorProcess::Start(
      CHIMERA_COORDINATOR_BINARY, {"--db", "/nonexistent-dir/jobs.db"});
  ASSERT_FALSE(ended.ok());
  EXPECT_THAT(ended.status().message(), HasSubstr("(exit status 2)"));
  EXPECT_THAT(ended.status().message(), HasSubstr("'/nonexistent-dir/jobs.db'"));
}

TEST(CoordinatorProcessTest, ASecondCoordinatorGetsNeitherItsStoreNorItsPort) {
  chimera::testing::TempDir dir;
  const std::string db = dir.path() + "/jobs.db";
  absl::StatusOr<CoordinatorProcess> first =
      CoordinatorProcess::Start(CHIMERA_COORDINATOR_BINARY, {"--db", db});
  ASSERT_TRUE(first.ok()) << first.status();

  auto same_store = RunProcess({CHIMERA_COORDINATOR_BINARY, "--db", db});
  EXPECT_EQ(same_store.exit_code, 2) << same_store.err;
  EXPECT_THAT(same_store.err, HasSubstr("another coordinator holds it"));

  auto same_port = RunProcess({CHIMERA_COORDINATOR_BINARY, "--db",
                               ":memory:", "--listen", first->address()});
  EXPECT_EQ(same_port.exit_code, 2) << same_port.err;
  EXPECT_THAT(same_port.err, HasSubstr("cannot listen on " + first->address()));
  EXPECT_EQ(first->Stop(), 0) << first->err();
}

}  // namespace
}  // namespace chimera
