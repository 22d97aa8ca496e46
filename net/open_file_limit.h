// How many connections a server process may hold open.
//
// A coordinator holds a connection for every worker, and each is a file
// descriptor: the soft limit most systems start a service with (1024) would
// refuse the thousandth worker. The hard limit is what an administrator
// allows; a server raises its soft limit to it, as it is meant to.
//
//   ASSIGN_OR_RETURN(uint64_t open_files, RaiseOpenFileLimit());
#ifndef CHIMERA_NET_OPEN_FILE_LIMIT_H_
#define CHIMERA_NET_OPEN_FILE_LIMIT_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace chimera::net {

// Raises this process's soft limit on open files to its hard limit and
// returns the limit now in force.
absl::StatusOr<uint64_t> RaiseOpenFileLimit();

}  // namespace chimera::net

#endif  // CHIMERA_NET_OPEN_FILE_LIMIT_H_
