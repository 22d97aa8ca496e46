// A chimera-coordinator process for tests that drive the real server. It
// listens where it is told (by default a loopback port of its own choosing)
// and is awaited until it announces its address, within a deadline, so a
// coordinator that cannot start fails the test with its stderr instead of
// hanging it. One that is still running when destroyed is killed.
//
//   absl::StatusOr<CoordinatorProcess> coordinator = CoordinatorProcess::Start(
//       CHIMERA_COORDINATOR_BINARY, {"--db", ":memory:"});
//   ASSERT_TRUE(coordinator.ok()) << coordinator.status();
//   RunProcess({CHIMERA_BINARY, "list", "--address", coordinator->address()});
//   EXPECT_EQ(coordinator->Stop(), 0) << coordinator->err();
#ifndef CHIMERA_TESTS_SUPPORT_COORDINATOR_PROCESS_H_
#define CHIMERA_TESTS_SUPPORT_COORDINATOR_PROCESS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "net/child_process.h"

namespace chimera::testing {

// Generous: a loaded 2-core machine starts a server slowly.
inline constexpr absl::Duration kServerStartTimeout = absl::Seconds(30);

// The address a server prints once it serves: the rest of `process`'s next
// stdout line after `prefix`, such as "listening on " or "metrics on ". An
// error with that line, or with the process's stderr (and its exit status
// where it exited), if it prints something else, exits, or prints nothing
// within `timeout`.
absl::StatusOr<std::string> AwaitAnnouncedAddress(
    net::ChildProcess& process, absl::string_view prefix,
    absl::Duration timeout = kServerStartTimeout);

class CoordinatorProcess {
 public:
  // Runs `binary` --listen `listen` `flags` and waits for its "listening on"
  // line.
  static absl::StatusOr<CoordinatorProcess> Start(
      const std::string& binary, const std::vector<std::string>& flags,
      const std::string& listen = "127.0.0.1:0");

  CoordinatorProcess(CoordinatorProcess&&) = default;
  CoordinatorProcess& operator=(CoordinatorProcess&&) = default;

  // HOST:PORT as it announced it: with port 0 asked for, the port it chose.
  const std::string& address() const { return address_; }

  // Asks it to shut down (SIGTERM) and waits for it to exit, killing it if
  // it has not within `timeout`. Returns its exit status, as
  // ChildProcess::Wait does; once it has exited, the same status again.
  int Stop(absl::Duration timeout = absl::Seconds(15));

  // For what the test reads beyond the address: more announced addresses on
  // stdout, and stderr once it has stopped.
  net::ChildProcess& process() { return *process_; }
  const std::string& err() const { return process_->err(); }

 private:
  CoordinatorProcess(std::unique_ptr<net::ChildProcess> process,
                     std::string address)
      : process_(std::move(process)), address_(std::move(address)) {}

  std::unique_ptr<net::ChildProcess> process_;
  std::string address_;
};

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_COORDINATOR_PROCESS_H_
