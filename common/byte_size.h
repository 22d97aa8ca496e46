// Byte counts as people read them: "512 B", "1.5 KiB", "23.4 GiB" (binary
// units, one decimal past bytes).
#ifndef CHIMERA_COMMON_BYTE_SIZE_H_
#define CHIMERA_COMMON_BYTE_SIZE_H_

#include <cstdint>
#include <string>

namespace chimera {

std::string FormatBytes(int64_t bytes);

}  // namespace chimera

#endif  // CHIMERA_COMMON_BYTE_SIZE_H_
