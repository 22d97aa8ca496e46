// examples/chimera.yaml (Chimera over 4 pipeline stages on 4 workers) as a
// job file of its own with another number of steps, for tests that run the
// example as a user would but need it shorter (or longer).
//
//   const std::string file = ExampleChimeraJob(dir, /*steps=*/20);
//   RunProcess({CHIMERA_BINARY, "run", "-f", file});
#ifndef CHIMERA_TESTS_SUPPORT_EXAMPLE_JOB_H_
#define CHIMERA_TESTS_SUPPORT_EXAMPLE_JOB_H_

#include <string>

#include "tests/support/temp_dir.h"

namespace chimera::testing {

// The path of the copy written into `dir`; empty, with the test failed, when
// the example cannot be read.
std::string ExampleChimeraJob(const TempDir& dir, int steps);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_EXAMPLE_JOB_H_
