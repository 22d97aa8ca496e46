#include "common/spelling.h"

#include <algorithm>

#include "absl/strings/ascii.h"

namespace chimera {
namespace {

// Levenshtein distance, one row at a time.
size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

}  // namespace

std::optional<std::string> ClosestSpelling(
    absl::string_view word, const std::vector<std::string>& candidates) {
  const std::string lower_word = absl::AsciiStrToLower(word);
  const size_t limit = std::max<size_t>(1, word.size() / 3);
  std::optional<std::string> best;
  size_t best_distance = limit + 1;
  bool tied = false;
  for (const std::string& candidate : candidates) {
    const size_t distance =
        EditDistance(lower_word, absl::AsciiStrToLower(candidate));
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
      tied = false;
    } else if (distance == best_distance) {
      tied = true;
    }
  }
  if (tied) return std::nullopt;
  return best;
}

}  // namespace chimera
