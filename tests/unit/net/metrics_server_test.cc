#include "net/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/counter.h"
#include "tests/support/http_get.h"

namespace chimera::net {
namespace {

using ::chimera::testing::HttpGet;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// Sends `request` as is and returns the whole answer.
std::string Exchange(const std::string& address, const std::string& request) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &peer.sin_addr);
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&peer), sizeof(peer)), 0);
  send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  std::string answer;
  char buffer[4096];
  ssize_t got;
  while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0)
    answer.append(buffer, got);
  close(fd);
  return answer;
}

class FixedSample : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::MetricFamily family;
    family.name = "test_computed";
    family.help = "computed at scrape time";
    family.type = prometheus::MetricType::Gauge;
    prometheus::ClientMetric metric;
    metric.gauge.value = 42;
    family.metric.push_back(metric);
    return {family};
  }
};

TEST(MetricsServerTest, ServesRegistryAndCollectables) {
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> server =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->address(), StartsWith("127.0.0.1:"));
  EXPECT_NE((*server)->address(), "127.0.0.1:0");
  prometheus::BuildCounter()
      .Name("test_events_total")
      .Help("events")
      .Register((*server)->registry())
      .Add({{"kind", "a"}})
      .Increment(3);
  (*server)->Add(std::make_shared<FixedSample>());

  absl::StatusOr<std::string> page = HttpGet((*server)->address(), "/metrics");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_THAT(*page, HasSubstr("# TYPE test_events_total counter"));
  EXPECT_THAT(*page, HasSubstr("test_events_total{kind=\"a\"} 3"));
  EXPECT_THAT(*page, HasSubstr("test_computed 42"));
}

TEST(MetricsServerTest, AnswersEveryOtherRequestWithTheRightStatus) {
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> server =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string& address = (*server)->address();
  EXPECT_THAT(Exchange(address, "GET /other HTTP/1.1\r\nHost: x\r\n\r\n"),
              StartsWith("HTTP/1.1 404 Not Found"));
  EXPECT_THAT(Exchange(address, "POST /metrics HTTP/1.1\r\nHost: x\r\n\r\n"),
              StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(Exchange(address, "nonsense\r\n\r\n"),
              StartsWith("HTTP/1.1 400"));
  // A client that connects and says nothing until it hangs up.
  EXPECT_THAT(Exchange(address, ""), StartsWith("HTTP/1.1 400"));
  const std::string head =
      Exchange(address, "HEAD /metrics?x=1 HTTP/1.0\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(head, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  // And it still serves.
  EXPECT_TRUE(HttpGet(address, "/metrics").ok());
}

TEST(MetricsServerTest, RejectsBadAddressesAndBusyPorts) {
  EXPECT_TRUE(
      absl::IsInvalidArgument(net::MetricsServer::Start("localhost").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      net::MetricsServer::Start("127.0.0.1:99999").status()));
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> first =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> second =
      net::MetricsServer::Start((*first)->address());
  EXPECT_TRUE(absl::IsUnavailable(second.status()));
  EXPECT_THAT(second.status().message(), HasSubstr((*first)->address()));
}

}  // namespace
}  // namespace chimera::net
