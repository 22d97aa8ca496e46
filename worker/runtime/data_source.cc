#include "worker/runtime/data_source.h"

#include <ATen/ops/empty.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/directory.h"
#include "common/file_reader.h"
#include "common/status_macros.h"
#include "worker/model/deterministic_random.h"

namespace chimera::worker {
namespace {

// Bytes per token id in the file.
int64_t TokenWidth(DataFormat format) {
  return format == DataFormat::kTokens ? 2 : 1;
}

// The file as messages name it.
absl::string_view ShownPath(const DataSourceOptions& options) {
  return options.name.empty() ? options.path : options.name;
}

// The coordinator checks no data file, so the worker that opens one holds
// it to what job validation would: a binary file given as text would
// otherwise train, its bytes read as characters.
absl::Status CheckText(int fd, int64_t size, const DataSourceOptions& options) {
  std::string head(
      static_cast<size_t>(std::min<uint64_t>(size, kTextDataSniffBytes)), '\0');
  const ssize_t read = ::pread(fd, head.data(), head.size(), 0);
  if (read != static_cast<ssize_t>(head.size())) {
    return absl::DataLossError(
        absl::StrCat("reading the first ", head.size(), " bytes of data file '",
                     ShownPath(options), "' returned ", read));
  }
  return CheckTextDataHead(ShownPath(options), head);
}

// The tokens the opened file `fd` holds, once it is known to be the file
// `options` asks for.
absl::StatusOr<int64_t> CountTokens(int fd, const DataSourceOptions& options) {
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data file '", ShownPath(options),
                     "' is not a regular file (a FIFO, device or directory)"));
  }
  if (static_cast<uint64_t>(info.st_size) > kMaxDataFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data file '", ShownPath(options), "' is ", info.st_size,
        " bytes, more than the ", kMaxDataFileBytes, "-byte limit"));
  }
  const int64_t width = TokenWidth(options.format);
  if (info.st_size % width != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("token file '", ShownPath(options), "' has ", info.st_size,
                     " bytes; uint16 tokens need an even size"));
  }
  if (options.format == DataFormat::kText) {
    RETURN_IF_ERROR(CheckText(fd, info.st_size, options));
  }
  const int64_t num_tokens = info.st_size / width;
  if (num_tokens < options.sample_length) {
    return absl::FailedPreconditionError(
        absl::StrCat("data file '", ShownPath(options), "' holds ", num_tokens,
                     " tokens; one sample needs ", options.sample_length));
  }
  return num_tokens;
}

// The data file, opened beneath options.root when there is one.
// Non-blocking: opening a FIFO for reading would otherwise wait for a writer
// forever; CountTokens refuses anything but a regular file.
absl::StatusOr<UniqueFd> OpenDataFile(const DataSourceOptions& options) {
  constexpr int kFlags = O_RDONLY | O_NONBLOCK;
  if (options.root.empty()) {
    UniqueFd fd(::open(options.path.c_str(), kFlags | O_CLOEXEC));
    if (!fd.valid()) {
      return absl::NotFoundError(absl::StrCat("cannot open data file '",
                                              ShownPath(options),
                                              "': ", std::strerror(errno)));
    }
    return fd;
  }
  ASSIGN_OR_RETURN(const Directory root, Directory::OpenRoot(options.root));
  absl::StatusOr<UniqueFd> fd = root.OpenFile(options.path, kFlags);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("data file ", fd.status().message()));
  }
  return fd;
}

}  // namespace

absl::StatusOr<DataFormat> ParseDataFormat(absl::string_view name) {
  if (name == "text") return DataFormat::kText;
  if (name == "tokens") return DataFormat::kTokens;
  if (name == "synthetic") return DataFormat::kSynthetic;
  return absl::InvalidArgumentError(absl::StrCat(
      "data format '", name, "' is not one of text, tokens, synthetic"));
}

SampleRange MicroBatchSamples(int dp_rank, int micro_batch, int micro_batches,
                              int micro_batch_size) {
  return {(int64_t{dp_rank} * micro_batches + micro_batch) * micro_batch_size,
          micro_batch_size};
}

absl::StatusOr<std::unique_ptr<DataSource>> DataSource::Open(
    const DataSourceOptions& options) {
  if (options.sample_length < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample length is ", options.sample_length, "; it must be >= 1"));
  }
  if (options.vocab_size < 1 || options.vocab_size > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary size is ", options.vocab_size,
                     "; it must be in [1, 65536]"));
  }
  if (options.format == DataFormat::kText && options.vocab_size < 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary size is ", options.vocab_size,
                     "; text data holds byte ids up to 255, so it must be "
                     ">= 256"));
  }
  if (options.format == DataFormat::kSynthetic) {
    return std::unique_ptr<DataSource>(new DataSource(options, -1, 0));
  }
  ASSIGN_OR_RETURN(UniqueFd fd, OpenDataFile(options));
  ASSIGN_OR_RETURN(const int64_t num_tokens, CountTokens(fd.get(), options));
  return std::unique_ptr<DataSource>(
      new DataSource(options, fd.Release(), num_tokens));
}

DataSource::DataSource(const DataSourceOptions& options, int fd,
                       int64_t num_tokens)
    : options_(options), fd_(fd), num_tokens_(num_tokens) {}

DataSource::~DataSource() {
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<at::Tensor> DataSource::Samples(int64_t step, int64_t first,
                                               int64_t count) const {
  if (step < 0 || first < 0 || count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples of step ", step, " from ", first, " count ",
                     count, ": step and first must be >= 0, count >= 1"));
  }
  at::Tensor tokens =
      at::empty({count, options_.sample_length}, at::TensorOptions(at::kLong));
  int64_t* data = tokens.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) {
    RETURN_IF_ERROR(
        ReadSample(step, first + i, data + i * options_.sample_length));
  }
  return tokens;
}

absl::Status DataSource::ReadSample(int64_t step, int64_t index,
                                    int64_t* out) const {
  const uint64_t key =
      KeyOf(KeyOf(KeyOf(options_.seed, "data"), static_cast<uint64_t>(step)),
            static_cast<uint64_t>(index));
  const int64_t length = options_.sample_length;
  if (options_.format == DataFormat::kSynthetic) {
    for (int64_t j = 0; j < length; ++j) {
      out[j] = static_cast<int64_t>(DeterministicUniform(key, j) *
                                    static_cast<double>(options_.vocab_size));
    }
    return absl::OkStatus();
  }
  const int64_t starts = num_tokens_ - length + 1;
  const int64_t start = static_cast<int64_t>(DeterministicUniform(key, 0) *
                                             static_cast<double>(starts));
  const int64_t width = TokenWidth(options_.format);
  std::vector<unsigned char> bytes(length * width);
  const ssize_t read = ::pread(fd_, bytes.data(), bytes.size(), start * width);
  if (read != static_cast<ssize_t>(bytes.size())) {
    return absl::DataLossError(absl::StrCat(
        "reading ", bytes.size(), " bytes at offset ", start * width,
        " of data file '", ShownPath(options_), "' returned ", read));
  }
  for (int64_t j = 0; j < length; ++j) {
    out[j] = width == 1 ? bytes[j] : bytes[2 * j] | (bytes[2 * j + 1] << 8);
    // The message names the position, never the value: a job's messages
    // reach its submitter, who may not read the file.
    if (out[j] >= options_.vocab_size) {
      return absl::DataLossError(absl::StrCat(
          "token ", start + j, " of data file '", ShownPath(options_),
          "' is outside the vocabulary [0, ", options_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
