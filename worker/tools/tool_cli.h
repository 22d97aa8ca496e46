// What the measuring tools (stage_efficiency, head_loss_benchmark) share on
// their command line: the --device, --dtype and --repetitions flags, parsed
// into LibTorch's types with errors that name the flag and its value, and
// their exit codes: 0 measured; 1 LibTorch failed (out of memory, ...); 2 bad
// flags or a device this LibTorch cannot use.
//
//   CLI::App app("stage_efficiency: ...");
//   MeasuringFlags common{.device = "cuda:0", .dtype = "bfloat16"};
//   AddMeasuringFlags(app, common);
//   app.add_option("--seq", ...);
//   return ParseAndMeasure(app, argc, argv, [&] { return Measure(...); });
#ifndef CHIMERA_WORKER_TOOLS_TOOL_CLI_H_
#define CHIMERA_WORKER_TOOLS_TOOL_CLI_H_

#include <c10/core/TensorOptions.h>

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::worker {

struct MeasuringFlags {
  std::string device = "cpu";
  std::string dtype = "float32";
  int repetitions = 5;  // timed runs after one warm-up
};

// The device and dtype `flags` name, the device usable by this process
// (CheckDeviceUsable). INVALID_ARGUMENT naming --device or --dtype and its
// value when it is not cpu or cuda:N, or bfloat16, float32 or float64;
// CheckDeviceUsable's errors.
absl::StatusOr<at::TensorOptions> MeasuringOptions(const MeasuringFlags& flags);

// Adds --device, --dtype and --repetitions to `app`, writing into `flags`,
// whose values are the defaults --help shows.
void AddMeasuringFlags(CLI::App& app, MeasuringFlags& flags);

// Parses the command line into `app`'s options and runs `measure`; the exit
// code, after printing a failure to stderr as "APP-NAME: message".
int ParseAndMeasure(CLI::App& app, int argc, char** argv,
                    const std::function<absl::Status()>& measure);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_TOOLS_TOOL_CLI_H_
