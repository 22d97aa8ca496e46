// A real Prometheus (Debian's /usr/bin/prometheus) for tests that check what
// it scrapes and evaluates: started on a free loopback port with a config
// the test wrote, awaited until it is ready, stopped when destroyed.
//
//   absl::StatusOr<std::unique_ptr<PrometheusProcess>> prometheus =
//       PrometheusProcess::Start(config, dir_.path());
//   ASSERT_TRUE(prometheus.ok()) << prometheus.status();
//   absl::StatusOr<std::string> answer = (*prometheus)->Query("chimera_jobs");
#ifndef CHIMERA_TESTS_SUPPORT_PROMETHEUS_PROCESS_H_
#define CHIMERA_TESTS_SUPPORT_PROMETHEUS_PROCESS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "net/child_process.h"

namespace chimera::testing {

// `text` as a URL's query value: every byte but A-Z a-z 0-9 - _ . ~ as %XX.
std::string UrlEncode(absl::string_view text);

class PrometheusProcess {
 public:
  // Runs Prometheus with the config file `config`, its database and log
  // (prometheus.log) under `dir`, and waits up to `timeout` for /-/ready.
  // UNAVAILABLE with the log's file when it does not get ready.
  static absl::StatusOr<std::unique_ptr<PrometheusProcess>> Start(
      const std::string& config, const std::string& dir,
      absl::Duration timeout = absl::Seconds(60));
  // Stops it (SIGTERM) and waits for it to exit.
  ~PrometheusProcess();

  // HOST:PORT of its web API.
  const std::string& address() const { return address_; }
  // The body of its answer to the instant query `expr` (JSON).
  absl::StatusOr<std::string> Query(absl::string_view expr) const;

 private:
  PrometheusProcess(std::unique_ptr<net::ChildProcess> process, std::string address)
      : process_(std::move(process)), address_(std::move(address)) {}

  std::unique_ptr<net::ChildProcess> process_;
  std::string address_;
};

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_PROMETHEUS_PROCESS_H_
