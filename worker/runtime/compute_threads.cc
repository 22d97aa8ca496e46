#include "worker/runtime/compute_threads.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

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
  std::map<std::string, std::string> environment = OpenMpWaitEnvironment();
  environment.insert({{"OPENBLAS_NUM_THREADS", count},
                      {"OMP_NUM_THREADS", count},
                      {"MKL_NUM_THREADS", count}});
  return environment;
}

std::map<std::string, std::string> OpenMpWaitEnvironment() {
  return {{"OMP_WAIT_POLICY", "passive"}};
}

void RestartWithEnvironment(const std::map<std::string, std::string>& environment,
                            char** argv) {
  const bool has_it = std::all_of(
      environment.begin(), environment.end(), [](const auto& variable) {
        const char* value = std::getenv(variable.first.c_str());
        return value != nullptr && variable.second == value;
      });
  if (has_it) return;
  for (const auto& [name, value] : environment) {
    ::setenv(name.c_str(), value.c_str(), /*overwrite=*/1);
  }
  ::execv("/proc/self/exe", argv);
  std::perror("cannot restart with the compute environment; going on as is");
}

std::optional<int> BlasThreads() {
  if (auto get = LoadedSymbol<int (*)()>("openblas_get_num_threads"))
    return get();
  return std::nullopt;
}

}  // namespace chimera::worker
