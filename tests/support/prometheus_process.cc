#include "tests/support/prometheus_process.h"

#include <signal.h>

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "net/http_get.h"
#include "tests/support/free_port.h"
#include "tests/support/wait_until.h"

namespace chimera::testing {

std::string UrlEncode(absl::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

absl::StatusOr<std::unique_ptr<PrometheusProcess>> PrometheusProcess::Start(
    const std::string& config, const std::string& dir, absl::Duration timeout) {
  std::string address = absl::StrCat("127.0.0.1:", FreePort());
  const std::string log = dir + "/prometheus.log";
  auto process = std::make_unique<net::ChildProcess>(
      std::vector<std::string>{"/usr/bin/prometheus", "--config.file=" + config,
                               "--storage.tsdb.path=" + dir + "/tsdb",
                               "--web.listen-address=" + address},
      "", log);
  if (!process->started()) {
    return absl::UnavailableError("cannot run /usr/bin/prometheus");
  }
  const bool ready = WaitUntil(
      [&address] { return net::HttpGet(address, "/-/ready").ok(); }, timeout,
      absl::Milliseconds(200));
  if (!ready) {
    return absl::UnavailableError(absl::StrCat(
        "Prometheus was not ready within ", absl::FormatDuration(timeout),
        "; see ", log));
  }
  return std::unique_ptr<PrometheusProcess>(
      new PrometheusProcess(std::move(process), std::move(address)));
}

PrometheusProcess::~PrometheusProcess() {
  process_->Signal(SIGTERM);
  process_->Wait(absl::Seconds(20));
}

absl::StatusOr<std::string> PrometheusProcess::Query(absl::string_view expr) const {
  return net::HttpGet(address_, "/api/v1/query?query=" + UrlEncode(expr));
}

}  // namespace chimera::testing
