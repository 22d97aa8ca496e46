#include "common/utf8.h"

namespace chimera {

absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // A continuation byte (10xxxxxx) at the cut belongs to a character that
  // began before it: cut before that character's lead byte instead.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) {
    --end;
  }
  return text.substr(0, end);
}

}  // namespace chimera
