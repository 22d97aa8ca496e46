#include "worker/weights/safetensors_file.h"

#include <ATen/ATen.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/safetensors.h"
#include "common/status_macros.h"
#include "common/unique_fd.h"

// The format is little-endian, and a tensor's bytes are copied as they lie
// in memory.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors files are read and written on little-endian hosts");

namespace chimera::worker {
namespace {

constexpr std::pair<const char*, c10::ScalarType> kDtypes[] = {
    {"F64", at::kDouble},    {"F32", at::kFloat}, {"F16", at::kHalf},
    {"BF16", at::kBFloat16}, {"I64", at::kLong},  {"I32", at::kInt},
    {"I16", at::kShort},     {"I8", at::kChar},   {"U8", at::kByte},
    {"BOOL", at::kBool}};

std::optional<std::string> DtypeName(c10::ScalarType type) {
  for (const auto& [name, scalar_type] : kDtypes) {
    if (scalar_type == type) return name;
  }
  return std::nullopt;
}

std::optional<c10::ScalarType> ScalarTypeOf(const std::string& dtype) {
  for (const auto& [name, scalar_type] : kDtypes) {
    if (dtype == name) return scalar_type;
  }
  return std::nullopt;
}

absl::Status WriteAll(int fd, const char* bytes, size_t size,
                      const std::string& path) {
  while (size > 0) {
    const ssize_t written = ::write(fd, bytes, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) {
      return absl::InternalError(
          absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    }
    bytes += written;
    size -= static_cast<size_t>(written);
  }
  return absl::OkStatus();
}

absl::Status ReadAllAt(int fd, char* bytes, size_t size, uint64_t offset,
                       const std::string& path) {
  while (size > 0) {
    const ssize_t read = ::pread(fd, bytes, size, static_cast<off_t>(offset));
    if (read < 0 && errno == EINTR) continue;
    if (read <= 0) {
      return absl::InternalError(
          absl::StrCat("cannot read ", path, ": ",
                       read == 0 ? "it ended early" : std::strerror(errno)));
    }
    bytes += read;
    size -= static_cast<size_t>(read);
    offset += static_cast<uint64_t>(read);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SafetensorsTensor>> Describe(
    const NamedTensors& tensors) {
  std::vector<SafetensorsTensor> described;
  for (const auto& [name, tensor] : tensors) {
    const std::optional<std::string> dtype = DtypeName(tensor.scalar_type());
    if (!dtype) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor '", name, "' is of type ",
                       c10::toString(tensor.scalar_type()),
                       ", which safetensors has no name for"));
    }
    described.push_back(
        {.name = name, .dtype = *dtype, .shape = tensor.sizes().vec()});
  }
  return described;
}

absl::Status WriteTo(int fd, const std::string& header,
                     const NamedTensors& tensors, const std::string& path) {
  RETURN_IF_ERROR(WriteAll(fd, header.data(), header.size(), path));
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor host = tensor.detach().to(at::kCPU).contiguous();
    RETURN_IF_ERROR(WriteAll(fd, static_cast<const char*>(host.data_ptr()),
                             host.nbytes(), path));
  }
  if (::fsync(fd) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot sync ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteSafetensorsFile(
    const std::string& path, const NamedTensors& tensors,
    const std::map<std::string, std::string>& metadata) {
  ASSIGN_OR_RETURN(const std::vector<SafetensorsTensor> described,
                   Describe(tensors));
  ASSIGN_OR_RETURN(const std::string header,
                   SerializeSafetensorsHeader(described, metadata));
  const std::string partial = path + ".partial";
  UniqueFd fd(
      ::open(partial.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) {
    return absl::InternalError(
        absl::StrCat("cannot create ", partial, ": ", std::strerror(errno)));
  }
  absl::Status written = WriteTo(fd.get(), header, tensors, partial);
  if (written.ok() && ::rename(partial.c_str(), path.c_str()) != 0) {
    written = absl::InternalError(absl::StrCat(
        "cannot rename ", partial, " to ", path, ": ", std::strerror(errno)));
  }
  if (!written.ok()) ::unlink(partial.c_str());
  return written;
}

absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensorsFile(
    const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    return absl::NotFoundError(
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return ReadSafetensorsFile(fd.get(), path);
}

absl::StatusOr<std::map<std::string, at::Tensor>> ReadSafetensorsFile(
    int fd, const std::string& name) {
  absl::StatusOr<SafetensorsHeader> header = ReadSafetensorsHeader(fd, name);
  if (!header.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": ", header.status().message()));
  }
  std::map<std::string, at::Tensor> tensors;
  for (const SafetensorsTensor& described : header->tensors) {
    const std::optional<c10::ScalarType> type = ScalarTypeOf(described.dtype);
    if (!type) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, ": tensor '", described.name, "' is of dtype ",
                       described.dtype, ", which LibTorch has no type for"));
    }
    at::Tensor tensor = at::empty(described.shape, at::TensorOptions(*type));
    RETURN_IF_ERROR(ReadAllAt(fd, static_cast<char*>(tensor.data_ptr()),
                              described.end - described.begin,
                              header->data_start + described.begin, name));
    tensors.emplace(described.name, std::move(tensor));
  }
  return tensors;
}

}  // namespace chimera::worker
