// Doorbell: how one thread wakes a gRPC callback reactor that may finish,
// and delete itself, at any moment. Ringers hold the doorbell by shared_ptr
// and ring it outside their own locks; the reactor detaches it in OnDone,
// which waits for a ring under way, so no ring reaches a deleted reactor.
//
//   auto doorbell = std::make_shared<Doorbell>([this] { Pump(); });
//   registry->Watch(..., doorbell);   // the registry rings it
//   ...
//   void OnDone() override { doorbell->Detach(); ...; delete this; }
#ifndef CHIMERA_COORDINATOR_DOORBELL_H_
#define CHIMERA_COORDINATOR_DOORBELL_H_

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace chimera::coordinator {

class Doorbell {
 public:
  explicit Doorbell(std::function<void()> wake) : wake_(std::move(wake)) {}

  // Calls the wake function, unless detached.
  void Ring() {
    absl::MutexLock lock(&mutex_);
    if (wake_) wake_();
  }
  // Rings reach nobody from now on.
  void Detach() {
    absl::MutexLock lock(&mutex_);
    wake_ = nullptr;
  }

 private:
  absl::Mutex mutex_;
  std::function<void()> wake_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace chimera::coordinator

#endif  // CHIMERA_COORDINATOR_DOORBELL_H_
