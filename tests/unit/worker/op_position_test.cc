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

// The writer writes until the reader has seen enough whole writes: a
// writer that finished first (a busy machine may run it to the end before
// the reader's first read) would leave nothing checked.
TEST_F(OpPositionTest, AReadDuringWritesNeverMixesTwoOps) {
  constexpr int kReads = 1000;
  std::atomic<bool> stop{false};
  std::thread writer([this, &stop] {
    OpPositionBoard board = Board();
    for (int i = 1; !stop; i = i % 1000000 + 1) board.Enter(i, i);
  });
  const OpPositionBoard reader = Board();
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  int reads = 0;
  int mixed = 0;
  while (reads < kReads && absl::Now() < deadline) {
    const std::optional<OpPosition> position = reader.Read();
    if (!position) continue;
    ++reads;
    if (position->step != position->instruction) ++mixed;
  }
  stop = true;
  writer.join();
  EXPECT_EQ(reads, kReads);
  EXPECT_EQ(mixed, 0);
}

TEST_F(OpPositionTest, AWriterStoppedInsideAWriteLeavesNoPositionAndNoHang) {
  Board().Enter(1, 2);
  // An odd sequence count: a write begun and never finished.
  static_cast<std::atomic<uint64_t>*>(segment_->data())->store(3);
  EXPECT_FALSE(Board().Read().has_value());
}

}  // namespace
}  // namespace chimera::worker
