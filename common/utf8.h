// Cutting text that must stay valid UTF-8 (a protobuf string field, a job's
// status message) to a byte budget.
//
//   status.set_message(Utf8Prefix(report.message(), kMaxTaskMessageBytes));
#ifndef CHIMERA_COMMON_UTF8_H_
#define CHIMERA_COMMON_UTF8_H_

#include <cstddef>

#include "absl/strings/string_view.h"

namespace chimera {

// The longest prefix of `text` of at most `max_bytes` bytes that does not
// end inside a multi-byte UTF-8 character: `text` itself when it fits.
absl::string_view Utf8Prefix(absl::string_view text, size_t max_bytes);

}  // namespace chimera

#endif  // CHIMERA_COMMON_UTF8_H_
