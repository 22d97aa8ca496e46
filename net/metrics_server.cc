#include "net/metrics_server.h"

#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/types/span.h"
#include "net/server_address.h"
#include "prometheus/text_serializer.h"

namespace chimera::net {
namespace {

using Clock = std::chrono::steady_clock;

// A client gets this long from being accepted to send its request and read
// the answer; then it is closed.
constexpr auto kConnectionDeadline = std::chrono::seconds(5);
// Connections held at once; a newcomer beyond them closes the oldest.
constexpr size_t kMaxConnections = 64;
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
    fd = socket(candidate->ai_family,
                candidate->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                candidate->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (bind(fd, candidate->ai_addr, candidate->ai_addrlen) != 0 ||
        listen(fd, static_cast<int>(kMaxConnections)) != 0) {
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

// An HTTP answer that closes the connection; the body only if `with_body`.
std::string Response(absl::string_view status, absl::string_view content_type,
                     absl::string_view body, bool with_body) {
  return absl::StrCat("HTTP/1.1 ", status, "\r\nContent-Type: ", content_type,
                      "\r\nContent-Length: ", body.size(),
                      "\r\nConnection: close\r\n\r\n",
                      with_body ? body : absl::string_view());
}

// One client's exchange.
struct Connection {
  Connection(int fd, Clock::time_point deadline) : fd(fd), deadline(deadline) {}

  int fd;
  Clock::time_point deadline;
  std::string request;
  // The whole answer; empty while the request is still coming in.
  std::string answer;
  size_t sent = 0;
  // Answered, or the client is gone.
  bool finished = false;
};

// Reads what `connection` has sent so far; true once its request is complete:
// its head has ended, the client half-closed, or it reached kMaxRequestBytes.
bool Receive(Connection& connection) {
  char buffer[4096];
  while (connection.request.size() < kMaxRequestBytes) {
    const size_t room =
        std::min(sizeof(buffer), kMaxRequestBytes - connection.request.size());
    const ssize_t got = recv(connection.fd, buffer, room, 0);
    if (got == 0) return true;
    if (got < 0) {
      connection.finished = errno != EAGAIN && errno != EWOULDBLOCK;
      return false;
    }
    connection.request.append(buffer, got);
    if (absl::StrContains(connection.request, "\r\n\r\n")) return true;
  }
  return true;
}

// Sends as much of `connection`'s answer as the socket takes now.
void Send(Connection& connection) {
  while (connection.sent < connection.answer.size()) {
    const ssize_t sent =
        send(connection.fd, connection.answer.data() + connection.sent,
             connection.answer.size() - connection.sent, MSG_NOSIGNAL);
    if (sent < 0) {
      // Not EAGAIN: the scraper left; nothing to tell.
      connection.finished = errno != EAGAIN && errno != EWOULDBLOCK;
      return;
    }
    connection.sent += sent;
  }
  connection.finished = true;
}

// The connections being served, oldest first, so the first one's deadline
// comes first. Closes them all when destroyed.
class Connections {
 public:
  Connections() = default;
  ~Connections() {
    for (const Connection& connection : connections_) close(connection.fd);
  }
  Connections(const Connections&) = delete;
  Connections& operator=(const Connections&) = delete;

  // Appends one pollfd per connection to `watched`: for its request while it
  // comes in, then for room to send the answer.
  void Watch(std::vector<pollfd>& watched) const {
    for (const Connection& connection : connections_) {
      const short events = connection.answer.empty() ? POLLIN : POLLOUT;
      watched.push_back({connection.fd, events, 0});
    }
  }

  // Milliseconds until the first deadline; -1 (none) when idle.
  int PollTimeout() const {
    if (connections_.empty()) return -1;
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        connections_.front().deadline - Clock::now());
    return static_cast<int>(std::max<int64_t>(left.count(), 0));
  }

  // Reads, answers with `answer` and sends for each connection whose pollfd
  // in `polled` (in Watch's order) reported.
  void Progress(absl::Span<const pollfd> polled,
                absl::FunctionRef<std::string(absl::string_view)> answer) {
    for (size_t i = 0; i < connections_.size(); ++i) {
      if (polled[i].revents == 0) continue;
      Connection& connection = connections_[i];
      if (connection.answer.empty()) {
        if (!Receive(connection)) continue;
        connection.answer = answer(connection.request);
      }
      Send(connection);
    }
  }

  // Closes the connections that are finished or past their deadline.
  void CloseFinished() {
    const Clock::time_point now = Clock::now();
    const auto finished = std::stable_partition(
        connections_.begin(), connections_.end(),
        [now](const Connection& c) { return !c.finished && now < c.deadline; });
    for (auto it = finished; it != connections_.end(); ++it) close(it->fd);
    connections_.erase(finished, connections_.end());
  }

  // Accepts one pending connection; with kMaxConnections open, closes the
  // oldest to make room.
  void Accept(int listen_fd) {
    const int fd =
        accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // It left first, or no descriptor: poll tells again.
    if (connections_.size() == kMaxConnections) {
      close(connections_.front().fd);
      connections_.erase(connections_.begin());
    }
    connections_.emplace_back(fd, Clock::now() + kConnectionDeadline);
  }

 private:
  std::vector<Connection> connections_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen, Reach reach) {
  absl::StatusOr<ServerAddress> address = ParseServerAddress(listen);
  if (!address.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics ", address.status().message()));
  }
  if (reach == Reach::kLoopbackOnly && !address->IsLoopback()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "refusing to serve metrics on non-loopback host '", address->host,
        "' without --metrics-public: /metrics names jobs, workers and hosts to "
        "anyone who reaches it"));
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
  Connections connections;
  while (true) {
    std::vector<pollfd> watched = {{listen_fd_, POLLIN, 0},
                                   {wake_fd_, POLLIN, 0}};
    connections.Watch(watched);
    if (poll(watched.data(), watched.size(), connections.PollTimeout()) < 0 &&
        errno != EINTR) {
      return;
    }
    if (watched[1].revents != 0) return;
    connections.Progress(
        absl::MakeConstSpan(watched).subspan(2),
        [this](absl::string_view request) { return Answer(request); });
    connections.CloseFinished();
    if ((watched[0].revents & POLLIN) != 0) connections.Accept(listen_fd_);
  }
}

std::string MetricsServer::Answer(absl::string_view request) {
  constexpr absl::string_view kText = "text/plain; charset=utf-8";
  const size_t line_end = request.find("\r\n");
  if (line_end == absl::string_view::npos) {
    return Response("400 Bad Request", kText, "malformed request\n", true);
  }
  const std::vector<absl::string_view> words =
      absl::StrSplit(request.substr(0, line_end), ' ');
  if (words.size() != 3 || !absl::StartsWith(words[2], "HTTP/1.")) {
    return Response("400 Bad Request", kText, "malformed request line\n", true);
  }
  const bool head = words[0] == "HEAD";
  if (words[0] != "GET" && !head) {
    return Response("405 Method Not Allowed", kText, "only GET and HEAD\n",
                    true);
  }
  const absl::string_view path = words[1].substr(0, words[1].find('?'));
  // For probes that cannot speak gRPC (a container HEALTHCHECK, a Kubernetes
  // httpGet probe): an answer means the process is up and its serving thread
  // runs.
  if (path == "/healthz") return Response("200 OK", kText, "ok\n", !head);
  if (path != "/metrics") {
    return Response("404 Not Found", kText,
                    "metrics are at /metrics, health at /healthz\n", !head);
  }
  return Response("200 OK", "text/plain; version=0.0.4; charset=utf-8",
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
