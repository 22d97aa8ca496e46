// `chimera health [--http HOST:PORT]`: exits 0 when a service says it is
// healthy and 1 when it does not or cannot be reached, for container
// HEALTHCHECKs, scripts and probes. Without --http it asks the coordinator
// the global flags name over the standard gRPC health service; with it, it
// asks any daemon's /healthz on its --metrics-listen address (worker daemons
// serve no gRPC).
#ifndef CHIMERA_CLIENT_HEALTH_COMMAND_H_
#define CHIMERA_CLIENT_HEALTH_COMMAND_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <memory>

#include "client/coordinator_client.h"

namespace chimera::client {

// Registers `health` on `app`; `connect` opens the connection the global
// flags describe, `timeout` is their --timeout.
void AddHealthCommand(
    CLI::App& app, std::function<std::unique_ptr<CoordinatorClient>()> connect,
    std::function<absl::Duration()> timeout);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_HEALTH_COMMAND_H_
