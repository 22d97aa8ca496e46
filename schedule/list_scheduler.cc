#include "schedule/list_scheduler.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace chimera::schedule {
namespace {

int64_t StageMbKey(const Topology& t, StageRef ref, int mb) {
  return (static_cast<int64_t>(ref.chunk) * t.depth + ref.stage) *
             t.micro_batches +
         mb;
}

}  // namespace

ListScheduler::ListScheduler(const Topology& topology,
                             const Placement& placement, int backward_slots)
    : topology_(topology),
      placement_(placement),
      backward_slots_(backward_slots),
      streams_of_position_(topology.depth) {}

int ListScheduler::AddAdmissionGroup(int limit) {
  limits_.push_back(limit);
  return static_cast<int>(limits_.size()) - 1;
}

void ListScheduler::Add(const ComputeOp& op, int stream, int64_t priority,
                        int admission) {
  Node node;
  node.op = op;
  int64_t slots = static_cast<int64_t>(op.micro_batches.size());
  if (IsBackward(op.op)) {
    // A half of a split backward takes half a backward's slots.
    const int whole = op.op == OpKind::kBackward ? backward_slots_
                                                 : std::max(1, backward_slots_ / 2);
    const int parts = std::max(1, op.num_parts);
    slots = std::max(1, (whole + (op.recompute ? 1 : 0) + parts / 2) / parts);
  }
  node.op.grid_start = 0;
  node.op.grid_end = slots;
  node.position = placement_.At(op.ref);
  node.stream = stream;
  node.priority = priority;
  node.admission = op.op == OpKind::kForward ? admission : kNoAdmission;
  const std::pair<int, int> key{node.position, stream};
  auto it = std::find(stream_keys_.begin(), stream_keys_.end(), key);
  size_t index = it - stream_keys_.begin();
  if (it == stream_keys_.end()) {
    stream_keys_.push_back(key);
    stream_nodes_.emplace_back();
    streams_of_position_[node.position].push_back(static_cast<int>(index));
  }
  stream_nodes_[index].push_back(static_cast<int>(nodes_.size()));
  nodes_.push_back(std::move(node));
}

absl::StatusOr<std::vector<std::vector<ComputeOp>>> ListScheduler::Run() {
  WireDependencies();
  Progress progress;
  progress.head.assign(stream_nodes_.size(), 0);
  progress.in_flight.assign(limits_.size(), 0);
  progress.running.assign(topology_.depth, -1);
  progress.busy_until.assign(topology_.depth, 0);
  progress.order.resize(topology_.depth);
  progress.remaining = nodes_.size();
  for (int64_t t = 0; progress.remaining > 0; ++t) {
    FinishOps(t, progress);
    if (progress.remaining == 0) break;
    const bool started = StartOps(t, progress);
    if (!started &&
        std::all_of(progress.running.begin(), progress.running.end(),
                    [](int i) { return i < 0; })) {
      return absl::InternalError(absl::StrCat(
          "list scheduler stuck at slot ", t, " with ", progress.remaining,
          " ops left: stream order or admission limits admit no ready op"));
    }
  }
  return std::move(progress.order);
}

