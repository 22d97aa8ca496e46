#include "schedule/shared_cores.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace chimera::schedule {
namespace {

void ExpectSpan(CoreSpan span, double start, double end) {
  EXPECT_NEAR(span.start, start, 1e-12);
  EXPECT_NEAR(span.end, end, 1e-12);
}

TEST(SharedCoresTest, OneCoreRunsOneOpAtATime) {
  SharedCores cores(1, 1);
  ExpectSpan(cores.Run(0, 0, 1), 0, 1);
  ExpectSpan(cores.Run(0, 0, 1), 1, 2);
  ExpectSpan(cores.Run(0, 5, 1), 5, 6);
}

TEST(SharedCoresTest, TwoCoresRunTwoOpsAtOnce) {
  SharedCores cores(1, 2);
  ExpectSpan(cores.Run(0, 0, 1), 0, 1);
  ExpectSpan(cores.Run(0, 0, 1), 0, 1);
  ExpectSpan(cores.Run(0, 0, 1), 1, 2);
}

TEST(SharedCoresTest, AnOpRunsOnOneCoreAtATime) {
  // Both cores are free, but a rank computes on one thread.
  SharedCores cores(1, 2);
  ExpectSpan(cores.Run(0, 0, 2), 0, 2);
}

TEST(SharedCoresTest, AnOpUsesAFreeStretchTooShortForAllOfIt) {
  SharedCores cores(1, 1);
  ExpectSpan(cores.Run(0, 0, 1), 0, 1);
  ExpectSpan(cores.Run(0, 2, 1), 2, 3);
  // Ready at 0.5: runs 1-2, waits for the op booked at 2, ends at 3.5.
  ExpectSpan(cores.Run(0, 0.5, 1.5), 1, 3.5);
  // The stretches it took are busy now.
  ExpectSpan(cores.Run(0, 0, 0.25), 3.5, 3.75);
}

TEST(SharedCoresTest, NodesDoNotShareCores) {
  SharedCores cores(2, 1);
  ExpectSpan(cores.Run(0, 0, 1), 0, 1);
  ExpectSpan(cores.Run(1, 0, 1), 0, 1);
}

TEST(SharedCoresTest, NoWorkTakesNoTimeAndNoCore) {
  SharedCores cores(1, 1);
  ExpectSpan(cores.Run(0, 3, 0), 3, 3);
  ExpectSpan(cores.Run(0, 3, 1), 3, 4);
}

TEST(SharedCoresTest, EveryOpEndsWhateverTheRounding) {
  // Decimal times leave remainders that rounding cannot add back: an op
  // must still end, and no sooner than its work allows.
  SharedCores cores(1, 2);
  std::mt19937 random(7);
  std::uniform_int_distribution<int> hundredths(0, 300);
  for (int i = 0; i < 2000; ++i) {
    const double ready = hundredths(random) * 0.01;
    const double work = (1 + hundredths(random)) * 0.001;
    const CoreSpan span = cores.Run(0, ready, work);
    ASSERT_TRUE(std::isfinite(span.end)) << "op " << i;
    ASSERT_GE(span.start, ready);
    ASSERT_GE(span.end - span.start, work * (1 - 1e-9));
  }
}

}  // namespace
}  // namespace chimera::schedule
