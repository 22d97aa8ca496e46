#include "worker/model/partition.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace chimera::worker {

absl::StatusOr<Partition> Partition::Of(std::vector<LayerRange> stages,
                                        int64_t num_layers) {
  int64_t next = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].begin != next || stages[i].end <= next) {
      return absl::InvalidArgumentError(
          absl::StrCat("partition[", i, "] is blocks [", stages[i].begin, ", ",
                       stages[i].end, "); it must start at block ", next,
                       " and hold at least one block"));
    }
    next = stages[i].end;
  }
  if (next != num_layers) {
    return absl::InvalidArgumentError(absl::StrCat("partition ends at block ",
                                                   next, "; the model has ",
                                                   num_layers, " blocks"));
  }
  return Partition(std::move(stages));
}

absl::StatusOr<Partition> Partition::Even(int64_t num_layers, int stages) {
  std::vector<LayerRange> ranges;
  for (int i = 0; i < stages; ++i) {
    ranges.push_back({i * num_layers / stages, (i + 1) * num_layers / stages});
  }
  return Of(std::move(ranges), num_layers);
}

}  // namespace chimera::worker
