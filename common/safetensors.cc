#include "common/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_reader.h"
#include "nlohmann/json.hpp"

namespace chimera {
namespace {

using Json = nlohmann::json;

constexpr char kMetadataKey[] = "__metadata__";
constexpr uint64_t kLengthBytes = 8;
constexpr uint64_t kDataAlignment = 8;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("not a safetensors file: ", what));
}

uint64_t ReadLittleEndian64(absl::string_view bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[i]);
  }
  return value;
}

std::string LittleEndian64(uint64_t value) {
  std::string bytes(kLengthBytes, '\0');
  for (uint64_t i = 0; i < kLengthBytes; ++i) {
    bytes[i] = static_cast<char>(value >> (8 * i));
  }
  return bytes;
}

// The header as JSON, or why not: it must be one object whose keys are each
// given once (a JSON parser would otherwise keep one of two tensors).
absl::StatusOr<Json> ParseJsonObject(absl::string_view text) {
  std::optional<std::string> duplicate;
  std::set<std::string> top_level_keys;
  const Json::parser_callback_t note_duplicates =
      [&](int depth, Json::parse_event_t event, Json& parsed) {
        if (event == Json::parse_event_t::key && depth == 1 &&
            !top_level_keys.insert(parsed.get<std::string>()).second) {
          duplicate = parsed.get<std::string>();
        }
        return true;
      };
  Json header = Json::parse(text.begin(), text.end(), note_duplicates,
                            /*allow_exceptions=*/false);
  if (header.is_discarded()) return Invalid("its header is not JSON");
  if (!header.is_object()) return Invalid("its header is not a JSON object");
  if (duplicate) {
    return Invalid(absl::StrCat("its header names '", *duplicate, "' twice"));
  }
  return header;
}

absl::StatusOr<std::map<std::string, std::string>> ParseMetadata(
    const Json& metadata) {
  if (!metadata.is_object()) {
    return Invalid(absl::StrCat(kMetadataKey, " is not an object"));
  }
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : metadata.items()) {
    if (!value.is_string()) {
      return Invalid(
          absl::StrCat(kMetadataKey, "['", key, "'] is not a string"));
    }
    values[key] = value.get<std::string>();
  }
  return values;
}

// A JSON array of `count` unsigned integers (any count when 0) that fit
// in int64_t.
std::optional<std::vector<uint64_t>> UnsignedArray(const Json& json,
                                                   size_t count) {
  if (!json.is_array() || (count > 0 && json.size() != count)) {
    return std::nullopt;
  }
  std::vector<uint64_t> values;
  for (const Json& item : json) {
    if (!item.is_number_unsigned() ||
        item.get<uint64_t>() >
            static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return std::nullopt;
    }
    values.push_back(item.get<uint64_t>());
  }
  return values;
}

// Elements × bytes per element, or nullopt past 2^63.
std::optional<uint64_t> ByteCount(const std::vector<int64_t>& shape,
                                  int element_bytes) {
  uint64_t bytes = static_cast<uint64_t>(element_bytes);
  constexpr uint64_t kLimit = std::numeric_limits<int64_t>::max();
  for (const int64_t dimension : shape) {
    const uint64_t d = static_cast<uint64_t>(dimension);
    if (d != 0 && bytes > kLimit / d) return std::nullopt;
    bytes *= d;
  }
  return bytes;
}

