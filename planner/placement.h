// Device placement: which node and device each worker rank of a W x D plan
// runs on (rank = dp_rank * D + position; with replicated stages, as
// schedule::Topology::RankOf lays them out). Placement decides which link
// every p2p transfer and every gradient allreduce uses.
//
// Policies (DAPPLE section 4.2), each allocating the W replicas of one
// pipeline position (W x its replication) at a time, positions in pipeline
// order:
//   kFreshFirst    from untouched nodes first: a position's replicas share a
//                  node and its fast links, at the risk of fragmentation;
//   kAppendFirst   from partly used nodes first, then fresh ones;
//   kScatterFirst  one device per node in turn, spreading every position.
// And MixPipe's rule:
//   kReplicasTogether  all replicas of a model stage (both directions of a
//                  bidirectional schedule, all W) inside one node when they
//                  fit, so gradient allreduce stays on intra-node links.
//
//   ASSIGN_OR_RETURN(std::vector<DeviceSlot> slots,
//                    PlaceRanks(cluster.spec(), 2, 4, /*bidirectional=*/true,
//                               PlacementPolicy::kReplicasTogether));
#ifndef CHIMERA_PLANNER_PLACEMENT_H_
#define CHIMERA_PLANNER_PLACEMENT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "chimera/v1/cluster.pb.h"

namespace chimera::planner {

enum class PlacementPolicy {
  kFreshFirst,
  kAppendFirst,
  kScatterFirst,
  kReplicasTogether,
};

inline constexpr PlacementPolicy kAllPlacementPolicies[] = {
    PlacementPolicy::kFreshFirst, PlacementPolicy::kAppendFirst,
    PlacementPolicy::kScatterFirst, PlacementPolicy::kReplicasTogether};

// "fresh-first", "append-first", "scatter-first", "replicas-together".
std::string PlacementPolicyName(PlacementPolicy policy);

struct DeviceSlot {
  int node = 0;
  int device = 0;
};

// One slot per rank. `bidirectional`: pipeline positions p and D-1-p hold
// replicas of the same model stages (Chimera, GEMS, MixPipe).
// `replication`: the workers of each position per data-parallel replica
// (empty: one each). FAILED_PRECONDITION when the cluster has fewer devices
// than the plan has workers.
absl::StatusOr<std::vector<DeviceSlot>> PlaceRanks(
    const chimera::v1::ClusterSpec& cluster, int width, int depth,
    bool bidirectional, PlacementPolicy policy,
    const std::vector<int>& replication = {});

// The alpha-beta link between two placed ranks' nodes.
const chimera::v1::LinkSpec& LinkBetween(const chimera::v1::ClusterSpec& cluster,
                                         const DeviceSlot& a,
                                         const DeviceSlot& b);

}  // namespace chimera::planner

#endif  // CHIMERA_PLANNER_PLACEMENT_H_
