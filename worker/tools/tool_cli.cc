#include "worker/tools/tool_cli.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/comm/torch_error.h"

namespace chimera::worker {

absl::StatusOr<c10::ScalarType> ParseDtypeFlag(const std::string& name) {
  if (name == "bfloat16") return c10::ScalarType::BFloat16;
  if (name == "float32") return c10::ScalarType::Float;
  if (name == "float64") return c10::ScalarType::Double;
  return absl::InvalidArgumentError(absl::StrCat(
      "--dtype is '", name, "'; use bfloat16, float32 or float64"));
}

absl::StatusOr<c10::Device> ParseDeviceFlag(const std::string& name) {
  try {
    return c10::Device(name);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("--device is '", name,
                                                   "'; use cpu or cuda:N (",
                                                   TorchErrorMessage(e), ")"));
  }
}

int ExitCodeOf(absl::string_view tool, const absl::Status& status) {
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", std::string(tool).c_str(),
               std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kFailedPrecondition
             ? kExitBadFlags
             : 1;
}

}  // namespace chimera::worker
