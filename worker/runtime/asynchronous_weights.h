// The weights of the model stages a rank holds under an asynchronous update
// rule (schedule::UpdateRule): which version each compute op runs on, and
// when a version can go.
//
// - PipeDream-2BW (kDoubleBuffered): step b's micro-batches run their
//   forwards and backwards on the weights after b - 1 updates (the initial
//   ones for b = 0); an update writes over the version before the newest.
//   Two versions are kept.
// - PipeDream (kStashed): a forward runs on the newest weights and its
//   micro-batch's backward on the same version, stashed until then; a
//   stage updates after every micro-batch's backward. A version goes once
//   no micro-batch in flight runs on it, and an update nothing in flight
//   runs on is written in place: at most D - i are kept on stage i (its
//   D - i - 1 micro-batches in flight at an update, and the new one).
//
//   AsynchronousWeights weights(rule, {{0, stage.parameters()}});
//   RETURN_IF_ERROR(weights.Use(0, OpKind::kForward, {batch, mb}));
//   ... the forward ...
//   RETURN_IF_ERROR(weights.Use(0, OpKind::kBackward, {batch, mb}));
//   ... the backward ...
//   weights.Done(0, OpKind::kBackward, {batch, mb});
//   weights.Update(0, optimizer);
//   ...
//   RETURN_IF_ERROR(weights.Restart());  // drained: go on from the newest
#ifndef CHIMERA_WORKER_RUNTIME_ASYNCHRONOUS_WEIGHTS_H_
#define CHIMERA_WORKER_RUNTIME_ASYNCHRONOUS_WEIGHTS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "schedule/program.h"
#include "worker/runtime/optimizer.h"
#include "worker/runtime/weight_versions.h"

namespace chimera::worker {

class AsynchronousWeights {
 public:
  // A micro-batch of one step: the step (counted from the first, or from the
  // last Restart) and its index within it.
  struct MicroBatchId {
    int64_t step = 0;
    int micro_batch = 0;
    bool operator<(const MicroBatchId& o) const {
      return step != o.step ? step < o.step : micro_batch < o.micro_batch;
    }
  };

  // `stages`: the parameters of each model stage held, by model stage.
  // `rule` must be asynchronous.
  AsynchronousWeights(schedule::UpdateRule rule,
                      const std::map<int, std::vector<at::Tensor>>& stages);

  // Points `model_stage`'s parameters at the version compute op `op` on
  // micro-batch `id` runs on. INTERNAL when that version is gone (a
  // program out of the rule's order).
  absl::Status Use(int model_stage, schedule::OpKind op, MicroBatchId id);

  // After a compute op: a micro-batch whose weight gradients are done runs
  // on its version no more.
  void Done(int model_stage, schedule::OpKind op, MicroBatchId id);

  // The stage's next version, from its gradients (which `optimizer` zeroes).
  void Update(int model_stage, Optimizer& optimizer);

  // Once no micro-batch is in flight (a drained pipeline): keeps only each
  // stage's newest weights, points the parameters at them, and counts steps
  // (MicroBatchId::step) from 0 again, so that the run goes on as one that
  // starts from these weights (a run resumed from their checkpoint).
  absl::Status Restart();

  // Versions `model_stage` keeps now.
  int Kept(int model_stage) const {
    return stages_.at(model_stage).versions->kept();
  }
  // The bytes of the versions beyond one per stage at the most kept since
  // the last ResetPeaks: what the weights take beyond the parameters.
  int64_t ExtraVersionBytes() const;
  void ResetPeaks();

 private:
  struct Stage {
    std::unique_ptr<WeightVersions> versions;
    // The version step 0 runs on: the newest at the last Restart.
    int64_t first_version = 0;
    // PipeDream: the version each micro-batch in flight runs on.
    std::map<MicroBatchId, int64_t> in_flight;
  };

  const schedule::UpdateRule rule_;
  std::map<int, Stage> stages_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_ASYNCHRONOUS_WEIGHTS_H_
