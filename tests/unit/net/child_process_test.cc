#include "net/child_process.h"

#include <gtest/gtest.h>
#include <stdlib.h>

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

}  // namespace
}  // namespace chimera::net