absl::StatusOr<SafetensorsTensor> ParseTensor(const std::string& name,
                                              const Json& entry) {
  const auto fault = [&](absl::string_view what) {
    return Invalid(absl::StrCat("tensor '", name, "' ", what));
  };
  if (!entry.is_object()) return fault("is not an object");
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return fault(absl::StrCat("has an unknown field '", key, "'"));
    }
  }
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) {
    return fault("has no dtype");
  }
  SafetensorsTensor tensor;
  tensor.name = name;
  tensor.dtype = entry["dtype"].get<std::string>();
  const std::optional<int> element_bytes = SafetensorsDtypeBytes(tensor.dtype);
  if (!element_bytes) {
    return fault(absl::StrCat("has an unknown dtype '", tensor.dtype, "'"));
  }
  const std::optional<std::vector<uint64_t>> shape =
      entry.contains("shape") ? UnsignedArray(entry["shape"], 0) : std::nullopt;
  if (!shape) return fault("has no shape of non-negative integers");
  tensor.shape.assign(shape->begin(), shape->end());
  const std::optional<std::vector<uint64_t>> offsets =
      entry.contains("data_offsets") ? UnsignedArray(entry["data_offsets"], 2)
                                     : std::nullopt;
  if (!offsets || (*offsets)[0] > (*offsets)[1]) {
    return fault("has no data_offsets [begin, end] with begin <= end");
  }
  tensor.begin = (*offsets)[0];
  tensor.end = (*offsets)[1];
  const std::optional<uint64_t> bytes = ByteCount(tensor.shape, *element_bytes);
  if (!bytes || *bytes != tensor.end - tensor.begin) {
    return fault(absl::StrCat("holds ", tensor.end - tensor.begin,
                              " bytes, not the ",
                              bytes ? absl::StrCat(*bytes) : "over 2^63",
                              " its dtype and shape make"));
  }
  return tensor;
}

// The tensors' data must follow one another from 0 to `data_bytes`.
absl::Status CheckTiling(std::vector<SafetensorsTensor>& tensors,
                         uint64_t data_bytes) {
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
                     return std::make_pair(a.begin, a.end) <
                            std::make_pair(b.begin, b.end);
                   });
  uint64_t expected = 0;
  for (const SafetensorsTensor& tensor : tensors) {
    if (tensor.begin != expected) {
      return Invalid(absl::StrCat("tensor '", tensor.name, "' starts at byte ",
                                  tensor.begin, " of the data, where ",
                                  expected,
                                  " was expected (a gap or an "
                                  "overlap)"));
    }
    expected = tensor.end;
  }
  if (expected != data_bytes) {
    return Invalid(absl::StrCat("its tensors hold ", expected,
                                " bytes of data, but the file has ", data_bytes,
                                " after its header"));
  }
  return absl::OkStatus();
}

