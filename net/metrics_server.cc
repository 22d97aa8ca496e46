#include "net/metrics_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "net/server_address.h"
#include "prometheus/text_serializer.h"

namespace chimera::net {
namespace {

// A scraper gets this long to send its request and read the answer.
constexpr timeval kConnectionTimeout = {5, 0};
constexpr size_t kMaxRequestBytes = 16 * 1024;

// Binds and listens on `address`; the socket or why not.
absl::StatusOr<int> Listen(const ServerAddress& address) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(address.port);
  if (const int error =
          getaddrinfo(address.host.c_str(), port.c_str(), &hints, &found);
      error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ",
                                               address.ToString(), ": ",
                                               gai_strerror(error)));
  }
  std::string why;
  int fd = -1;
  for (addrinfo* candidate = found; candidate != nullptr && fd < 0;
       candidate = candidate->ai_next) {
    fd = socket(candidate->ai_family, candidate->ai_socktype | SOCK_CLOEXEC,
                candidate->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, candidate->ai_addr, candidate->ai_addrlen) != 0 ||
        listen(fd, 16) != 0) {
      why = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ",
                                               address.ToString(), ": ", why));
  }
  return fd;
}

int BoundPort(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
  return bound.ss_family == AF_INET6
             ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
             : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

void SendAll(int connection, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t sent =
        send(connection, data.data(), data.size(), MSG_NOSIGNAL);
    if (sent <= 0) return;  // The scraper left or timed out; nothing to tell.
    data.remove_prefix(sent);
  }
}

void Respond(int connection, absl::string_view status,
             absl::string_view content_type, absl::string_view body,
             bool with_body) {
  SendAll(connection,
          absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                       "\r\nContent-Length: ", body.size(),
                       "\r\nConnection: close\r\n\r\n"));
  if (with_body) SendAll(connection, body);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen) {
  absl::StatusOr<ServerAddress> address = ParseServerAddress(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics ", address.status().message()));
  }
  absl::StatusOr<int> listen_fd = Listen(*address);
  if (!listen_fd.ok()) return listen_fd.status();
  const int wake_fd = eventfd(0, EFD_CLOEXEC);
  if (wake_fd < 0) {
    close(*listen_fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  address->port = BoundPort(*listen_fd);
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(*listen_fd, wake_fd, address->ToString()));
}

MetricsServer::MetricsServer(int listen_fd, int wake_fd, std::string address)
    : listen_fd_(listen_fd),
      wake_fd_(wake_fd),
      address_(std::move(address)),
      registry_(std::make_shared<prometheus::Registry>()) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsServer::~MetricsServer() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
}

void MetricsServer::Add(std::shared_ptr<prometheus::Collectable> collectable) {
  absl::MutexLock lock(&mutex_);
  collectables_.push_back(std::move(collectable));
}

void MetricsServer::Serve() {
  while (true) {
    pollfd watched[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(watched, 2, -1) < 0 && errno != EINTR) return;
    if (watched[1].revents != 0) return;
    if ((watched[0].revents & POLLIN) == 0) continue;
    const int connection = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    Answer(connection);
    close(connection);
  }
}

void MetricsServer::Answer(int connection) {
  setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &kConnectionTimeout,
             sizeof(kConnectionTimeout));
  setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &kConnectionTimeout,
             sizeof(kConnectionTimeout));
  std::string request;
  char buffer[4096];
  while (!absl::StrContains(request, "\r\n\r\n") &&
         request.size() < kMaxRequestBytes) {
    const ssize_t got = recv(connection, buffer, sizeof(buffer), 0);
    if (got <= 0) break;
    request.append(buffer, got);
  }
  constexpr absl::string_view kText = "text/plain; charset=utf-8";
  const size_t line_end = request.find("\r\n");
  if (line_end == std::string::npos) {
    Respond(connection, "400 Bad Request", kText, "malformed request\n", true);
    return;
  }
  const std::vector<absl::string_view> words =
      absl::StrSplit(absl::string_view(request).substr(0, line_end), ' ');
  if (words.size() != 3 || !absl::StartsWith(words[2], "HTTP/1.")) {
    Respond(connection, "400 Bad Request", kText, "malformed request line\n",
            true);
    return;
  }
  const bool head = words[0] == "HEAD";
  if (words[0] != "GET" && !head) {
    Respond(connection, "405 Method Not Allowed", kText, "only GET and HEAD\n",
            true);
    return;
  }
  const absl::string_view path = words[1].substr(0, words[1].find('?'));
  if (path != "/metrics") {
    Respond(connection, "404 Not Found", kText, "metrics are at /metrics\n",
            !head);
    return;
  }
  Respond(connection, "200 OK", "text/plain; version=0.0.4; charset=utf-8",
          Scrape(), !head);
}

std::string MetricsServer::Scrape() {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  absl::MutexLock lock(&mutex_);
  for (const auto& collectable : collectables_) {
    for (auto& family : collectable->Collect())
      families.push_back(std::move(family));
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace chimera::net
