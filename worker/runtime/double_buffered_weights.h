// PipeDream-2BW's weights of one model stage (schedule::UpdateRule::
// kDoubleBuffered): two versions in two buffers, version v in buffer v % 2,
// and the stage's parameters pointed at the one an op runs on.
//
// Autograd keeps a graph's parameters as the parameter tensors themselves,
// not copies, and checks at the backward that nothing wrote to them in place
// since the forward. So a switch of versions points the parameters at
// another buffer (set_data: no copy, and no write as far as autograd is
// concerned), and an update writes into a buffer, never through a parameter.
// A micro-batch's backward then computes on the version its forward ran on,
// provided the parameters point at that version again when it runs.
//
//   DoubleBufferedWeights weights(stage.parameters());
//   RETURN_IF_ERROR(weights.Use(0));  // forwards, backwards of step 0's batch
//   weights.Update(optimizer);        // version 1, from those gradients
#ifndef CHIMERA_WORKER_RUNTIME_DOUBLE_BUFFERED_WEIGHTS_H_
#define CHIMERA_WORKER_RUNTIME_DOUBLE_BUFFERED_WEIGHTS_H_

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "worker/runtime/optimizer.h"

namespace chimera::worker {

class DoubleBufferedWeights {
 public:
  // Version 0 is the parameters' current values, which it takes over.
  explicit DoubleBufferedWeights(std::vector<at::Tensor> parameters);

  // Points the parameters at `version`: the newest or the one before it
  // (INTERNAL otherwise: that version is gone or not made yet).
  absl::Status Use(int64_t version);

  // Makes version newest() + 1: the newest, updated by `optimizer` from the
  // parameters' gradients (which it zeroes). It is written over version
  // newest() - 1, whose micro-batches must all be done. The parameters keep
  // pointing where they did.
  void Update(Optimizer& optimizer);

  int64_t newest() const { return newest_; }

 private:
  std::vector<at::Tensor>& Buffer(int64_t version) {
    return buffers_[version % 2];
  }

  std::vector<at::Tensor> parameters_;
  std::array<std::vector<at::Tensor>, 2> buffers_;
  int64_t newest_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_DOUBLE_BUFFERED_WEIGHTS_H_
