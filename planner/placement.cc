#include "planner/placement.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "schedule/program.h"

namespace chimera::planner {
namespace {

// Free devices per node, handed out lowest device index first.
class DevicePool {
 public:
  DevicePool(int nodes, int per_node)
      : per_node_(per_node), next_(nodes, 0) {}

  int nodes() const { return static_cast<int>(next_.size()); }
  int free(int node) const { return per_node_ - next_[node]; }
  bool fresh(int node) const { return next_[node] == 0; }
  DeviceSlot Take(int node) { return {node, next_[node]++}; }

  // Nodes with free devices, ordered by `better` (a strict weak order).
  template <typename Better>
  std::vector<int> Ranked(Better better) const {
    std::vector<int> order;
    for (int n = 0; n < nodes(); ++n) {
      if (free(n) > 0) order.push_back(n);
    }
    std::stable_sort(order.begin(), order.end(), better);
    return order;
  }

 private:
  int per_node_;
  std::vector<int> next_;
};

// Fills nodes one after the other in the given order.
std::vector<DeviceSlot> Fill(DevicePool& pool, const std::vector<int>& order,
                             int count) {
  std::vector<DeviceSlot> slots;
  for (int node : order) {
    while (pool.free(node) > 0 && static_cast<int>(slots.size()) < count) {
      slots.push_back(pool.Take(node));
    }
  }
  return slots;
}

std::vector<DeviceSlot> FreshFirst(DevicePool& pool, int count) {
  return Fill(pool, pool.Ranked([&](int a, int b) {
                return pool.fresh(a) && !pool.fresh(b);
              }),
              count);
}

std::vector<DeviceSlot> AppendFirst(DevicePool& pool, int count) {
  return Fill(pool, pool.Ranked([&](int a, int b) {
                return !pool.fresh(a) && pool.fresh(b);
              }),
              count);
}

// One device from each node in turn, most free first: from the nodes already
// in use while they have room, from all nodes when none is in use yet.
std::vector<DeviceSlot> ScatterFirst(DevicePool& pool, int count) {
  std::vector<DeviceSlot> slots;
  while (static_cast<int>(slots.size()) < count) {
    const std::vector<int> by_room = pool.Ranked(
        [&](int a, int b) { return pool.free(a) > pool.free(b); });
    std::vector<int> used;
    for (int node : by_room) {
      if (!pool.fresh(node)) used.push_back(node);
    }
    for (int node : used.empty() ? by_room : used) {
      if (static_cast<int>(slots.size()) == count) break;
      slots.push_back(pool.Take(node));
    }
  }
  return slots;
}

// One node with room for the whole group, the fullest such node first; a
// group larger than any node's free room falls back to fresh-first.
std::vector<DeviceSlot> Together(DevicePool& pool, int count) {
  std::vector<int> order = pool.Ranked(
      [&](int a, int b) { return pool.free(a) < pool.free(b); });
  for (int node : order) {
    if (pool.free(node) >= count) return Fill(pool, {node}, count);
  }
  return FreshFirst(pool, count);
}

}  // namespace

std::string PlacementPolicyName(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kFreshFirst:
      return "fresh-first";
    case PlacementPolicy::kAppendFirst:
      return "append-first";
    case PlacementPolicy::kScatterFirst:
      return "scatter-first";
    case PlacementPolicy::kReplicasTogether:
      return "replicas-together";
  }
  return "unknown";
}

absl::StatusOr<std::vector<DeviceSlot>> PlaceRanks(
    const chimera::v1::ClusterSpec& cluster, int width, int depth,
    bool bidirectional, PlacementPolicy policy,
    const std::vector<int>& replication) {
  schedule::Topology shape;
  shape.width = width;
  shape.depth = depth;
  shape.replication = replication;
  const int devices = cluster.nodes() * cluster.devices_per_node();
  if (shape.NumWorkers() > devices) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a plan of ", width, " x ", shape.WorkersPerPipeline(), " = ",
        shape.NumWorkers(), " workers needs more than the cluster's ", devices,
        " devices"));
  }
  DevicePool pool(cluster.nodes(), cluster.devices_per_node());
  std::vector<DeviceSlot> slots(shape.NumWorkers());
  // Groups of pipeline positions allocated together: single positions, or
  // mirrored pairs whose replicas hold the same model stages.
  std::vector<std::vector<int>> groups;
  const bool pair_mirrors =
      bidirectional && policy == PlacementPolicy::kReplicasTogether;
  for (int p = 0; p < (pair_mirrors ? (depth + 1) / 2 : depth); ++p) {
    groups.push_back({p});
    if (pair_mirrors && depth - 1 - p != p) groups.back().push_back(depth - 1 - p);
  }
  for (const std::vector<int>& positions : groups) {
    int count = 0;
    for (int position : positions) count += width * shape.ReplicasOf(position);
    std::vector<DeviceSlot> taken;
    switch (policy) {
      case PlacementPolicy::kFreshFirst:
        taken = FreshFirst(pool, count);
        break;
      case PlacementPolicy::kAppendFirst:
        taken = AppendFirst(pool, count);
        break;
      case PlacementPolicy::kScatterFirst:
        taken = ScatterFirst(pool, count);
        break;
      case PlacementPolicy::kReplicasTogether:
        taken = Together(pool, count);
        break;
    }
    int next = 0;
    for (int position : positions) {
      for (int dp = 0; dp < width; ++dp) {
        for (int k = 0; k < shape.ReplicasOf(position); ++k) {
          slots[shape.RankOf(dp, position, k)] = taken[next++];
        }
      }
    }
  }
  return slots;
}

const chimera::v1::LinkSpec& LinkBetween(const chimera::v1::ClusterSpec& cluster,
                                         const DeviceSlot& a,
                                         const DeviceSlot& b) {
  return a.node == b.node ? cluster.links().intra_node()
                          : cluster.links().inter_node();
}

}  // namespace chimera::planner
