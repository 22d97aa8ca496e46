#include "worker/runtime/host_memory.h"

#include <limits>

#if __has_include(<malloc.h>)
#include <malloc.h>
#endif

namespace chimera::worker {

void RetainFreedHostMemory() {
#if defined(M_MMAP_MAX) && defined(M_TRIM_THRESHOLD)  // glibc's mallopt
  // No block gets its own mapping: a freed one goes back to the heap.
  mallopt(M_MMAP_MAX, 0);
  // Freed memory at the heap's top is never returned with a shrinking sbrk.
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
#endif
}

}  // namespace chimera::worker
