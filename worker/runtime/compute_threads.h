// One thread count for every pool a worker's compute runs on: LibTorch's
// intra-op pool (OpenMP in Debian's build), its inter-op pool, and the BLAS
// library's own threads. The last needs its own call: Debian's OpenBLAS is the
// pthread build, which ignores OpenMP and at::set_num_threads, so without it
// every matrix product spreads over all of the machine's cores, whatever
// spec.resources.threadsPerWorker says.
//
//   LimitComputeThreads(task.threads);  // before the first tensor op
#ifndef CHIMERA_WORKER_RUNTIME_COMPUTE_THREADS_H_
#define CHIMERA_WORKER_RUNTIME_COMPUTE_THREADS_H_

#include <map>
#include <optional>
#include <string>

namespace chimera::worker {

// Sets the intra-op pool and the BLAS (OpenBLAS or MKL, found at run time
// in whatever LibTorch loaded) to `threads` (>= 1), and the inter-op pool too
// where it has not started yet (LibTorch allows that once per process).
void LimitComputeThreads(int threads);

// The environment that sizes the thread pools of a process about to start
// (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS): OpenBLAS reads it
// when it loads, before any code can call LimitComputeThreads, and then
// starts no threads it would never use.
std::map<std::string, std::string> ComputeThreadsEnvironment(int threads);

// The threads the loaded BLAS says it uses; nullopt when it does not say
// (a BLAS other than OpenBLAS).
std::optional<int> BlasThreads();

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_COMPUTE_THREADS_H_
