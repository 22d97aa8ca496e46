#include "common/logging.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override { saved_ = MinLogLevel(); }
  void TearDown() override { SetMinLogLevel(saved_); }
  LogLevel saved_ = LogLevel::kInfo;
};

TEST_F(LoggingTest, LineCarriesLevelTimeAndSource) {
  SetMinLogLevel(LogLevel::kInfo);
  ::testing::internal::CaptureStderr();
  CHIMERA_LOG(WARNING) << "disk " << 93 << "% full";
  const std::string line = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(line, MatchesRegex(
      "W [0-9-]+T[0-9:.]+ logging_test\\.cc:[0-9]+\\] disk 93% full\n"));
}

TEST_F(LoggingTest, MessagesBelowTheLevelAreDroppedUnevaluated) {
  SetMinLogLevel(LogLevel::kWarning);
  int evaluated = 0;
  auto count = [&evaluated] { return ++evaluated; };
  ::testing::internal::CaptureStderr();
  CHIMERA_LOG(INFO) << "hidden " << count();
  CHIMERA_LOG(ERROR) << "shown";
  const std::string output = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(evaluated, 0);
  EXPECT_THAT(output, HasSubstr("shown"));
  EXPECT_THAT(output, ::testing::Not(HasSubstr("hidden")));
}

TEST_F(LoggingTest, ParsesLevelNamesCaseInsensitively) {
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::kDebug);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_THAT(ParseLogLevel("loud").status().message(),
              HasSubstr("'loud' is not one of debug, info, warning, error"));
}

}  // namespace
}  // namespace chimera
