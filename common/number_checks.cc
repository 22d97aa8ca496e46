#include "common/number_checks.h"

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace chimera {
namespace {

// Accepts a number above 0, or from 0 on when `zero_allowed`.
CLI::Validator NumberAboveZero(bool zero_allowed) {
  const char* const bound = zero_allowed ? ">= 0" : "> 0";
  return CLI::Validator(
      [zero_allowed, bound](std::string& text) -> std::string {
        double value = 0;
        const bool number =
            absl::SimpleAtod(text, &value) && std::isfinite(value);
        if (number && (value > 0 || (zero_allowed && value == 0))) return "";
        return absl::StrCat("must be a number ", bound, ", not '", text, "'");
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

const CLI::Validator kPositiveNumber = NumberAboveZero(false);
const CLI::Validator kNonNegativeNumber = NumberAboveZero(true);

}  // namespace chimera
