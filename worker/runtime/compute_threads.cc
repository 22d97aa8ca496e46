#include "worker/runtime/compute_threads.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>

namespace chimera::worker {
namespace {

// The BLAS entry points that set its thread count, looked up at run time so
// that one binary serves whichever BLAS LibTorch was built against.
constexpr const char* kBlasThreadSetters[] = {"openblas_set_num_threads",
                                              "mkl_set_num_threads"};

template <typename Function>
Function LoadedSymbol(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

void LimitComputeThreads(int threads) {
  at::set_num_threads(threads);
  try {
    at::set_num_interop_threads(threads);
  } catch (const c10::Error&) {
    // Already started or set in this process (an earlier task of a test
    // binary); the inter-op pool only serves torch::jit forks, which workers
    // do not use.
  }
  for (const char* name : kBlasThreadSetters) {
    if (auto set = LoadedSymbol<void (*)(int)>(name)) set(threads);
  }
}

std::map<std::string, std::string> ComputeThreadsEnvironment(int threads) {
  const std::string count = std::to_string(threads);
  return {{"OPENBLAS_NUM_THREADS", count},
          {"OMP_NUM_THREADS", count},
          {"MKL_NUM_THREADS", count}};
}

std::optional<int> BlasThreads() {
  if (auto get = LoadedSymbol<int (*)()>("openblas_get_num_threads"))
    return get();
  return std::nullopt;
}

}  // namespace chimera::worker
