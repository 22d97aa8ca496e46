#include "common/number_checks.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera {
namespace {

using ::testing::HasSubstr;

// What parsing `--seconds VALUE` says: empty when it is accepted.
std::string ParseError(const CLI::Validator& check, const std::string& value) {
  CLI::App app;
  double seconds = 0;
  app.add_option("--seconds", seconds)->check(check);
  try {
    app.parse(std::vector<std::string>{value, "--seconds"});
  } catch (const CLI::ParseError& error) {
    return error.what();
  }
  return "";
}

TEST(NumberChecksTest, AcceptNumbersInRange) {
  EXPECT_EQ(ParseError(kPositiveNumber, "0.5"), "");
  EXPECT_EQ(ParseError(kPositiveNumber, "3"), "");
  EXPECT_EQ(ParseError(kNonNegativeNumber, "0"), "");
  EXPECT_EQ(ParseError(kNonNegativeNumber, "2e9"), "");
}

TEST(NumberChecksTest, SayWhatTheValueMustBeAndNameIt) {
  EXPECT_THAT(ParseError(kPositiveNumber, "0"),
              HasSubstr("--seconds: must be a number > 0, not '0'"));
  EXPECT_THAT(ParseError(kPositiveNumber, "$(HEARTBEAT)"),
              HasSubstr("must be a number > 0, not '$(HEARTBEAT)'"));
  EXPECT_THAT(ParseError(kNonNegativeNumber, "-1"),
              HasSubstr("must be a number >= 0, not '-1'"));
  EXPECT_THAT(ParseError(kNonNegativeNumber, "nan"),
              HasSubstr("must be a number >= 0, not 'nan'"));
  EXPECT_THAT(ParseError(kPositiveNumber, "inf"),
              HasSubstr("must be a number > 0, not 'inf'"));
}

}  // namespace
}  // namespace chimera
