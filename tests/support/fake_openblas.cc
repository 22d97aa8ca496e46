// Preloaded (LD_PRELOAD) into a worker, this library plays an OpenBLAS that
// does not know the CPU it runs on, whatever the test machine's CPU is:
//  - openblas_get_corename says "Prescott", OpenBLAS's generic x86-64 core,
//    unless OPENBLAS_CORETYPE names another, which it then claims to run;
//  - with FAKE_OPENBLAS_WRONG_PRODUCTS set, float32 products (sgemm_, what
//    LibTorch calls) come out wrong on any core but Prescott, as an OpenBLAS
//    whose kernels for a core are broken on some processor would.
// Everything else, and the products themselves, are the real OpenBLAS's.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>

namespace {

// OpenBLAS's generic x86-64 core; mutable, as OpenBLAS's signature returns.
char generic_core[] = "Prescott";

char* Core() {
  char* requested = std::getenv("OPENBLAS_CORETYPE");
  return requested != nullptr ? requested : generic_core;
}

}  // namespace

extern "C" {

char* openblas_get_corename() { return Core(); }

using Sgemm = void (*)(const char*, const char*, const int*, const int*,
                       const int*, const float*, const float*, const int*,
                       const float*, const int*, const float*, float*,
                       const int*);

void sgemm_(const char* transa, const char* transb, const int* m, const int* n,
            const int* k, const float* alpha, const float* a, const int* lda,
            const float* b, const int* ldb, const float* beta, float* c,
            const int* ldc) {
  static const auto real = reinterpret_cast<Sgemm>(dlsym(RTLD_NEXT, "sgemm_"));
  real(transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const bool broken = std::getenv("FAKE_OPENBLAS_WRONG_PRODUCTS") != nullptr &&
                      std::strcmp(Core(), generic_core) != 0;
  if (broken && *m > 0 && *n > 0) c[0] += 1.0f;
}

}  // extern "C"
