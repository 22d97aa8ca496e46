#include "common/progress_bar.h"

#include "gtest/gtest.h"

namespace chimera {
namespace {

TEST(ProgressBarTest, FillsInProportionAndEstimatesTheRest) {
  EXPECT_EQ(ProgressBar(0, 10, 2),
            "[>                             ] 0/10  ETA 20s");
  EXPECT_EQ(ProgressBar(5, 10, 2),
            "[===============>              ] 5/10  ETA 10s");
  EXPECT_EQ(ProgressBar(10, 10, 2),
            "[==============================] 10/10  ETA 0");
  // Nothing to do yet, or more done than planned: never a negative ETA.
  EXPECT_EQ(ProgressBar(0, 0, 1),
            "[>                             ] 0/0  ETA 0");
  EXPECT_EQ(ProgressBar(12, 10, 1),
            "[==============================] 12/10  ETA 0");
}

}  // namespace
}  // namespace chimera
