#include "net/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/http_get.h"
#include "prometheus/counter.h"

namespace chimera::net {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// The loopback socket address of "127.0.0.1:PORT".
sockaddr_in LoopbackPeer(const std::string& address) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(address.substr(address.rfind(':') + 1), &port));
  sockaddr_in peer{};
  peer.sin_family = AF_INET;
  peer.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &peer.sin_addr);
  return peer;
}

// Sends `request` as is and returns the whole answer.
std::string Exchange(const std::string& address, const std::string& request) {
  sockaddr_in peer = LoopbackPeer(address);
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

// Opens `count` non-blocking connections that send nothing, in groups of 16
// a little apart so the server's listen queue never overflows, and waits up
// to 3 s for all to be established.
std::vector<int> ConnectSilently(const std::string& address, int count) {
  const sockaddr_in peer = LoopbackPeer(address);
  std::vector<pollfd> connecting;
  for (int i = 0; i < count; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    connect(fd, reinterpret_cast<const sockaddr*>(&peer), sizeof(peer));
    connecting.push_back({fd, POLLOUT, 0});
    if (i % 16 == 15) absl::SleepFor(absl::Milliseconds(10));
  }
  const absl::Time limit = absl::Now() + absl::Seconds(3);
  std::vector<int> fds;
  for (pollfd& one : connecting) {
    poll(&one, 1,
         static_cast<int>(absl::ToInt64Milliseconds(
             std::max(limit - absl::Now(), absl::ZeroDuration()))));
    fds.push_back(one.fd);
  }
  return fds;
}

void CloseAll(const std::vector<int>& fds) {
  for (const int fd : fds) close(fd);
}

// Whether the server has closed `fd` (it sent nothing, so it reads EOF).
bool ClosedByServer(int fd) {
  char byte;
  const ssize_t got = recv(fd, &byte, 1, MSG_DONTWAIT);
  return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

// Sends a request head that never ends, one byte a second, until the server
// closes the connection; how long that took, or `limit` if it did not.
absl::Duration TrickleUntilClosed(int fd, absl::Duration limit) {
  const std::string request =
      "GET /metrics HTTP/1.1\r\nX-Slow: " + std::string(64, 'a');
  const absl::Time start = absl::Now();
  for (size_t i = 0; absl::Now() - start < limit && i < request.size(); ++i) {
    if (send(fd, &request[i], 1, MSG_NOSIGNAL) != 1) return absl::Now() - start;
    pollfd answer = {fd, POLLIN, 0};
    if (poll(&answer, 1, 1000) == 1 && ClosedByServer(fd)) {
      return absl::Now() - start;
    }
  }
  return limit;
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

TEST(MetricsServerTest, AnswersHealthProbes) {
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> server =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string& address = (*server)->address();
  const std::string get = Exchange(address, "GET /healthz HTTP/1.1\r\n\r\n");
  EXPECT_THAT(get, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_THAT(get, EndsWith("\r\n\r\nok\n"));
  EXPECT_THAT(Exchange(address, "HEAD /healthz HTTP/1.0\r\n\r\n"),
              StartsWith("HTTP/1.1 200 OK"));
}

// The server used to serve one connection at a time, waiting up to 5 s on
// each, so this scrape queued behind 16 silent clients took 80 s. Now it is
// answered while they wait; 4 s is generous for a loaded machine and still
// shorter than a single silent client's 5 s deadline.
TEST(MetricsServerTest, AnswersAScrapeWhileSilentClientsStayConnected) {
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> server =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int> silent = ConnectSilently((*server)->address(), 16);

  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> page =
      HttpGet((*server)->address(), "/metrics", absl::Seconds(10));
  EXPECT_TRUE(page.ok()) << page.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  CloseAll(silent);
}

// A client gets 5 s from being accepted for its whole request, however it
// spreads the bytes; reads used to time out one by one, so a byte a second
// kept the connection open until 16 KiB had come.
TEST(MetricsServerTest, ClosesATricklingClientAtItsDeadline) {
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> server =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int> trickling = ConnectSilently((*server)->address(), 1);

  const absl::Duration open =
      TrickleUntilClosed(trickling[0], absl::Seconds(10));
  EXPECT_GE(open, absl::Seconds(4));
  EXPECT_LT(open, absl::Seconds(7));
  CloseAll(trickling);
}

// It holds 64 connections; each newcomer beyond them closes the oldest, so
// 80 silent clients cannot lock a scrape out (4 s: see above).
TEST(MetricsServerTest, ClosesTheOldestConnectionsToServeAScrapeWhenFull) {
  absl::StatusOr<std::unique_ptr<net::MetricsServer>> server =
      net::MetricsServer::Start("127.0.0.1:0");
  ASSERT_TRUE(server.ok()) << server.status();
  const std::vector<int> silent = ConnectSilently((*server)->address(), 80);

  const absl::Time start = absl::Now();
  absl::StatusOr<std::string> page =
      HttpGet((*server)->address(), "/metrics", absl::Seconds(10));
  EXPECT_TRUE(page.ok()) << page.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(4));
  EXPECT_TRUE(ClosedByServer(silent.front()));
  EXPECT_FALSE(ClosedByServer(silent.back()));
  CloseAll(silent);
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

// The page names jobs, workers and hosts and asks for no token: a wildcard
// address used to be served without a word.
TEST(MetricsServerTest, ServesBeyondLoopbackOnlyWhenAskedTo) {
  const absl::StatusOr<std::unique_ptr<net::MetricsServer>> refused =
      net::MetricsServer::Start("0.0.0.0:0");
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_THAT(refused.status().message(),
              HasSubstr("refusing to serve metrics on non-loopback host '0.0.0.0' "
                        "without --metrics-public"));
  const absl::StatusOr<std::unique_ptr<net::MetricsServer>> public_server =
      net::MetricsServer::Start("0.0.0.0:0", net::MetricsServer::Reach::kAnyone);
  EXPECT_TRUE(public_server.ok()) << public_server.status();
  EXPECT_TRUE(net::MetricsServer::Start("localhost:0").ok());
}

}  // namespace
}  // namespace chimera::net
