// Exit codes of chimera-worker's subcommands, so that scripts and process
// supervisors can tell bad input from a failed run.
#ifndef CHIMERA_WORKER_CLI_EXIT_CODES_H_
#define CHIMERA_WORKER_CLI_EXIT_CODES_H_

namespace chimera::worker::cli {

inline constexpr int kExitOk = 0;
// The run failed: the job, the profile, the daemon's service.
inline constexpr int kExitFailed = 1;
// Bad flags, a bad job file, or an old form of the command line.
inline constexpr int kExitBadInput = 2;
// A daemon that another daemon replaced under its --worker-id: restarting it
// would only evict the other, so a supervisor must not.
inline constexpr int kExitReplaced = 3;

}  // namespace chimera::worker::cli

#endif  // CHIMERA_WORKER_CLI_EXIT_CODES_H_
