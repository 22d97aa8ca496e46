// `chimera plan -f job.yaml --cluster cluster.yaml`: ranks candidate plans
// for a job on a cluster, offline, from the analytic model or a measured
// profile.
#ifndef CHIMERA_CLIENT_PLAN_COMMAND_H_
#define CHIMERA_CLIENT_PLAN_COMMAND_H_

#include <CLI/CLI.hpp>

namespace chimera::client {

// Registers the subcommand on `app`. Exits 2 for bad input, 1 when no plan
// fits the cluster.
void AddPlanCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_PLAN_COMMAND_H_
