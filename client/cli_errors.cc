#include "client/cli_errors.h"

#include <CLI/CLI.hpp>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/exit_codes.h"

namespace chimera::client {

void ExitWithError(const absl::Status& status) {
  std::cerr << "chimera: " << absl::StatusCodeToString(status.code()) << ": "
            << status.message() << "\n";
  throw CLI::RuntimeError(status.code() == absl::StatusCode::kInvalidArgument ? kExitUsage
                                                                              : kExitFailure);
}

void ExitOnFileErrors(const std::string& file, const FieldErrors& errors) {
  if (errors.empty()) return;
  for (const FieldError& error : errors.errors()) {
    std::cerr << file << ": " << error.ToString() << "\n";
  }
  throw CLI::RuntimeError(kExitUsage);
}

}  // namespace chimera::client
