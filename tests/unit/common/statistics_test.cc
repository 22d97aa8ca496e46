#include "common/statistics.h"

#include "gtest/gtest.h"

namespace chimera {
namespace {

TEST(StatisticsTest, TheMedianIsAMeasuredValueTheUpperMiddleForAnEvenCount) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 3);
  EXPECT_EQ(Median({7}), 7);
  EXPECT_EQ(Median({}), 0);
}

}  // namespace
}  // namespace chimera
