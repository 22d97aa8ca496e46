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
  // Whole bytes; one decimal for the larger units.
  const int decimals = unit == 0 ? 0 : 1;
  return absl::StrFormat("%.*f %s", decimals, value, units[unit]);
}

}  // namespace chimera