// `size` bytes of `fd` from `offset` (fewer where the file ends first).
absl::StatusOr<std::string> ReadAt(int fd, const std::string& name,
                                   uint64_t offset, uint64_t size) {
  std::string bytes(size, '\0');
  uint64_t done = 0;
  while (done < size) {
    const ssize_t read = ::pread(fd, bytes.data() + done, size - done,
                                 static_cast<off_t>(offset + done));
    if (read < 0 && errno == EINTR) continue;
    if (read < 0) {
      return absl::DataLossError(
          absl::StrCat("reading '", name, "' failed: ", std::strerror(errno)));
    }
    if (read == 0) break;
    done += static_cast<uint64_t>(read);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

std::optional<int> SafetensorsDtypeBytes(absl::string_view dtype) {
  static const auto* const kBytes = new std::map<std::string, int, std::less<>>{
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E4M3", 1}, {"F8_E5M2", 1},
      {"U16", 2},  {"I16", 2}, {"F16", 2}, {"BF16", 2},    {"U32", 4},
      {"I32", 4},  {"F32", 4}, {"U64", 8}, {"I64", 8},     {"F64", 8}};
  const auto found = kBytes->find(dtype);
  if (found == kBytes->end()) return std::nullopt;
  return found->second;
}

absl::StatusOr<SafetensorsHeader> ParseSafetensorsHeader(
    absl::string_view prefix, uint64_t file_size) {
  if (file_size < kLengthBytes) {
    return Invalid(absl::StrCat("it is ", file_size,
                                " bytes, fewer than the 8 of a header length"));
  }
  if (prefix.size() < kLengthBytes) {
    return absl::OutOfRangeError("give at least the file's first 8 bytes");
  }
  const uint64_t length = ReadLittleEndian64(prefix);
  if (length > kMaxSafetensorsHeaderBytes) {
    return Invalid(absl::StrCat("its header length is ", length,
                                " bytes, more than the limit of ",
                                kMaxSafetensorsHeaderBytes));
  }
  if (length > file_size - kLengthBytes) {
    return Invalid(absl::StrCat("its header length is ", length,
                                " bytes, but the file has only ",
                                file_size - kLengthBytes, " after it"));
  }
  if (prefix.size() < kLengthBytes + length) {
    return absl::OutOfRangeError(
        absl::StrCat("give the file's first ", kLengthBytes + length,
                     " bytes: its header and their length"));
  }
  absl::StatusOr<Json> json =
      ParseJsonObject(prefix.substr(kLengthBytes, length));
  if (!json.ok()) return json.status();
  SafetensorsHeader header;
  header.data_start = kLengthBytes + length;
  for (const auto& [key, value] : json->items()) {
    if (key == kMetadataKey) {
      absl::StatusOr<std::map<std::string, std::string>> metadata =
          ParseMetadata(value);
      if (!metadata.ok()) return metadata.status();
      header.metadata = *std::move(metadata);
      continue;
    }
    absl::StatusOr<SafetensorsTensor> tensor = ParseTensor(key, value);
    if (!tensor.ok()) return tensor.status();
    header.tensors.push_back(*std::move(tensor));
  }
  if (absl::Status tiled =
          CheckTiling(header.tensors, file_size - header.data_start);
      !tiled.ok()) {
    return tiled;
  }
  return header;
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(
    const std::string& path) {
  if (const absl::Status regular = RegularFileSize(path).status();
      !regular.ok()) {
    return regular;
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("'", path, "' cannot be read: ", std::strerror(errno)));
  }
  absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(fd, path);
  ::close(fd);
  return header;
}

absl::StatusOr<SafetensorsHeader> ReadSafetensorsHeader(
    int fd, const std::string& name) {
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", name, "' is not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(info.st_size);
  absl::StatusOr<std::string> length =
      ReadAt(fd, name, 0, std::min(size, kLengthBytes));
  if (!length.ok()) return length.status();
  uint64_t header_end = size;
  if (length->size() == kLengthBytes) {
    header_end = std::min(header_end,
                          kLengthBytes + std::min(ReadLittleEndian64(*length),
                                                  kMaxSafetensorsHeaderBytes));
  }
  absl::StatusOr<std::string> prefix = ReadAt(fd, name, 0, header_end);
  if (!prefix.ok()) return prefix.status();
  return ParseSafetensorsHeader(*prefix, size);
}

absl::StatusOr<std::string> SerializeSafetensorsHeader(
    const std::vector<SafetensorsTensor>& tensors,
    const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  uint64_t offset = 0;
  for (const SafetensorsTensor& tensor : tensors) {
    const std::optional<int> element_bytes =
        SafetensorsDtypeBytes(tensor.dtype);
    if (!element_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", tensor.name, "': unknown dtype '", tensor.dtype, "'"));
    }
    if (tensor.name == kMetadataKey || header.contains(tensor.name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor name '", tensor.name, "' is reserved or given twice"));
    }
    if (std::any_of(tensor.shape.begin(), tensor.shape.end(),
                    [](int64_t d) { return d < 0; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", tensor.name, "' has a negative dimension"));
    }
    const std::optional<uint64_t> bytes =
        ByteCount(tensor.shape, *element_bytes);
    if (!bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", tensor.name, "' has over 2^63 bytes"));
    }
    header[tensor.name] = {{"dtype", tensor.dtype},
                           {"shape", tensor.shape},
                           {"data_offsets", {offset, offset + *bytes}}};
    offset += *bytes;
  }
  std::string text = header.dump();
  const uint64_t unaligned = (kLengthBytes + text.size()) % kDataAlignment;
  if (unaligned != 0) text.append(kDataAlignment - unaligned, ' ');
  return LittleEndian64(text.size()) + text;
}

}  // namespace chimera
