#include "common/megatron_index.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace chimera {
namespace {

constexpr absl::string_view kMagic("MMIDIDX\0\0", 9);
constexpr uint64_t kVersion = 1;

struct TokenType {
  uint8_t code;
  const char* name;
  int bytes;
  bool is_signed;
  bool is_integer;
};

constexpr std::array<TokenType, 8> kTokenTypes = {{
    {1, "uint8", 1, false, true},
    {2, "int8", 1, true, true},
    {3, "int16", 2, true, true},
    {4, "int32", 4, true, true},
    {5, "int64", 8, true, true},
    {6, "float64", 8, true, false},
    {7, "float32", 4, true, false},
    {8, "uint16", 2, false, true},
}};

// Little-endian integers read in order from the index, each bounds-checked.
class IndexReader {
 public:
  explicit IndexReader(absl::string_view bytes) : bytes_(bytes) {}

  // The next `width` bytes as an unsigned little-endian integer, or an error
  // naming `what` when the index ends before them.
  absl::StatusOr<uint64_t> Next(int width, absl::string_view what) {
    if (bytes_.size() - position_ < static_cast<size_t>(width)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ends at byte ", bytes_.size(), ", inside ", what));
    }
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) {
      value = value << 8 | static_cast<unsigned char>(bytes_[position_ + i]);
    }
    position_ += width;
    return value;
  }

  absl::string_view Take(size_t count) {
    const absl::string_view taken = bytes_.substr(position_, count);
    position_ += taken.size();
    return taken;
  }

  size_t remaining() const { return bytes_.size() - position_; }

 private:
  absl::string_view bytes_;
  size_t position_ = 0;
};

absl::StatusOr<TokenType> TokenTypeOf(uint64_t code) {
  for (const TokenType& type : kTokenTypes) {
    if (type.code != code) continue;
    if (!type.is_integer) {
      return absl::InvalidArgumentError(
          absl::StrCat("has dtype code ", code, " (", type.name,
                       "); token ids must be integers"));
    }
    return type;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("has dtype code ", code, "; Megatron's codes are 1 to 8"));
}

// The magic, version, dtype and the two counts; the counts are checked
// against the bytes that follow, so that no array is read past the end.
absl::StatusOr<MegatronIndex> ReadHeader(IndexReader& reader) {
  if (reader.Take(kMagic.size()) != kMagic) {
    return absl::InvalidArgumentError(
        "does not start with Megatron's index magic \"MMIDIDX\\0\\0\": it is "
        "not the .idx of an indexed dataset");
  }
  ASSIGN_OR_RETURN(const uint64_t version, reader.Next(8, "the version"));
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrCat(
        "has version ", version, "; only version ", kVersion, " is read"));
  }
  ASSIGN_OR_RETURN(const uint64_t code, reader.Next(1, "the dtype code"));
  ASSIGN_OR_RETURN(const TokenType type, TokenTypeOf(code));
  MegatronIndex index{.token_bytes = type.bytes,
                      .signed_tokens = type.is_signed,
                      .dtype = type.name};
  ASSIGN_OR_RETURN(index.sequences, reader.Next(8, "the sequence count"));
  ASSIGN_OR_RETURN(const uint64_t boundaries,
                   reader.Next(8, "the document count"));
  // 4 + 8 bytes per sequence, 8 per boundary, compared without overflow.
  const uint64_t remaining = reader.remaining();
  if (index.sequences > remaining / 12 ||
      boundaries > (remaining - index.sequences * 12) / 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        "counts ", index.sequences, " sequences and ", boundaries,
        " document boundaries, more than its ", remaining,
        " bytes after the header hold (12 per sequence, 8 per boundary): it "
        "is truncated or corrupt"));
  }
  const uint64_t expected = index.sequences * 12 + boundaries * 8;
  if (remaining != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "has ", remaining - expected,
        " bytes after its document boundaries "
        "(a multimodal index, with a mode per sequence, is not read)"));
  }
  if (boundaries == 0) {
    return absl::InvalidArgumentError(
        "has no document boundaries; even an empty dataset has one, 0");
  }
  index.documents = boundaries - 1;
  return index;
}

