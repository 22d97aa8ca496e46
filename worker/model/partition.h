// How a model's transformer blocks are cut into pipeline stages: one
// contiguous LayerRange per model stage, in order, covering every block. A
// Partition is checked once, where it is made; whoever holds one may index
// it without checking again.
//
//   ASSIGN_OR_RETURN(const Partition partition,
//                    Partition::Of({{0, 3}, {3, 8}}, config.num_layers));
//   BuildTransformerStage(config, partition.stage(1), seed);  // blocks [3, 8)
#ifndef CHIMERA_WORKER_MODEL_PARTITION_H_
#define CHIMERA_WORKER_MODEL_PARTITION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/model/model_config.h"

namespace chimera::worker {

class Partition {
 public:
  // No stage and no block: what a spec holds before it is read.
  Partition() = default;

  // `stages` when they cut `num_layers` blocks in order, each starting where
  // the one before ends and holding at least one block; otherwise
  // INVALID_ARGUMENT naming the first range that does not ("partition[1] is
  // blocks [3, 3); ...").
  static absl::StatusOr<Partition> Of(std::vector<LayerRange> stages,
                                      int64_t num_layers);

  // Blocks [i·L/S, (i+1)·L/S) for stage i of S; INVALID_ARGUMENT when a
  // stage would hold no block (S outside [1, L]).
  static absl::StatusOr<Partition> Even(int64_t num_layers, int stages);

  int stage_count() const { return static_cast<int>(stages_.size()); }
  int64_t num_layers() const {
    return stages_.empty() ? 0 : stages_.back().end;
  }
  // The blocks of model stage `model_stage`, in [0, stage_count()).
  LayerRange stage(int model_stage) const { return stages_.at(model_stage); }
  const std::vector<LayerRange>& stages() const { return stages_; }

 private:
  explicit Partition(std::vector<LayerRange> stages)
      : stages_(std::move(stages)) {}

  std::vector<LayerRange> stages_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_MODEL_PARTITION_H_
