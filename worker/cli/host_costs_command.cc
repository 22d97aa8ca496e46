// `host-costs`: what a CPU worker process pays on this host beyond its
// compute (worker/profile/host_costs.h), as the cluster model's device
// fields, for the planner of jobs whose CPU workers outnumber the cores.
#include <google/protobuf/util/json_util.h>

#include <iostream>
#include <memory>
#include <string>

#include "worker/cli/commands.h"
#include "worker/cli/exit_codes.h"
#include "worker/cli/shared_flags.h"
#include "worker/profile/host_costs.h"
#include "worker/runtime/blas_core.h"
#include "worker/runtime/compute_threads.h"

namespace chimera::worker::cli {
namespace {

struct HostCostsFlags {
  std::string out_path;  // Empty: stdout.
  HostCostRuns runs;
  int repeats = 3;
};

int RunHostCosts(const HostCostsFlags& flags, char** argv) {
  // Measured as a local job's workers compute: single-threaded, on the
  // BLAS core the CPU calls for.
  SettleBlasCore(ComputeThreadsEnvironment(1), argv);
  const auto costs = MeasureHostCosts(flags.runs, flags.repeats);
  if (!costs.ok()) {
    std::cerr << "chimera-worker: measuring this host's costs: "
              << costs.status().message() << "\n";
    return kExitFailed;
  }
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.always_print_primitive_fields = true;
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(*costs, &json, options);
  return WriteOut(json, flags.out_path);
}

}  // namespace

void AddHostCostsCommand(CLI::App& app, Invocation* invocation) {
  auto flags = std::make_shared<HostCostsFlags>();
  CLI::App* command = app.add_subcommand(
      "host-costs",
      "Measure what a CPU worker process pays on this host beyond its "
      "compute: the wake-up after a wait, posting and receiving a message "
      "beside one busy process per core, and computing beside other "
      "workers. Writes them as JSON under a cluster file's device field "
      "names (wakeUpSeconds, messagePostSeconds, messageReceiveSeconds, "
      "coRunningSlowdown); chimera run plans local cpu jobs from them. Takes "
      "a few seconds");
  AddOutFlag(command, &flags->out_path, "JSON file to write");
  command
      ->add_option("--runs", flags->runs.runs, "Timed runs in each measurement")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  command
      ->add_option("--repeats", flags->repeats,
                   "Measurements of each figure; each figure is their median")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  command->callback([flags, invocation] {
    invocation->exit_code = RunHostCosts(*flags, invocation->argv);
  });
}

}  // namespace chimera::worker::cli
