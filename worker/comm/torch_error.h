// The message of an exception thrown by LibTorch, without the C++ backtrace
// that c10::Error appends, for use in absl::Status messages.
#ifndef CHIMERA_WORKER_COMM_TORCH_ERROR_H_
#define CHIMERA_WORKER_COMM_TORCH_ERROR_H_

#include <c10/util/Exception.h>

#include <exception>
#include <string>

namespace chimera::worker {

inline std::string TorchErrorMessage(const std::exception& e) {
  if (const auto* error = dynamic_cast<const c10::Error*>(&e)) {
    return error->what_without_backtrace();
  }
  return e.what();
}

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_COMM_TORCH_ERROR_H_
