#include "net/metrics_flags.h"

#include "absl/strings/str_cat.h"

namespace chimera::net {

void AddMetricsFlags(CLI::App* app, absl::string_view whose,
                     MetricsFlags* flags) {
  app->add_option("--metrics-listen", flags->listen,
                  absl::StrCat("HOST:PORT for ", whose,
                               " Prometheus /metrics endpoint (port 0: any "
                               "free one); none when empty. Non-loopback "
                               "hosts need --metrics-public"));
  app->add_flag("--metrics-public", flags->public_reach,
                "Let --metrics-listen be beyond loopback: /metrics has no "
                "token and names jobs, workers and hosts");
}

absl::StatusOr<std::unique_ptr<MetricsServer>> StartMetrics(
    const MetricsFlags& flags) {
  if (flags.listen.empty()) return nullptr;
  return MetricsServer::Start(
      flags.listen, flags.public_reach ? MetricsServer::Reach::kAnyone
                                       : MetricsServer::Reach::kLoopbackOnly);
}

}  // namespace chimera::net
