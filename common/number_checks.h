// Checks of numeric command-line flags whose messages say what the value
// must be. CLI11's own PositiveNumber and NonNegativeNumber are ranges over
// every double, so a wrong value reads "Value x not in range 0.000000 to
// 1797…" with the 300 digits of the largest double.
//
//   app.add_option("--heartbeat-period", seconds)->check(kPositiveNumber);
#ifndef CHIMERA_COMMON_NUMBER_CHECKS_H_
#define CHIMERA_COMMON_NUMBER_CHECKS_H_

#include <CLI/CLI.hpp>

namespace chimera {

// A finite number greater than 0: "must be a number > 0, not 'x'" otherwise.
extern const CLI::Validator kPositiveNumber;
// A finite number of 0 or more: "must be a number >= 0, not 'x'" otherwise.
extern const CLI::Validator kNonNegativeNumber;

}  // namespace chimera

#endif  // CHIMERA_COMMON_NUMBER_CHECKS_H_
