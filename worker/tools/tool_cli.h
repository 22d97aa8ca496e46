// What the measuring tools (stage_efficiency, head_loss_benchmark) share on
// their command line: the --device and --dtype flags, parsed into LibTorch's
// types with errors that name the flag and its value, and their exit codes:
// 0 measured; 1 LibTorch failed (out of memory, ...); 2 bad flags or a device
// this LibTorch cannot use.
#ifndef CHIMERA_WORKER_TOOLS_TOOL_CLI_H_
#define CHIMERA_WORKER_TOOLS_TOOL_CLI_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::worker {

// bfloat16, float32 or float64; INVALID_ARGUMENT naming --dtype otherwise.
absl::StatusOr<c10::ScalarType> ParseDtypeFlag(const std::string& name);

// cpu or cuda:N; INVALID_ARGUMENT naming --device otherwise. Whether this
// process can use the device is CheckDeviceUsable's question.
absl::StatusOr<c10::Device> ParseDeviceFlag(const std::string& name);

constexpr int kExitBadFlags = 2;

// The exit code of a measurement that ended with `status`, after printing a
// failure's message to stderr as "TOOL: message".
int ExitCodeOf(absl::string_view tool, const absl::Status& status);

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_TOOLS_TOOL_CLI_H_
