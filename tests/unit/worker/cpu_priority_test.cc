#include "worker/runtime/cpu_priority.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace chimera::worker {
namespace {

using ::testing::ElementsAre;

TEST(NiceIncrementsTest, EachLevelGivesAQuarterMoreWeight) {
  // 1.25^3 = 1.95, 1.25^7 = 4.77: the light ranks of a head-heavy pipeline.
  EXPECT_THAT(NiceIncrements({2.0, 4.0, 0.84, 4.0}, /*threads_per_rank=*/1,
                             /*cores=*/2),
              ElementsAre(3, 0, 7, 0));
}

TEST(NiceIncrementsTest, ARankComputingAlmostNothingYieldsAtMostTheCap) {
  EXPECT_THAT(NiceIncrements({1.0, 0.001, 1.0}, 1, 2),
              ElementsAre(0, kMaxNiceIncrement, 0));
}

TEST(NiceIncrementsTest, NobodyYieldsWhereEveryRanksThreadsHaveACore) {
  EXPECT_THAT(NiceIncrements({1.0, 0.1}, 1, 2), ElementsAre(0, 0));
  EXPECT_THAT(NiceIncrements({1.0, 0.1}, 2, 4), ElementsAre(0, 0));
  EXPECT_THAT(NiceIncrements({1.0, 0.1}, 2, 3), ElementsAre(0, 10));
}

TEST(NiceIncrementsTest, NobodyYieldsWhereABusyTimeIsUnknown) {
  EXPECT_THAT(NiceIncrements({1.0, 0.0, 0.2}, 1, 2), ElementsAre(0, 0, 0));
  EXPECT_THAT(NiceIncrements({}, 1, 2), ElementsAre());
}

int NiceOfThread(pid_t tid) {
  return ::getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
}

pid_t ThisThread() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

// What a child process finds after lowering itself: 0 where every thread it
// had (the main one and one already started) and one it starts afterwards
// run `increment` levels lower, else a code naming the first that does not.
int LowerAndCheckInAChild(int increment) {
  const int before = NiceOfThread(ThisThread());
  std::atomic<pid_t> started_before{0};
  std::atomic<bool> done{false};
  std::thread waiting([&] {
    started_before = ThisThread();
    while (!done) std::this_thread::yield();
  });
  while (started_before == 0) std::this_thread::yield();
  if (!LowerCpuPriority(increment).ok()) return 10;
  int code = 0;
  if (NiceOfThread(ThisThread()) != before + increment) code = 11;
  if (code == 0 && NiceOfThread(started_before) != before + increment) {
    code = 12;
  }
  int started_after = 0;
  std::thread([&] { started_after = NiceOfThread(ThisThread()); }).join();
  if (code == 0 && started_after != before + increment) code = 13;
  done = true;
  waiting.join();
  return code;
}

// In a child, since no process can take back a priority it gave up.
TEST(LowerCpuPriorityTest, LowersEveryThreadAndThoseStartedLater) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(LowerAndCheckInAChild(3));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0)
      << "10: refused, 11: the main thread, 12: a thread started before, "
         "13: a thread started after was not lowered";
}

TEST(LowerCpuPriorityTest, NoIncrementChangesNothing) {
  const int before = NiceOfThread(ThisThread());
  EXPECT_TRUE(LowerCpuPriority(0).ok());
  EXPECT_EQ(NiceOfThread(ThisThread()), before);
}

}  // namespace
}  // namespace chimera::worker
