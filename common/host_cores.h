// The cores this process may count on: what the standard library reports,
// at least 1 (it reports 0 where it cannot tell).
#ifndef CHIMERA_COMMON_HOST_CORES_H_
#define CHIMERA_COMMON_HOST_CORES_H_

#include <algorithm>
#include <thread>

namespace chimera {

inline int HostCores() {
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

}  // namespace chimera

#endif  // CHIMERA_COMMON_HOST_CORES_H_
