// How a task process's end reads to the coordinator: its own error as it
// said it, retried only when a retry may pass; a kill by signal named, with
// the kernel's OOM killer where the worker's cgroup counted one; and the
// cgroup's OOM-kill count read from cgroup v2's files.
#include "worker/daemon/task_exit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>

#include "tests/support/temp_dir.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

TEST(TaskExitTest, ATasksOwnErrorIsRetriedOnlyWhenARetryMayPass) {
  const TaskExit full = DescribeTaskExit(
      1, absl::ResourceExhaustedError("cannot write 'ck/step-4': No space"),
      false);
  EXPECT_EQ(full.message, "cannot write 'ck/step-4': No space");
  EXPECT_TRUE(full.retryable);
  EXPECT_TRUE(DescribeTaskExit(1, absl::UnavailableError("peer gone"), false)
                  .retryable);
  EXPECT_TRUE(
      DescribeTaskExit(1, absl::DeadlineExceededError("allreduce"), false)
          .retryable);
  EXPECT_FALSE(
      DescribeTaskExit(1, absl::InvalidArgumentError("binary data"), false)
          .retryable);
  EXPECT_FALSE(
      DescribeTaskExit(1, absl::FailedPreconditionError("not shared"), false)
          .retryable);
}

TEST(TaskExitTest, AKilledProcessIsNamedBySignalAndOutOfMemoryWhenTheKernelSaysSo) {
  const TaskExit killed = DescribeTaskExit(128 + SIGKILL, std::nullopt, false);
  EXPECT_EQ(killed.message, "task process killed by signal 9 (SIGKILL)");
  EXPECT_TRUE(killed.retryable);
  EXPECT_THAT(DescribeTaskExit(128 + SIGKILL, std::nullopt, true).message,
              HasSubstr("SIGKILL): out of memory (the kernel's OOM killer"));
  EXPECT_EQ(DescribeTaskExit(128 + SIGSEGV, std::nullopt, true).message,
            "task process killed by signal 11 (SIGSEGV)");
  const TaskExit silent = DescribeTaskExit(3, std::nullopt, false);
  EXPECT_EQ(silent.message,
            "task process exited with status 3 without saying why");
  EXPECT_TRUE(silent.retryable);
}

TEST(TaskExitTest, OomKillsAreReadFromTheProcessesCgroup) {
  const chimera::testing::TempDir dir;
  const std::string self =
      dir.WriteFile("cgroup", "0::/system.slice/worker.service\n");
  std::filesystem::create_directories(dir.path() +
                                      "/fs/system.slice/worker.service");
  dir.WriteFile("fs/system.slice/worker.service/memory.events",
                "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\n");
  EXPECT_EQ(CgroupOomKills(dir.path() + "/fs", self), 2);
  // cgroup v1 lists controllers, not "0::"; nothing is known then.
  const std::string v1 = dir.WriteFile("v1", "4:memory:/worker\n");
  EXPECT_EQ(CgroupOomKills(dir.path() + "/fs", v1), std::nullopt);
  EXPECT_EQ(CgroupOomKills(dir.path() + "/none", self), std::nullopt);
}

}  // namespace
}  // namespace chimera::worker
