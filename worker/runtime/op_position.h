// Where a task process is in its program, kept in memory that its worker
// daemon maps too: the daemon can then say which op a hung rank is stuck
// in even when the rank cannot speak (a stopped process, a blocked
// collective), and tell the coordinator with its heartbeats.
//
// One writer (the task's executor, before each instruction) and readers in
// other processes of the host; a sequence count makes a read that overlaps
// a write retry, so no reader sees half of one.
//
//   OpPositionBoard board(segment.data());   // zeroed memory: no op yet
//   board.Enter(step, instruction);          // the task, per instruction
//   std::optional<OpPosition> now = board.Read();  // the daemon
#ifndef CHIMERA_WORKER_RUNTIME_OP_POSITION_H_
#define CHIMERA_WORKER_RUNTIME_OP_POSITION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace chimera::worker {

struct OpPosition {
  int64_t step = 0;
  // The instruction's index in the rank's program.
  int instruction = 0;
  // How long ago the instruction began.
  absl::Duration in_op;
};

class OpPositionBoard {
 public:
  // The memory a board needs: zero-filled, shared by the processes.
  static constexpr size_t kBytes = 64;

  // Over `memory` (kBytes, suitably aligned, as a mapping is), which must
  // outlive the board.
  explicit OpPositionBoard(void* memory);

  // The writer's: `instruction` of `step` begins now.
  void Enter(int64_t step, int instruction);
  // The latest Enter of any process on this memory; none before the first,
  // or while a write stays half done (its writer stopped inside it).
  std::optional<OpPosition> Read() const;

 private:
  // Both clocks are the host's monotonic clock, the same in every process.
  struct Layout {
    std::atomic<uint64_t> sequence;  // odd while a write is under way
    std::atomic<int64_t> step;
    std::atomic<int64_t> instruction;
    std::atomic<int64_t> entered_nanos;
  };
  static_assert(sizeof(Layout) <= kBytes);
  static_assert(std::atomic<int64_t>::is_always_lock_free,
                "shared between processes, the atomics must not be locks");

  Layout* const layout_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_OP_POSITION_H_
