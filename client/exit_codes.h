// Exit codes of the `chimera` CLI, so scripts can tell bad input from a
// failed job.
#ifndef CHIMERA_CLIENT_EXIT_CODES_H_
#define CHIMERA_CLIENT_EXIT_CODES_H_

namespace chimera::client {

// Success (a valid file, a job that succeeded).
inline constexpr int kExitOk = 0;
// The operation ran and failed (a job failed, the coordinator is down).
inline constexpr int kExitFailure = 1;
// Bad input: wrong flags, an invalid job file, bad schedule parameters.
inline constexpr int kExitUsage = 2;
// Interrupted (Ctrl-C), as a process killed by SIGINT would exit (128 + 2).
inline constexpr int kExitInterrupted = 130;
// Standard output closed under a command that stopped its work for it, as a
// process killed by SIGPIPE would exit (128 + 13).
inline constexpr int kExitOutputClosed = 141;

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_EXIT_CODES_H_
