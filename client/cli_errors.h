// How every CLI command ends on an error: one clear line on stderr (or one
// line per problem of a file) and an exit code that says what went wrong
// (client/exit_codes.h). The functions throw CLI::RuntimeError, which main
// turns into the exit code.
#ifndef CHIMERA_CLIENT_CLI_ERRORS_H_
#define CHIMERA_CLIENT_CLI_ERRORS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/field_errors.h"

namespace chimera::client {

// "chimera: CODE: message"; exits 2 for INVALID_ARGUMENT (bad input), 1
// otherwise.
[[noreturn]] void ExitWithError(const absl::Status& status);

// One "FILE: field: problem" line per error, then exits 2; returns when
// there are none.
void ExitOnFileErrors(const std::string& file, const FieldErrors& errors);

template <typename T>
T ValueOrExit(absl::StatusOr<T> value) {
  if (!value.ok()) ExitWithError(value.status());
  return *std::move(value);
}

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_CLI_ERRORS_H_
