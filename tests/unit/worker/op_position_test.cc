#include "worker/runtime/op_position.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <thread>
#include <utility>

#include "absl/time/clock.h"
#include "worker/comm/shared_memory.h"

namespace chimera::worker {
namespace {

class OpPositionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<SharedMemorySegment> segment = SharedMemorySegment::Create(
        RandomSegmentName(), OpPositionBoard::kBytes);
    ASSERT_TRUE(segment.ok()) << segment.status();
    segment_ = std::move(*segment);
  }

  OpPositionBoard Board() const { return OpPositionBoard(segment_->data()); }

  std::optional<SharedMemorySegment> segment_;
};

TEST_F(OpPositionTest, ABoardSaysNothingBeforeItsFirstOp) {
  EXPECT_FALSE(Board().Read().has_value());
}

TEST_F(OpPositionTest, AReaderSeesTheLatestOpAndHowLongItHasRun) {
  OpPositionBoard writer = Board();
  writer.Enter(3, 11);
  writer.Enter(4, 7);
  absl::SleepFor(absl::Milliseconds(20));
  const std::optional<OpPosition> position = Board().Read();
  ASSERT_TRUE(position.has_value());
  EXPECT_EQ(position->step, 4);
  EXPECT_EQ(position->instruction, 7);
  EXPECT_GE(position->in_op, absl::Milliseconds(20));
  EXPECT_LT(position->in_op, absl::Seconds(60));
}

TEST_F(OpPositionTest, AnotherProcessReadsWhatATaskProcessWrote) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    OpPositionBoard(segment_->data()).Enter(9, 42);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::optional<OpPosition> position = Board().Read();
  ASSERT_TRUE(position.has_value());
  EXPECT_EQ(position->step, 9);
  EXPECT_EQ(position->instruction, 42);
}

TEST_F(OpPositionTest, AReadDuringWritesNeverMixesTwoOps) {
  std::atomic<bool> done{false};
  std::thread writer([this, &done] {
    OpPositionBoard board = Board();
    for (int i = 1; i <= 200000; ++i) board.Enter(i, i);
    done = true;
  });
  const OpPositionBoard reader = Board();
  int reads = 0;
  while (!done) {
    const std::optional<OpPosition> position = reader.Read();
    if (!position) continue;
    ++reads;
    ASSERT_EQ(position->step, position->instruction);
  }
  writer.join();
  EXPECT_GT(reads, 0);
}

TEST_F(OpPositionTest, AWriterStoppedInsideAWriteLeavesNoPositionAndNoHang) {
  Board().Enter(1, 2);
  // An odd sequence count: a write begun and never finished.
  static_cast<std::atomic<uint64_t>*>(segment_->data())->store(3);
  EXPECT_FALSE(Board().Read().has_value());
}

}  // namespace
}  // namespace chimera::worker
