#include "client/health_command.h"

#include <iostream>
#include <string>

#include "client/cli_errors.h"
#include "net/http_get.h"

namespace chimera::client {

void AddHealthCommand(
    CLI::App& app, std::function<std::unique_ptr<CoordinatorClient>()> connect,
    std::function<absl::Duration()> timeout) {
  auto http = std::make_shared<std::string>();
  CLI::App* command = app.add_subcommand(
      "health",
      "Exit 0 when the coordinator (gRPC health check) or, with --http, a "
      "daemon's /healthz says it serves; 1 when not or unreachable");
  command->add_option(
      "--http", *http,
      "HOST:PORT of a coordinator's or worker daemon's --metrics-listen: "
      "ask its /healthz instead of the coordinator's gRPC health service");
  command->callback([connect, timeout, http] {
    if (http->empty()) {
      std::unique_ptr<CoordinatorClient> client = connect();
      if (absl::Status health = client->CheckHealth(); !health.ok()) {
        ExitWithError(health);
      }
      std::cout << "coordinator at " << client->address() << ": serving\n";
      return;
    }
    ValueOrExit(net::HttpGet(*http, "/healthz", timeout(), /*max_bytes=*/4096));
    std::cout << "http://" << *http << "/healthz: ok\n";
  });
}

}  // namespace chimera::client
