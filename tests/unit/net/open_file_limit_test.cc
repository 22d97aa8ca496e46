#include "net/open_file_limit.h"

#include <sys/resource.h>

#include <gtest/gtest.h>

namespace chimera::net {
namespace {

TEST(OpenFileLimitTest, RaisesTheSoftLimitToTheHardOne) {
  rlimit limit{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GT(limit.rlim_max, rlim_t{64}) << "no room to lower the limit first";
  // Lowered first, as a service manager starts a process with 1024.
  const rlim_t hard = limit.rlim_max;
  limit.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);

  const absl::StatusOr<uint64_t> raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(*raised, static_cast<uint64_t>(hard));
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  EXPECT_EQ(limit.rlim_cur, hard);
}

}  // namespace
}  // namespace chimera::net
