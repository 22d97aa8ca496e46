#include "worker/comm/communicator.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace chimera::worker {

absl::Status ValidateCommGroups(const std::vector<CommGroup>& groups,
                                int world_size) {
  std::set<std::string> names;
  for (const CommGroup& group : groups) {
    if (group.name.empty()) {
      return absl::InvalidArgumentError("a communication group has no name");
    }
    if (!names.insert(group.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("communication group name '", group.name,
                       "' is used twice; names must be unique"));
    }
    if (group.ranks.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("communication group '", group.name, "' has no ranks"));
    }
    for (size_t i = 0; i < group.ranks.size(); ++i) {
      const int rank = group.ranks[i];
      if (rank < 0 || rank >= world_size ||
          (i > 0 && rank <= group.ranks[i - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat("communication group '", group.name, "' has ranks [",
                         absl::StrJoin(group.ranks, ", "),
                         "]; they must be ascending, distinct and in [0, ",
                         world_size, ")"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateP2pLinks(const std::vector<P2pLink>& links,
                              int world_size) {
  std::set<P2pLink> seen;
  for (const P2pLink& link : links) {
    const std::string name =
        absl::StrCat("p2p link from rank ", link.src, " to rank ", link.dst);
    if (link.src < 0 || link.src >= world_size || link.dst < 0 ||
        link.dst >= world_size || link.src == link.dst) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " must join two distinct ranks of [0, ", world_size, ")"));
    }
    if (!seen.insert(link).second) {
      return absl::InvalidArgumentError(absl::StrCat(name, " is listed twice"));
    }
  }
  return absl::OkStatus();
}

namespace comm_internal {

absl::Status CheckPeerAndTag(absl::string_view operation, int peer, int64_t tag,
                             int rank, int world_size) {
  if (peer < 0 || peer >= world_size || peer == rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        operation, " peer is rank ", peer, "; rank ", rank,
        " can only reach the other ranks of [0, ", world_size, ")"));
  }
  if (tag < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(operation, " tag is ", tag, "; tags must be >= 0"));
  }
  return absl::OkStatus();
}

absl::Status NotAMember(int rank, absl::string_view group) {
  return absl::NotFoundError(absl::StrCat(
      "rank ", rank, " is not a member of a communication group named '", group,
      "'"));
}

absl::StatusOr<ShardRange> OwnShard(const std::vector<CommGroup>& groups,
                                    absl::string_view group, int rank,
                                    int64_t elements) {
  for (const CommGroup& candidate : groups) {
    if (candidate.name != group) continue;
    const auto member =
        std::find(candidate.ranks.begin(), candidate.ranks.end(), rank);
    if (member == candidate.ranks.end()) break;
    return ShardOf(elements, static_cast<int>(member - candidate.ranks.begin()),
                   static_cast<int>(candidate.ranks.size()));
  }
  return NotAMember(rank, group);
}

absl::StatusOr<std::unique_ptr<PendingOp>> AllGatherBySum(
    Communicator& comm, const at::Tensor& buffer, absl::string_view group,
    ShardRange own) {
  const at::Tensor flat = buffer.view({-1});
  flat.narrow(0, 0, own.begin).zero_();
  flat.narrow(0, own.end, flat.numel() - own.end).zero_();
  return comm.AllReduceSum(buffer, group);
}

std::string DescribeP2p(absl::string_view operation, int peer, int64_t tag) {
  return absl::StrCat(operation, operation == "send" ? " to" : " from",
                      " rank ", peer, " (tag ", tag, ")");
}

}  // namespace comm_internal
}  // namespace chimera::worker
