// Runs a program installed beside chimera (chimera-tokenize,
// chimera-worker) in place of this process, for the commands whose work
// lives there.
//
//   RunSiblingProgram("chimera-worker", {"export", "--job", file}, "export");
#ifndef CHIMERA_CLIENT_SIBLING_PROGRAM_H_
#define CHIMERA_CLIENT_SIBLING_PROGRAM_H_

#include <string>
#include <vector>

namespace chimera::client {

// Replaces this process with `program` (from chimera's own directory) and
// `arguments`. Returns only when it cannot: then it prints why, naming
// `command`, and throws CLI::RuntimeError with kExitFailure.
void RunSiblingProgram(const std::string& program,
                       const std::vector<std::string>& arguments,
                       const std::string& command);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_SIBLING_PROGRAM_H_
