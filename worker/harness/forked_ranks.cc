#include "worker/harness/forked_ranks.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"

namespace chimera::worker::harness {
namespace {

constexpr absl::Duration kStoreConnectTimeout = absl::Seconds(20);

// Runs in the child: never returns, never runs the parent's exit handlers.
[[noreturn]] void RunChild(int rank, int world_size, int port, int port_pipe,
                           const RankBody& body) {
  absl::StatusOr<std::unique_ptr<TcpRendezvous>> rendezvous =
      rank == 0 ? TcpRendezvous::Host("127.0.0.1", 0, world_size,
                                      kStoreConnectTimeout)
                : TcpRendezvous::Join("127.0.0.1", port, kStoreConnectTimeout);
  absl::Status status = rendezvous.status();
  if (status.ok() && rank == 0) {
    const int bound = (*rendezvous)->port();
    if (::write(port_pipe, &bound, sizeof(bound)) != sizeof(bound)) {
      status = absl::InternalError("cannot report the store port");
    }
  }
  if (status.ok()) status = body(rank, **rendezvous);
  if (!status.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, status.ToString().c_str());
  }
  std::fflush(stderr);
  ::_exit(status.ok() ? 0 : 1);
}

// Rank 0's store port, or -1 if it does not come within `timeout`.
int ReadPort(int port_pipe, absl::Duration timeout) {
  pollfd ready{port_pipe, POLLIN, 0};
  int port = -1;
  if (::poll(&ready, 1, absl::ToInt64Milliseconds(timeout)) != 1 ||
      ::read(port_pipe, &port, sizeof(port)) != sizeof(port)) {
    return -1;
  }
  return port;
}

}  // namespace

std::ostream& operator<<(std::ostream& out, const RankExit& exit) {
  out << "rank " << exit.rank;
  if (exit.killed_at_deadline) return out << " killed at the test deadline";
  if (exit.signal != 0) return out << " died of signal " << exit.signal;
  return out << " exited with " << exit.exit_code;
}

std::vector<RankExit> RunForkedRanks(int world_size, absl::Duration deadline,
                                     const RankBody& body) {
  const absl::Time end = absl::Now() + deadline;
  std::vector<RankExit> exits(world_size);
  std::vector<pid_t> pids(world_size, -1);
  int port_pipe[2];
  if (::pipe(port_pipe) != 0) return exits;
  for (int rank = 0; rank < world_size; ++rank) exits[rank].rank = rank;
  pids[0] = ::fork();
  if (pids[0] == 0) RunChild(0, world_size, 0, port_pipe[1], body);
  // Without rank 0's store the others cannot join: they are not started.
  const int port = ReadPort(port_pipe[0], end - absl::Now());
  for (int rank = 1; rank < world_size && port >= 0; ++rank) {
    pids[rank] = ::fork();
    if (pids[rank] == 0) RunChild(rank, world_size, port, port_pipe[1], body);
  }
  ::close(port_pipe[0]);
  ::close(port_pipe[1]);

  int running = 0;
  for (pid_t pid : pids) running += pid > 0 ? 1 : 0;
  while (running > 0) {
    for (int rank = 0; rank < world_size; ++rank) {
      if (pids[rank] <= 0) continue;
      int status = 0;
      if (::waitpid(pids[rank], &status, WNOHANG) != pids[rank]) continue;
      if (WIFEXITED(status)) exits[rank].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exits[rank].signal = WTERMSIG(status);
      pids[rank] = -1;
      --running;
    }
    if (running > 0 && absl::Now() > end) {
      for (int rank = 0; rank < world_size; ++rank) {
        if (pids[rank] <= 0) continue;
        ::kill(pids[rank], SIGKILL);
        ::waitpid(pids[rank], nullptr, 0);
        exits[rank].killed_at_deadline = true;
        pids[rank] = -1;
        --running;
      }
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return exits;
}

}  // namespace chimera::worker::harness
