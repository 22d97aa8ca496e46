// RETURN_IF_ERROR and ASSIGN_OR_RETURN: early returns for absl::Status and
// absl::StatusOr<T>, which the Abseil release in Debian 12 does not ship.
//
//   absl::StatusOr<Plan> MakePlan(const JobSpec& spec) {
//     RETURN_IF_ERROR(Validate(spec));
//     ASSIGN_OR_RETURN(Profile profile, LoadProfile(spec));
//     ...
//   }
#ifndef CHIMERA_COMMON_STATUS_MACROS_H_
#define CHIMERA_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status) and returns it from the enclosing
// function if it is not OK.
#define RETURN_IF_ERROR(expr)                                      \
  do {                                                             \
    const ::absl::Status chimera_status_macro_status_ = (expr);    \
    if (!chimera_status_macro_status_.ok()) {                      \
      return chimera_status_macro_status_;                         \
    }                                                              \
  } while (false)

#define CHIMERA_STATUS_MACROS_CONCAT_INNER_(x, y) x##y
#define CHIMERA_STATUS_MACROS_CONCAT_(x, y) \
  CHIMERA_STATUS_MACROS_CONCAT_INNER_(x, y)

#define CHIMERA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, rexpr) \
  auto statusor = (rexpr);                                   \
  if (!statusor.ok()) {                                      \
    return std::move(statusor).status();                     \
  }                                                          \
  lhs = std::move(statusor).value()

// Evaluates `rexpr` (an absl::StatusOr<T>); returns its status from the
// enclosing function if it is not OK, otherwise moves the value into `lhs`,
// which may be a declaration (`ASSIGN_OR_RETURN(auto x, F());`).
#define ASSIGN_OR_RETURN(lhs, rexpr)                                        \
  CHIMERA_ASSIGN_OR_RETURN_IMPL_(                                           \
      CHIMERA_STATUS_MACROS_CONCAT_(chimera_statusor_, __LINE__), lhs, rexpr)

#endif  // CHIMERA_COMMON_STATUS_MACROS_H_