// Sequences follow one another in .bin: sequence i starts where i - 1 ends.
absl::Status ReadSequences(IndexReader& reader, MegatronIndex& index) {
  IndexReader lengths(reader.Take(index.sequences * 4));
  uint64_t offset = 0;
  for (uint64_t i = 0; i < index.sequences; ++i) {
    ASSIGN_OR_RETURN(const uint64_t raw, lengths.Next(4, "sequence lengths"));
    const auto length = static_cast<int32_t>(static_cast<uint32_t>(raw));
    if (length < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gives sequence ", i, " a length of ", length));
    }
    ASSIGN_OR_RETURN(const uint64_t start, reader.Next(8, "sequence offsets"));
    if (start != offset) {
      return absl::InvalidArgumentError(absl::StrCat(
          "puts sequence ", i, " at byte ", static_cast<int64_t>(start),
          " of the data; the sequences before it end at byte ", offset,
          " (sequences must follow one another with no gap)"));
    }
    offset += static_cast<uint64_t>(length) * index.token_bytes;
    index.tokens += static_cast<uint64_t>(length);
  }
  return absl::OkStatus();
}

// Boundaries run from 0 to the sequence count, never backwards.
absl::Status ReadDocuments(IndexReader& reader, const MegatronIndex& index) {
  uint64_t previous = 0;
  for (uint64_t d = 0; d <= index.documents; ++d) {
    ASSIGN_OR_RETURN(const uint64_t boundary,
                     reader.Next(8, "document boundaries"));
    const bool first_is_zero = d > 0 || boundary == 0;
    const bool last_is_count =
        d < index.documents || boundary == index.sequences;
    if (!first_is_zero || !last_is_count || boundary < previous ||
        boundary > index.sequences) {
      return absl::InvalidArgumentError(absl::StrCat(
          "has document boundary ", d, " at sequence ",
          static_cast<int64_t>(boundary), "; boundaries run from 0 to the ",
          index.sequences, " sequences without going back"));
    }
    previous = boundary;
  }
  return absl::OkStatus();
}

}  // namespace

std::string MegatronIndexPath(absl::string_view prefix) {
  return absl::StrCat(prefix, ".idx");
}

std::string MegatronDataPath(absl::string_view prefix) {
  return absl::StrCat(prefix, ".bin");
}

absl::StatusOr<MegatronIndex> ParseMegatronIndex(absl::string_view bytes) {
  IndexReader reader(bytes);
  ASSIGN_OR_RETURN(MegatronIndex index, ReadHeader(reader));
  RETURN_IF_ERROR(ReadSequences(reader, index));
  RETURN_IF_ERROR(ReadDocuments(reader, index));
  return index;
}

absl::StatusOr<MegatronIndex> ReadMegatronIndex(int fd) {
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError("is not a regular file");
  }
  const auto size = static_cast<uint64_t>(info.st_size);
  if (size > kMaxMegatronIndexBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("is ", size, " bytes, more than the ",
                     kMaxMegatronIndexBytes, "-byte limit"));
  }
  if (size == 0) return ParseMegatronIndex({});
  void* mapped = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (mapped == MAP_FAILED) {
    return absl::InternalError(
        absl::StrCat("cannot be mapped: ", std::strerror(errno)));
  }
  absl::StatusOr<MegatronIndex> index = ParseMegatronIndex(
      absl::string_view(static_cast<const char*>(mapped), size));
  ::munmap(mapped, size);
  return index;
}

absl::Status CheckMegatronData(const MegatronIndex& index,
                               uint64_t data_bytes) {
  // Each sequence holds under 2^31 tokens and takes 12 index bytes, so no
  // index that fits in memory overflows this product.
  const uint64_t expected = index.tokens * index.token_bytes;
  if (data_bytes != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "is ", data_bytes, " bytes; its index describes ", index.tokens, " ",
        index.dtype, " tokens, ", expected,
        " bytes (an index of another dataset, or a copy cut short)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<MegatronIndex> InspectMegatronDataset(
    int index_fd, uint64_t data_bytes, absl::string_view shown_prefix) {
  absl::StatusOr<MegatronIndex> index = ReadMegatronIndex(index_fd);
  if (!index.ok()) {
    return absl::Status(
        index.status().code(),
        absl::StrCat("index file '", MegatronIndexPath(shown_prefix), "' ",
                     index.status().message()));
  }
  if (const absl::Status matches = CheckMegatronData(*index, data_bytes);
      !matches.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data file '", MegatronDataPath(shown_prefix), "' ",
                     matches.message()));
  }
  return index;
}

}  // namespace chimera
