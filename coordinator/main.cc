// chimera-coordinator: the gRPC server that accepts jobs and drives workers.
// This build serves the standard health service and server reflection; the
// job and worker services land with the coordinator issue.
//
// Prints "listening on HOST:PORT" once ready (with --listen HOST:0 the port
// is the one the OS picked), and shuts down cleanly on SIGINT or SIGTERM.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <iostream>

#include "common/logging.h"
#include "common/version.h"
#include "coordinator/service/server_address.h"

namespace {

// In-flight RPCs get this long to finish at shutdown.
constexpr auto kShutdownGrace = std::chrono::seconds(5);

// Blocks until SIGINT or SIGTERM; both must be blocked in every thread.
int WaitForTerminationSignal(const sigset_t& signals) {
  int signal = 0;
  sigwait(&signals, &signal);
  return signal;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "chimera-coordinator: the control-plane server. This build serves the "
      "gRPC health service and reflection; the job and worker services are "
      "not implemented yet."};
  std::string listen = "127.0.0.1:50051";
  app.add_option("--listen", listen,
                 "HOST:PORT to serve on; port 0 picks a free port. Without "
                 "authentication only loopback hosts are allowed")
      ->default_str(listen);
  app.set_version_flag("--version", std::string("chimera-coordinator ") + chimera::kVersion);
  CLI11_PARSE(app, argc, argv);

  auto address = chimera::coordinator::ParseServerAddress(listen);
  if (!address.ok()) {
    std::cerr << "--listen: " << address.status().message() << "\n";
    return 2;
  }
  if (!address->IsLoopback()) {
    std::cerr << "--listen: refusing to serve on non-loopback host '"
              << address->host
              << "' without authentication; use 127.0.0.1 or localhost\n";
    return 2;
  }

  // Block the signals before gRPC starts its threads so only sigwait sees
  // them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int selected_port = 0;
  builder.AddListeningPort(address->ToString(),
                           grpc::InsecureServerCredentials(), &selected_port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || selected_port == 0) {
    std::cerr << "cannot listen on " << address->ToString()
              << " (in use, or not an address of this machine)\n";
    return 1;
  }
  address->port = selected_port;
  std::cout << "listening on " << address->ToString() << std::endl;
  CHIMERA_LOG(INFO) << "chimera-coordinator " << chimera::kVersion
                    << " serving on " << address->ToString();

  const int signal = WaitForTerminationSignal(signals);
  CHIMERA_LOG(INFO) << "signal " << signal << ": shutting down";
  server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server->Wait();
  return 0;
}
