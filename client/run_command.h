// `chimera run -f job.yaml`: the whole system on this machine. Starts an
// embedded coordinator on loopback and the local worker processes the job
// needs (chimera-worker daemons, CPU + Gloo), submits the job, follows it,
// prints a summary (steps, final loss, throughput, the last step's time and
// bubble beside the predicted ones, and each worker's bubble ratio, its
// predicted one and its peak memory), stops every process it started — also
// on Ctrl-C or when its output is closed, which stop the job — and exits
// with the job's outcome (0 succeeded, 1 failed or stopped, 2 bad job file,
// 130 interrupted, 141 output closed). With --trace FILE it also writes one
// step's measured timeline of every rank (client/job_trace.h); failing that
// exits 1.
#ifndef CHIMERA_CLIENT_RUN_COMMAND_H_
#define CHIMERA_CLIENT_RUN_COMMAND_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

void AddRunCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_RUN_COMMAND_H_
