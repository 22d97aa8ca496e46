// "Did you mean ...?": the candidate a misspelled word most likely meant, for
// error messages about unknown fields, commands and flags.
//
//   ClosestSpelling("numLayer", {"numLayers", "hiddenSize"})  // "numLayers"
#ifndef CHIMERA_COMMON_SPELLING_H_
#define CHIMERA_COMMON_SPELLING_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace chimera {

// The candidate closest to `word` by edit distance (insertions, deletions,
// substitutions; letter case ignored), when it is within a third of the
// word's length (at least 1) and no other candidate is as close; nullopt
// otherwise.
std::optional<std::string> ClosestSpelling(
    absl::string_view word, const std::vector<std::string>& candidates);

}  // namespace chimera

#endif  // CHIMERA_COMMON_SPELLING_H_
