#include "net/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include "absl/time/clock.h"

namespace chimera::net {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(10);

TEST(ChildProcessTest, EnvironmentSetsAndReplacesVariablesOverTheParents) {
  ::setenv("CHIMERA_TEST_KEPT", "parent", 1);
  ::setenv("CHIMERA_TEST_REPLACED", "parent", 1);
  ChildProcess child(
      {"/bin/sh", "-c",
       "echo \"$CHIMERA_TEST_KEPT $CHIMERA_TEST_REPLACED $CHIMERA_TEST_NEW\""},
      "", "", {{"CHIMERA_TEST_REPLACED", "child"}, {"CHIMERA_TEST_NEW", "1"}});
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.Wait(kTimeout), 0) << child.err();
  EXPECT_EQ(child.out(), "parent child 1\n");
}

TEST(ChildProcessTest, WithoutEnvironmentTheChildInheritsTheParents) {
  ::setenv("CHIMERA_TEST_INHERITED", "yes", 1);
  ChildProcess child({"/bin/sh", "-c", "echo \"$CHIMERA_TEST_INHERITED\""});
  ASSERT_TRUE(child.started());
  EXPECT_EQ(child.Wait(kTimeout), 0) << child.err();
  EXPECT_EQ(child.out(), "yes\n");
}

// /proc shows a signal's effect a moment after kill() returns.
bool BecomesStopped(const ChildProcess& child, bool stopped) {
  const absl::Time deadline = absl::Now() + kTimeout;
  while (child.Stopped() != stopped && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  return child.Stopped() == stopped;
}

TEST(ChildProcessTest, StoppedSaysWhetherTheChildIsStoppedBySignal) {
  ChildProcess child({"/bin/sleep", "30"});
  ASSERT_TRUE(child.started());
  EXPECT_FALSE(child.Stopped());
  child.Signal(SIGSTOP);
  EXPECT_TRUE(BecomesStopped(child, true));
  child.Signal(SIGCONT);
  EXPECT_TRUE(BecomesStopped(child, false));
  child.Signal(SIGKILL);
  EXPECT_EQ(child.Wait(kTimeout), 128 + SIGKILL);
  EXPECT_FALSE(child.Stopped()) << "an ended child is not stopped";
}

}  // namespace
}  // namespace chimera::net
