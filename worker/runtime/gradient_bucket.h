// A model stage's gradients in one flat buffer (BucketGradients: each
// parameter's gradient views its slice), held for the whole run or only
// within a step.
//
// A stage whose gradients are reduce-scattered (sharding
// gradients-and-optimizer) needs its whole buffer only from the step's first
// weight gradient until its shard is stepped; nothing reads it after. Holding
// it just then is what lets a breadth-first worker, whose stages' backward
// passes follow each other, hold one stage's buffer at a time instead of all
// of them (the generator ends such a stage's sum before the next stage's
// first weight gradient). Every other stage keeps its buffer between steps,
// zeroed after its update, as autograd accumulates into it.
//
//   GradientBucket bucket(parameters, GradientBucket::Lifetime::kStep);
//   bucket.Hold();              // before a weight gradient: allocates
//   ... backward passes accumulate into it, the sum ...
//   sharded.Step(bucket.Hold());
//   bucket.Reset();             // frees it; the gradients are undefined
#ifndef CHIMERA_WORKER_RUNTIME_GRADIENT_BUCKET_H_
#define CHIMERA_WORKER_RUNTIME_GRADIENT_BUCKET_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace chimera::worker {

class GradientBucket {
 public:
  enum class Lifetime {
    kRun,   // allocated now and kept; Reset zeroes it
    kStep,  // allocated by Hold; Reset frees it
  };

  // `parameters`: leaf tensors, all on one device and of one dtype.
  GradientBucket(std::vector<at::Tensor> parameters, Lifetime lifetime);

  // The buffer, allocated (zeroed, the parameters' gradients viewing it)
  // where it is not held.
  const at::Tensor& Hold();
  // After the update: zeroes the buffer for the next step's accumulation, or
  // (Lifetime::kStep) frees it and leaves the parameters' gradients
  // undefined.
  void Reset();

  bool held() const { return buffer_.defined(); }
  // The whole buffer's bytes, held or not.
  int64_t bytes() const { return bytes_; }

 private:
  std::vector<at::Tensor> parameters_;
  const Lifetime lifetime_;
  int64_t bytes_ = 0;
  at::Tensor buffer_;  // undefined while not held
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_GRADIENT_BUCKET_H_
