// /metrics of a real coordinator: well-formed for promtool, counting what
// the coordinator holds, and scraped by a real Prometheus.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/coordinator_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "jobspec/job_file.h"
#include "tests/support/http_get.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::chimera::testing::ChildProcess;
using ::chimera::testing::HttpGet;
using ::chimera::testing::RunProcess;
using ::testing::HasSubstr;

constexpr absl::Duration kStartTimeout = absl::Seconds(30);
constexpr absl::Duration kScrapeTimeout = absl::Seconds(60);

// A loopback port nothing listens on right now.
int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

class MetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_ = std::make_unique<ChildProcess>(std::vector<std::string>{
        CHIMERA_COORDINATOR_BINARY, "--listen", "127.0.0.1:0", "--db", ":memory:",
        "--metrics-listen", "127.0.0.1:0"});
    address_ = Announced("listening on ");
    metrics_ = Announced("metrics on ");
    client::ConnectionOptions options;
    options.address = address_;
    client_ = *client::CoordinatorClient::Connect(options);
    absl::StatusOr<chimera::v1::TrainJob> job = jobspec::LoadJobFile(
        std::string(CHIMERA_SOURCE_DIR) + "/examples/chimera.yaml", {.check_data_files = false});
    ASSERT_TRUE(job.ok()) << job.status();
    // No workers: both jobs stay pending.
    ASSERT_TRUE(client_->Submit(*job).ok());
    ASSERT_TRUE(client_->Submit(*job).ok());
  }

  std::string Announced(absl::string_view prefix) {
    absl::StatusOr<std::string> line = coordinator_->ReadLine(kStartTimeout);
    EXPECT_TRUE(line.ok()) << line.status() << coordinator_->err();
    absl::string_view rest = line.ok() ? absl::string_view(*line) : "";
    EXPECT_TRUE(absl::ConsumePrefix(&rest, prefix)) << rest;
    return std::string(rest);
  }

  chimera::testing::TempDir dir_;
  std::unique_ptr<ChildProcess> coordinator_;
  std::string address_, metrics_;
  std::unique_ptr<client::CoordinatorClient> client_;
};

TEST_F(MetricsTest, CoordinatorMetricsCountJobsAndPassPromtool) {
  absl::StatusOr<std::string> page = HttpGet(metrics_, "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("chimera_jobs{state=\"pending\"} 2"));
  EXPECT_THAT(*page, HasSubstr("chimera_jobs{state=\"running\"} 0"));
  EXPECT_THAT(*page, HasSubstr("chimera_workers{state=\"idle\"} 0"));
  EXPECT_THAT(*page, HasSubstr("chimera_build_info{version=\"0."));
  const std::string file = dir_.WriteFile("metrics.txt", *page);
  auto check = RunProcess({"/bin/sh", "-c", "promtool check metrics < " + file});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
}

TEST_F(MetricsTest, RealPrometheusScrapesTheCoordinator) {
  const std::string config = dir_.WriteFile(
      "prometheus.yml",
      absl::StrCat("global: {scrape_interval: 1s}\n"
                   "scrape_configs:\n"
                   "  - job_name: chimera\n"
                   "    static_configs: [{targets: ['",
                   metrics_, "']}]\n"));
  const std::string web = absl::StrCat("127.0.0.1:", FreePort());
  ChildProcess prometheus({"/usr/bin/prometheus", "--config.file=" + config,
                           "--storage.tsdb.path=" + dir_.path() + "/tsdb",
                           "--web.listen-address=" + web},
                          "", dir_.path() + "/prometheus.log");
  ASSERT_TRUE(prometheus.started());
  const absl::Time deadline = absl::Now() + kScrapeTimeout;
  std::string answer;
  while (absl::Now() < deadline) {
    absl::StatusOr<std::string> result = HttpGet(
        web, "/api/v1/query?query=chimera_jobs%7Bstate%3D%22pending%22%7D");
    if (result.ok() && absl::StrContains(*result, "\"2\"]")) {
      answer = *result;
      break;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  EXPECT_THAT(answer, HasSubstr("\"job\":\"chimera\""))
      << "Prometheus never scraped chimera_jobs{state=\"pending\"} = 2";
  prometheus.Signal(SIGTERM);
  prometheus.Wait(absl::Seconds(20));
}

}  // namespace
}  // namespace chimera
