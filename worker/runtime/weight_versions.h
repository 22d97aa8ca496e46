// The weight versions of one model stage under an asynchronous update rule
// (schedule::UpdateRule): PipeDream-2BW keeps two, PipeDream one per
// micro-batch in flight. Each version lives in buffers of its own, and the
// stage's parameters are pointed at the one an op runs on.
//
// Autograd keeps a graph's parameters as the parameter tensors themselves,
// not copies, and checks at the backward that nothing wrote to them in place
// since the forward. So a switch of versions points the parameters at
// another buffer (set_data: no copy, and no write as far as autograd is
// concerned), and an update writes into a buffer, never through a parameter.
// A micro-batch's backward then computes on the version its forward ran on,
// provided the parameters point at that version again when it runs.
//
//   WeightVersions weights(stage.parameters());
//   RETURN_IF_ERROR(weights.Use(0));  // a forward, and later its backward
//   weights.Update(optimizer);        // version 1, from the gradients
//   weights.DropBelow(1);             // once nothing runs on version 0
#ifndef CHIMERA_WORKER_RUNTIME_WEIGHT_VERSIONS_H_
#define CHIMERA_WORKER_RUNTIME_WEIGHT_VERSIONS_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <vector>

#include "absl/status/status.h"
#include "worker/runtime/optimizer.h"

namespace chimera::worker {

class WeightVersions {
 public:
  // Version 0 is the parameters' current values, which it takes over.
  explicit WeightVersions(std::vector<at::Tensor> parameters);

  // Points the parameters at `version` (INTERNAL when it is dropped or not
  // made yet).
  absl::Status Use(int64_t version);

  // Makes version newest() + 1: the newest, updated by `optimizer` from the
  // parameters' gradients (which it zeroes), in a dropped version's buffers
  // where there is one. The parameters keep pointing where they did.
  void Update(Optimizer& optimizer);
  // The same, written over the newest version's own buffers: for when
  // nothing will run on the newest weights any more.
  void UpdateInPlace(Optimizer& optimizer);

  // Frees the versions before `version` (never the newest) for Update to
  // reuse; a parameter still pointing at one keeps it until Use.
  void DropBelow(int64_t version);

  int64_t newest() const { return newest_; }
  // Versions kept, the newest among them, and the most kept at once since
  // the last ResetPeak.
  int kept() const { return static_cast<int>(versions_.size()); }
  int most_kept() const { return most_kept_; }
  void ResetPeak() { most_kept_ = kept(); }
  // Bytes of one version.
  int64_t version_bytes() const { return version_bytes_; }

 private:
  std::vector<at::Tensor> parameters_;
  std::map<int64_t, std::vector<at::Tensor>> versions_;
  // Buffers of dropped versions, to write the next ones into.
  std::vector<std::vector<at::Tensor>> free_;
  int64_t newest_ = 0;
  int most_kept_ = 1;
  int64_t version_bytes_ = 0;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_WEIGHT_VERSIONS_H_
