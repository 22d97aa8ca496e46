// Runs the ranks of a small job as forked child processes on loopback: rank 0
// hosts the rendezvous store on an ephemeral port, the others join it, each
// runs the test's body, and the parent collects exit codes within a deadline.
// The parent never touches LibTorch, so forking it is safe.
//
//   std::vector<RankExit> exits = RunForkedRanks(
//       /*world_size=*/3, absl::Seconds(60),
//       [](int rank, TcpRendezvous& rendezvous) -> absl::Status { ... });
//   for (const RankExit& exit : exits) EXPECT_TRUE(exit.ok()) << exit;
#ifndef CHIMERA_WORKER_HARNESS_FORKED_RANKS_H_
#define CHIMERA_WORKER_HARNESS_FORKED_RANKS_H_

#include <functional>
#include <ostream>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/comm/tcp_rendezvous.h"

namespace chimera::worker::harness {

// How one rank's process ended.
struct RankExit {
  int rank = 0;
  // The body's status; a non-OK body exits 1 after printing it on stderr.
  int exit_code = -1;
  // Set when killed by a signal (a crash, or the parent's deadline).
  int signal = 0;
  bool killed_at_deadline = false;

  bool ok() const { return exit_code == 0 && signal == 0; }
};

std::ostream& operator<<(std::ostream& out, const RankExit& exit);

using RankBody = std::function<absl::Status(int rank, TcpRendezvous&)>;

// Forks `world_size` processes running `body`; kills those still running at
// `deadline` from now. Returns one entry per rank, in rank order.
std::vector<RankExit> RunForkedRanks(int world_size, absl::Duration deadline,
                                     const RankBody& body);

}  // namespace chimera::worker::harness

#endif  // CHIMERA_WORKER_HARNESS_FORKED_RANKS_H_
