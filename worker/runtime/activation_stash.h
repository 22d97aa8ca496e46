// What a forward pass leaves for its backward: per (chunk, stage,
// micro-batch, backward part), the stage input and the end of the autograd
// graph, or only the input when the backward recomputes the forward. The
// executor takes each entry out at its backward, which frees it; a split
// backward's BACKWARD_INPUT leaves the entry in place, holding what its
// BACKWARD_WEIGHT needs, and the BACKWARD_WEIGHT takes it out.
//
//   ActivationStash stash;
//   RETURN_IF_ERROR(stash.Put({ref, mb, part}, {input, output, {}}));
//   ...
//   ASSIGN_OR_RETURN(StashedForward forward, stash.Take({ref, mb, part}));
#ifndef CHIMERA_WORKER_RUNTIME_ACTIVATION_STASH_H_
#define CHIMERA_WORKER_RUNTIME_ACTIVATION_STASH_H_

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "absl/status/statusor.h"
#include "schedule/program.h"
#include "worker/model/micro_batch.h"
#include "worker/model/split_backward.h"

namespace chimera::worker {

// One slice of one micro-batch on one stage replica: part `part` of a
// backward split in parts (0 when whole).
struct SliceKey {
  schedule::StageRef ref;
  int micro_batch = 0;
  int part = 0;

  bool operator<(const SliceKey& other) const {
    return std::tie(ref, micro_batch, part) <
           std::tie(other.ref, other.micro_batch, other.part);
  }
};

// "chunk 1 stage 2 micro-batch 3 part 0", for errors.
std::string DescribeSlice(const SliceKey& key);

struct StashedForward {
  // The slice's stage input: token ids on the model's first stage; otherwise
  // an activation that is a leaf of the graph (requires grad) unless the
  // forward will be recomputed.
  at::Tensor input;
  // The graph's end: the stage output, or the loss on the model's last
  // stage. Undefined when the forward will be recomputed.
  at::Tensor output;
  // The slice's targets, kept by a recomputing last stage for its loss.
  MicroBatch targets;
  // Set by the slice's BACKWARD_INPUT, which releases the three above: what
  // its BACKWARD_WEIGHT computes the weights' gradients from.
  std::optional<WeightGradientRoots> weight_roots;
};

class ActivationStash {
 public:
  ActivationStash() = default;
  ActivationStash(const ActivationStash&) = delete;
  ActivationStash& operator=(const ActivationStash&) = delete;

  // INTERNAL when `key` is already stashed (a forward ran twice).
  absl::Status Put(const SliceKey& key, StashedForward forward);

  // Removes and returns the entry; INTERNAL naming the key when absent (a
  // backward without its forward).
  absl::StatusOr<StashedForward> Take(const SliceKey& key);

  // The entry in place, which stays stashed; INTERNAL naming the key when
  // absent. Valid until the entry is taken.
  absl::StatusOr<StashedForward*> Find(const SliceKey& key);

  // Slices stashed now, and the most since the last ResetPeak().
  size_t size() const { return entries_.size(); }
  size_t peak() const { return peak_; }
  void ResetPeak() { peak_ = entries_.size(); }

 private:
  std::map<SliceKey, StashedForward> entries_;
  size_t peak_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_ACTIVATION_STASH_H_
