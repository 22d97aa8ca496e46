#include "worker/runtime/activation_stash.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera::worker {

std::string DescribeSlice(const SliceKey& key) {
  return absl::StrCat("chunk ", key.ref.chunk, " stage ", key.ref.stage,
                      " micro-batch ", key.micro_batch, " part ", key.part);
}

absl::Status ActivationStash::Put(const SliceKey& key, StashedForward forward) {
  if (!entries_.emplace(key, std::move(forward)).second) {
    return absl::InternalError(absl::StrCat(
        "the forward of ", DescribeSlice(key), " is already stashed"));
  }
  peak_ = std::max(peak_, entries_.size());
  return absl::OkStatus();
}

absl::StatusOr<StashedForward> ActivationStash::Take(const SliceKey& key) {
  ASSIGN_OR_RETURN(StashedForward * entry, Find(key));
  StashedForward forward = std::move(*entry);
  entries_.erase(key);
  return forward;
}

absl::StatusOr<StashedForward*> ActivationStash::Find(const SliceKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    return absl::InternalError(absl::StrCat(
        "no stashed forward for the backward of ", DescribeSlice(key)));
  }
  return &it->second;
}

}  // namespace chimera::worker
