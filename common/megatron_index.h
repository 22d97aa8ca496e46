// Megatron-LM's indexed dataset (the `MMapIndexedDataset` that its
// preprocessing script writes): token ids in PREFIX.bin, and in PREFIX.idx
// an index of where each sequence lies. The index's layout, all integers
// little-endian:
//
//   9 bytes   magic "MMIDIDX\0\0"
//   uint64    version, 1
//   uint8     dtype code of the ids in .bin: 1 uint8, 2 int8, 3 int16,
//             4 int32, 5 int64, 6 float64, 7 float32, 8 uint16
//   uint64    S, the number of sequences
//   uint64    D, the number of document boundaries
//   int32[S]  tokens per sequence
//   int64[S]  byte offset of each sequence in .bin
//   int64[D]  document boundaries: sequence indices from 0 to S,
//             non-decreasing (document d is sequences [b[d], b[d+1]))
//
// A job trains on the concatenation of every sequence, sampled like any
// token file: so the index must describe sequences that follow one another
// in .bin with no gap, and .bin must hold exactly them. Anything else (a
// truncated or stale index, a multimodal one, float ids) is refused with
// the reason.
//
//   ASSIGN_OR_RETURN(MegatronIndex index,
//                    InspectMegatronDataset(idx_fd, bin_size, "corpus"));
#ifndef CHIMERA_COMMON_MEGATRON_INDEX_H_
#define CHIMERA_COMMON_MEGATRON_INDEX_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera {

// What a valid index says about its dataset.
struct MegatronIndex {
  // Bytes per token id in .bin: 1, 2, 4 or 8.
  int token_bytes = 2;
  // Whether the ids are signed (int8 … int64); a negative id is outside
  // every vocabulary.
  bool signed_tokens = false;
  // The ids' type as Megatron names it ("uint16", "int32").
  std::string dtype;
  uint64_t sequences = 0;
  // Documents: one fewer than the boundaries.
  uint64_t documents = 0;
  // Tokens in all sequences together.
  uint64_t tokens = 0;
};

// The index files are read whole, so they have a bound of their own (about
// 350 million sequences).
inline constexpr uint64_t kMaxMegatronIndexBytes = uint64_t{4} << 30;

// PREFIX.idx and PREFIX.bin: a job names the dataset by its prefix, as
// Megatron's --data-path does.
std::string MegatronIndexPath(absl::string_view prefix);
std::string MegatronDataPath(absl::string_view prefix);

// The index held in `bytes`; INVALID_ARGUMENT saying which part of it is
// wrong (the caller adds the file's name).
absl::StatusOr<MegatronIndex> ParseMegatronIndex(absl::string_view bytes);

// ParseMegatronIndex of the open regular file `fd`, mapped rather than read
// (an index may be large); INVALID_ARGUMENT also for a file over
// kMaxMegatronIndexBytes or one that is not regular.
absl::StatusOr<MegatronIndex> ReadMegatronIndex(int fd);

// OK when a .bin of `data_bytes` bytes holds exactly the sequences `index`
// describes; INVALID_ARGUMENT with both sizes otherwise.
absl::Status CheckMegatronData(const MegatronIndex& index, uint64_t data_bytes);

// The dataset whose open .idx is `index_fd` and whose .bin has `data_bytes`
// bytes: ReadMegatronIndex, then CheckMegatronData, the error naming the
// file at fault as "index file 'PREFIX.idx' ..." or "data file
// 'PREFIX.bin' ..." with `shown_prefix`, the dataset as messages call it.
absl::StatusOr<MegatronIndex> InspectMegatronDataset(
    int index_fd, uint64_t data_bytes, absl::string_view shown_prefix);

}  // namespace chimera

#endif  // CHIMERA_COMMON_MEGATRON_INDEX_H_
