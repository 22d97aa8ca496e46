// Paths a job names on a worker's disk (spec.data.path,
// spec.training.checkpointDir) are relative to a root the worker's operator
// chooses (chimera-worker --data-root, --checkpoint-root), never to wherever
// the worker happens to run: whoever may submit a job may then read and write
// inside those roots and nowhere else.
//
// A job's path is checked twice: by its text wherever the job is validated
// (CheckRootRelative: relative, no ".."), and on the worker by what it
// resolves to (ResolveUnderRoot: no symbolic link leads out of the root).
//
//   RETURN_IF_ERROR(CheckRootRelative(spec.data().path()));
//   ASSIGN_OR_RETURN(std::string file,
//                    ResolveUnderRoot(data_root, spec.data().path()));
#ifndef CHIMERA_COMMON_ROOT_PATH_H_
#define CHIMERA_COMMON_ROOT_PATH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera {

// OK when `path` is relative, names no parent directory ("..") and holds no
// NUL byte: it can only point inside whatever root it is joined to, and
// names there what it says. INVALID_ARGUMENT saying which rule it breaks
// otherwise; an empty path is the root itself.
absl::Status CheckRootRelative(absl::string_view path);

// `root` as an absolute path with every symbolic link resolved; what a
// worker keeps of its --data-root and --checkpoint-root flags.
// INVALID_ARGUMENT naming `root` when it is not an existing directory.
absl::StatusOr<std::string> CanonicalRoot(absl::string_view root);

// `path` under `root` (a CanonicalRoot), with every symbolic link along it
// resolved; what is missing of it (a checkpoint directory not yet created)
// is taken as written. INVALID_ARGUMENT as CheckRootRelative, and
// PERMISSION_DENIED when a symbolic link leads out of `root` (the message
// names `path`, never where the link points).
absl::StatusOr<std::string> ResolveUnderRoot(absl::string_view root,
                                             absl::string_view path);

}  // namespace chimera

#endif  // CHIMERA_COMMON_ROOT_PATH_H_
