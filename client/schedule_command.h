// `chimera schedule`: generate (or load from CSV), validate, simulate and
// draw a pipeline schedule, offline; with -f JOB --cluster FILE, the job's
// own schedule as the planner would run it there.
//
//   CLI::App app{"chimera"};
//   chimera::client::AddScheduleCommand(app);
//   CLI11_PARSE(app, argc, argv);
//
// Output goes to stdout or --out. Bad input prints one line
// "chimera schedule: <what is wrong>" on stderr and exits with code 2
// (CLI::RuntimeError(2)).
#ifndef CHIMERA_CLIENT_SCHEDULE_COMMAND_H_
#define CHIMERA_CLIENT_SCHEDULE_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "schedule/schedule_params.h"

namespace chimera::client {

struct ScheduleCommandOptions {
  schedule::ScheduleParams params;
  double forward_cost = 1.0;
  // Negative: 2x forward_cost.
  double backward_cost = -1.0;
  // A split backward's halves (BACKWARD_INPUT, BACKWARD_WEIGHT); negative:
  // half the backward each. Only for schedules with split backwards.
  double backward_input_cost = -1.0;
  double backward_weight_cost = -1.0;
  // text, json, svg, csv or torch-csv.
  std::string output = "text";
  // Load this CSV (ours, or torch.distributed.pipelining's) instead of
  // generating; at most one of them.
  std::string from_csv;
  std::string from_torch_csv;
};

// Runs the command and returns what it prints. InvalidArgument names the
// flag, the value and what is allowed.
absl::StatusOr<std::string> RunScheduleCommand(
    const ScheduleCommandOptions& options);

// Registers the `schedule` subcommand on `app`.
void AddScheduleCommand(CLI::App& app);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_SCHEDULE_COMMAND_H_
