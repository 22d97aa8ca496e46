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
// starts no threads it would never use. It includes OpenMpWaitEnvironment.
std::map<std::string, std::string> ComputeThreadsEnvironment(int threads);

// OMP_WAIT_POLICY=passive: idle OpenMP threads sleep instead of spinning.
// LibTorch's OpenMP pool and OpenBLAS's pthread pool are two pools on the
// same cores, and with OpenMP's default the idle threads of one spin while
// the other's wait for a core: on a 2-core VM, with two threads, a BERT
// block took 2.3 times as long (46 against 20 ms forward), a one-worker
// BERT job trained at 3.8 against 6.2-6.5 samples/s, and the first block of a
// small model's profile took 10-50 ms instead of 0.2 in 10 of 12 profiles.
// The OpenMP runtime reads it once, when it loads.
std::map<std::string, std::string> OpenMpWaitEnvironment();

// Starts this program again, from the top (execv of /proc/self/exe with the
// same `argv`, so the same process id), with `environment` set, unless every
// variable of it already has its value: for what the OpenMP runtime and
// OpenBLAS read only when they load. Returns where nothing is missing, or
// where the restart fails (it says so on stderr and the program goes on as
// it is). Call it before the first tensor op.
void RestartWithEnvironment(const std::map<std::string, std::string>& environment,
                            char** argv);

// The threads the loaded BLAS says it uses; nullopt when it does not say
// (a BLAS other than OpenBLAS).
std::optional<int> BlasThreads();

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_COMPUTE_THREADS_H_
