#include "worker/tools/tool_cli.h"

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/comm/torch_error.h"
#include "worker/runtime/device_memory.h"

namespace chimera::worker {

namespace {

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

}  // namespace

absl::StatusOr<at::TensorOptions> MeasuringOptions(
    const MeasuringFlags& flags) {
  ASSIGN_OR_RETURN(const c10::ScalarType dtype, ParseDtypeFlag(flags.dtype));
  ASSIGN_OR_RETURN(const c10::Device device, ParseDeviceFlag(flags.device));
  RETURN_IF_ERROR(CheckDeviceUsable(device));
  return at::TensorOptions(dtype).device(device);
}

void AddMeasuringFlags(CLI::App& app, MeasuringFlags& flags) {
  app.add_option("--device", flags.device, "cpu or cuda:N")
      ->capture_default_str();
  app.add_option("--dtype", flags.dtype, "bfloat16, float32 or float64")
      ->capture_default_str();
  app.add_option("--repetitions", flags.repetitions,
                 "Timed runs after one warm-up")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
}

int ParseAndMeasure(CLI::App& app, int argc, char** argv,
                    const std::function<absl::Status()>& measure) {
  constexpr int kExitFailed = 1, kExitBadFlags = 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadFlags;
  }
  const absl::Status status = measure();
  if (status.ok()) return 0;
  std::fprintf(stderr, "%s: %s\n", app.get_name().c_str(),
               std::string(status.message()).c_str());
  return status.code() == absl::StatusCode::kInvalidArgument ||
                 status.code() == absl::StatusCode::kFailedPrecondition
             ? kExitBadFlags
             : kExitFailed;
}

}  // namespace chimera::worker
