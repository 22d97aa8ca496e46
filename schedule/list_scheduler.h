// The list scheduler that orders compute ops for the generators that are not
// a closed-form slot formula: on a unit-time grid (a forward takes one slot
// per micro-batch, a backward `backward_slots`, each half of a split one half
// of that but at least one, one more with recomputation, divided among its
// parts), each
// idle position picks, among the ready head ops of its streams, the one with
// the lowest priority value; forwards also need admission.
//
// A generator describes a schedule as
//  - placement: the position each op runs on (ComputeOp.ref via Placement);
//  - streams: ops of one stream run in the order they were added (e.g. a
//    pipeline's forwards in micro-batch order);
//  - admission: a forward of group g starts only while fewer than
//    limit(g) forwards of that group are in flight (started, backward of
//    their micro-batches on that stage not finished);
//  - priority: backward-first, forward-first, breadth- or depth-first are
//    all just a choice of numbers.
// Data dependencies (previous stage's forward, next stage's backward or
// BACKWARD_INPUT, own forward before own backward, own BACKWARD_INPUT before
// its BACKWARD_WEIGHT) come from the topology. A forward stays in flight for
// admission until its BACKWARD or BACKWARD_WEIGHT ends: its activations are
// held until then.
//
//   ListScheduler ls(topology, placement, params.backward_slots);
//   int g = ls.AddAdmissionGroup(/*limit=*/depth - i);
//   ls.Add(forward_op, /*stream=*/0, /*priority=*/..., /*admission=*/g);
//   ASSIGN_OR_RETURN(auto order, ls.Run());   // per position, grid times set
#ifndef CHIMERA_SCHEDULE_LIST_SCHEDULER_H_
#define CHIMERA_SCHEDULE_LIST_SCHEDULER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "schedule/program_builder.h"

namespace chimera::schedule {

inline constexpr int kNoAdmission = -1;

// A priority offset that puts one class of ops behind another (forwards
// behind backwards, W's behind everything): larger than any op's own key.
inline constexpr int64_t kLaterPriority = int64_t{1} << 40;

class ListScheduler {
 public:
  ListScheduler(const Topology& topology, const Placement& placement,
                int backward_slots);
  ListScheduler(const ListScheduler&) = delete;
  ListScheduler& operator=(const ListScheduler&) = delete;

  // A new admission group admitting `limit` forwards at once.
  int AddAdmissionGroup(int limit);

  // Adds `op` (grid times ignored) to the end of `stream`, an id chosen by
  // the caller and unique per position. `admission` applies to forwards.
  void Add(const ComputeOp& op, int stream, int64_t priority,
           int admission = kNoAdmission);

  // Orders every op; per position, sorted by grid_start. Internal error if
  // the streams and admission limits leave ops that can never run.
  absl::StatusOr<std::vector<std::vector<ComputeOp>>> Run();

 private:
  struct Node {
    ComputeOp op;
    int position = 0;
    int stream = 0;
    int64_t priority = 0;
    int admission = kNoAdmission;
    int unmet_deps = 0;
    std::vector<int> dependents;
    // Forward: backward ops still to finish before its admission slot
    // frees. Backward: the forward whose slot it helps free.
    int pending_backwards = 0;
    int forward = -1;
  };
  // Where one Run is on the grid.
  struct Progress {
    // Per stream: its next node.
    std::vector<size_t> head;
    // Per admission group: forwards in flight.
    std::vector<int> in_flight;
    // Per position: the node it runs (-1 idle), until when.
    std::vector<int> running;
    std::vector<int64_t> busy_until;
    std::vector<std::vector<ComputeOp>> order;
    size_t remaining = 0;
  };

  // Data dependencies through (stage, micro-batch) -> forward/backward.
  void WireDependencies();
  // Frees the positions whose ops end at slot `t`.
  void FinishOps(int64_t t, Progress& progress);
  // Starts an op on every idle position that has a ready one; whether any
  // started.
  bool StartOps(int64_t t, Progress& progress);
  // The stream whose ready head node `position` runs next (the lowest
  // priority value), or -1.
  int PickStream(int position, const Progress& progress) const;

  const Topology& topology_;
  const Placement& placement_;
  const int backward_slots_;
  std::vector<Node> nodes_;
  std::vector<int> limits_;
  // (position, stream) in first-use order, and each stream's node ids.
  std::vector<std::vector<int>> streams_of_position_;
  std::vector<std::vector<int>> stream_nodes_;
  std::vector<std::pair<int, int>> stream_keys_;
};

// Grid times for a compute order a generator prescribes exactly (Megatron's
// interleaved 1F1B, Chimera's forward doubling, MixPipe): each position runs
// its ops in the given order, each as soon as its data dependencies allow.
// Internal error if the order deadlocks (an op waits on one queued behind
// it), which is how a prescribed order is proven executable.
absl::StatusOr<std::vector<std::vector<ComputeOp>>> TimeFixedOrder(
    const Topology& topology, const Placement& placement, int backward_slots,
    const std::vector<std::vector<ComputeOp>>& order);

}  // namespace chimera::schedule

#endif  // CHIMERA_SCHEDULE_LIST_SCHEDULER_H_