void ListScheduler::WireDependencies() {
  absl::flat_hash_map<int64_t, int> forward_of;
  // The ops that compute each (stage, micro-batch)'s input gradient: its
  // BACKWARD or BACKWARD_INPUT parts.
  absl::flat_hash_map<int64_t, std::vector<int>> input_gradient_of;
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    const ComputeOp& op = nodes_[i].op;
    for (int mb : op.micro_batches) {
      int64_t key = StageMbKey(topology_, op.ref, mb);
      if (op.op == OpKind::kForward) {
        forward_of[key] = i;
      } else if (ComputesInputGradient(op.op)) {
        input_gradient_of[key].push_back(i);
      }
    }
  }
  auto depend = [&](int node, int on) {
    nodes_[on].dependents.push_back(node);
    ++nodes_[node].unmet_deps;
  };
  // `node` waits for the parts of `ops` that cover its own part.
  auto depend_on_parts = [&](int node, const std::vector<int>& ops) {
    const ComputeOp& op = nodes_[node].op;
    for (int b : ops) {
      const ComputeOp& other = nodes_[b].op;
      if (other.num_parts != op.num_parts || other.part == op.part) {
        depend(node, b);
      }
    }
  };
  for (int i = 0; i < static_cast<int>(nodes_.size()); ++i) {
    Node& node = nodes_[i];
    const ComputeOp& op = node.op;
    if (op.op == OpKind::kForward) {
      if (std::optional<StageRef> prev = topology_.Prev(op.ref)) {
        for (int mb : op.micro_batches) {
          auto it = forward_of.find(StageMbKey(topology_, *prev, mb));
          if (it != forward_of.end()) depend(i, it->second);
        }
      }
      continue;
    }
    const int mb = op.micro_batches[0];
    const int64_t key = StageMbKey(topology_, op.ref, mb);
    auto own = forward_of.find(key);
    if (own != forward_of.end()) {
      depend(i, own->second);
      // The forward's activations stay until its weight gradient.
      if (ComputesWeightGradient(op.op)) {
        node.forward = own->second;
        ++nodes_[own->second].pending_backwards;
      }
    }
    if (op.op == OpKind::kBackwardWeight) {
      auto it = input_gradient_of.find(key);
      if (it != input_gradient_of.end()) depend_on_parts(i, it->second);
      continue;
    }
    if (std::optional<StageRef> next = topology_.Next(op.ref)) {
      auto it = input_gradient_of.find(StageMbKey(topology_, *next, mb));
      if (it != input_gradient_of.end()) depend_on_parts(i, it->second);
    }
  }
}

void ListScheduler::FinishOps(int64_t t, Progress& progress) {
  for (int p = 0; p < topology_.depth; ++p) {
    const int i = progress.running[p];
    if (i < 0 || progress.busy_until[p] > t) continue;
    progress.running[p] = -1;
    --progress.remaining;
    for (int d : nodes_[i].dependents) --nodes_[d].unmet_deps;
    if (nodes_[i].forward >= 0) {
      Node& fwd = nodes_[nodes_[i].forward];
      if (--fwd.pending_backwards == 0 && fwd.admission != kNoAdmission) {
        --progress.in_flight[fwd.admission];
      }
    }
  }
}

bool ListScheduler::StartOps(int64_t t, Progress& progress) {
  bool started = false;
  for (int p = 0; p < topology_.depth; ++p) {
    if (progress.running[p] >= 0) continue;
    const int s = PickStream(p, progress);
    if (s < 0) continue;
    const int i = stream_nodes_[s][progress.head[s]++];
    Node& node = nodes_[i];
    if (node.admission != kNoAdmission) ++progress.in_flight[node.admission];
    const int64_t duration = node.op.grid_end - node.op.grid_start;
    node.op.grid_start = t;
    node.op.grid_end = t + duration;
    progress.busy_until[p] = t + duration;
    progress.order[p].push_back(node.op);
    progress.running[p] = i;
    started = true;
  }
  return started;
}

int ListScheduler::PickStream(int position, const Progress& progress) const {
  int best = -1;
  int best_stream = -1;
  for (int s : streams_of_position_[position]) {
    if (progress.head[s] >= stream_nodes_[s].size()) continue;
    const int i = stream_nodes_[s][progress.head[s]];
    const Node& node = nodes_[i];
    if (node.unmet_deps > 0) continue;
    if (node.admission != kNoAdmission &&
        progress.in_flight[node.admission] >= limits_[node.admission]) {
      continue;
    }
    if (best < 0 || node.priority < nodes_[best].priority) {
      best = i;
      best_stream = s;
    }
  }
  return best_stream;
}

absl::StatusOr<std::vector<std::vector<ComputeOp>>> TimeFixedOrder(
    const Topology& topology, const Placement& placement, int backward_slots,
    const std::vector<std::vector<ComputeOp>>& order) {
  // One stream per position and no admission: the scheduler can only start
  // each position's next op, once it is ready.
  ListScheduler scheduler(topology, placement, backward_slots);
  for (const std::vector<ComputeOp>& ops : order) {
    for (const ComputeOp& op : ops) scheduler.Add(op, /*stream=*/0, 0);
  }
  return scheduler.Run();
}

}  // namespace chimera::schedule
