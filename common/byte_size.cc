#include "common/byte_size.h"

#include "absl/strings/str_format.h"

namespace chimera {

std::string FormatBytes(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return absl::StrFormat(unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
}

}  // namespace chimera
