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
#include "common/megatron_index.h"
#include "common/status_macros.h"
#include "worker/model/deterministic_random.h"

namespace chimera::worker {
namespace {

// A data file opened and checked: where its ids are and how they are stored.
struct OpenedData {
  UniqueFd fd;
  int64_t num_tokens = 0;
  int token_bytes = 1;
  bool signed_tokens = false;
};

// The file as messages name it.
absl::string_view ShownPath(const DataSourceOptions& options) {
  return options.name.empty() ? options.path : options.name;
}

// The file that holds the ids, as messages name it.
std::string ShownDataFile(const DataSourceOptions& options) {
  return options.format == DataFormat::kMegatron
             ? MegatronDataPath(ShownPath(options))
             : std::string(ShownPath(options));
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

// The size of the opened file `fd`, which messages call `shown`; only a
// regular file has one worth reading.
absl::StatusOr<uint64_t> RegularSize(int fd, absl::string_view shown) {
  struct stat info;
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("data file '", shown,
                     "' is not a regular file (a FIFO, device or directory)"));
  }
  return static_cast<uint64_t>(info.st_size);
}

absl::Status CheckHoldsASample(int64_t num_tokens, absl::string_view shown,
                               const DataSourceOptions& options) {
  if (num_tokens < options.sample_length) {
    return absl::FailedPreconditionError(
        absl::StrCat("data file '", shown, "' holds ", num_tokens,
                     " tokens; one sample needs ", options.sample_length));
  }
  return absl::OkStatus();
}

// Opens `path` (beneath options.root when there is one), which messages
// call `shown`. Non-blocking: opening a FIFO for reading would otherwise
// wait for a writer forever; RegularSize refuses anything but a regular
// file.
absl::StatusOr<UniqueFd> OpenDataFile(const DataSourceOptions& options,
                                      const std::string& path,
                                      absl::string_view shown) {
  constexpr int kFlags = O_RDONLY | O_NONBLOCK;
  if (options.root.empty()) {
    UniqueFd fd(::open(path.c_str(), kFlags | O_CLOEXEC));
    if (!fd.valid()) {
      return absl::NotFoundError(absl::StrCat("cannot open data file '", shown,
                                              "': ", std::strerror(errno)));
    }
    return fd;
  }
  ASSIGN_OR_RETURN(const Directory root, Directory::OpenRoot(options.root));
  absl::StatusOr<UniqueFd> fd = root.OpenFile(path, kFlags);
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("data file ", fd.status().message()));
  }
  return fd;
}

// A text file (one byte per id) or a token file (token_bytes per id).
absl::StatusOr<OpenedData> OpenFlatFile(const DataSourceOptions& options) {
  const absl::string_view shown = ShownPath(options);
  OpenedData data{.token_bytes = options.format == DataFormat::kTokens
                                     ? options.token_bytes
                                     : 1};
  ASSIGN_OR_RETURN(data.fd, OpenDataFile(options, options.path, shown));
  ASSIGN_OR_RETURN(const uint64_t size, RegularSize(data.fd.get(), shown));
  if (size > kMaxDataFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data file '", shown, "' is ", size, " bytes, more than the ",
        kMaxDataFileBytes, "-byte limit"));
  }
  if (size % data.token_bytes != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token file '", shown, "' has ", size, " bytes, not a whole number of ",
        data.token_bytes, "-byte ids"));
  }
  if (options.format == DataFormat::kText) {
    RETURN_IF_ERROR(CheckText(data.fd.get(), size, options));
  }
  data.num_tokens = static_cast<int64_t>(size) / data.token_bytes;
  RETURN_IF_ERROR(CheckHoldsASample(data.num_tokens, shown, options));
  return data;
}

// A Megatron dataset: its .idx read and checked, its .bin kept open.
absl::StatusOr<OpenedData> OpenMegatronDataset(
    const DataSourceOptions& options) {
  ASSIGN_OR_RETURN(const UniqueFd index_fd,
                   OpenDataFile(options, MegatronIndexPath(options.path),
                                MegatronIndexPath(ShownPath(options))));
  const std::string data_shown = ShownDataFile(options);
  OpenedData data;
  ASSIGN_OR_RETURN(
      data.fd,
      OpenDataFile(options, MegatronDataPath(options.path), data_shown));
  ASSIGN_OR_RETURN(const uint64_t size, RegularSize(data.fd.get(), data_shown));
  ASSIGN_OR_RETURN(
      const MegatronIndex index,
      InspectMegatronDataset(index_fd.get(), size, ShownPath(options)));
  data.num_tokens = static_cast<int64_t>(index.tokens);
  data.token_bytes = index.token_bytes;
  data.signed_tokens = index.signed_tokens;
  RETURN_IF_ERROR(CheckHoldsASample(data.num_tokens, data_shown, options));
  return data;
}

// The id stored little-endian in `bytes`.
int64_t DecodeToken(const unsigned char* bytes, int width, bool is_signed) {
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i) value = value << 8 | bytes[i];
  if (!is_signed || width == 8) return static_cast<int64_t>(value);
  const int unused = 64 - 8 * width;
  return static_cast<int64_t>(value << unused) >> unused;
}

}  // namespace

absl::StatusOr<DataFormat> ParseDataFormat(absl::string_view name) {
  if (name == "text") return DataFormat::kText;
  if (name == "tokens") return DataFormat::kTokens;
  if (name == "megatron") return DataFormat::kMegatron;
  if (name == "synthetic") return DataFormat::kSynthetic;
  return absl::InvalidArgumentError(
      absl::StrCat("data format '", name,
                   "' is not one of text, tokens, megatron, synthetic"));
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
  if (options.vocab_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary size is ", options.vocab_size, "; it must be >= 1"));
  }
  if (options.format == DataFormat::kTokens && options.token_bytes != 2 &&
      options.token_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("token ids of ", options.token_bytes,
                     " bytes; a tokens file holds 2 or 4"));
  }
  if (options.format == DataFormat::kText && options.vocab_size < 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("vocabulary size is ", options.vocab_size,
                     "; text data holds byte ids up to 255, so it must be "
                     ">= 256"));
  }
  if (options.format == DataFormat::kSynthetic) {
    return std::unique_ptr<DataSource>(
        new DataSource(options, -1, 0, 1, false));
  }
  ASSIGN_OR_RETURN(OpenedData data, options.format == DataFormat::kMegatron
                                        ? OpenMegatronDataset(options)
                                        : OpenFlatFile(options));
  return std::unique_ptr<DataSource>(
      new DataSource(options, data.fd.Release(), data.num_tokens,
                     data.token_bytes, data.signed_tokens));
}

DataSource::DataSource(const DataSourceOptions& options, int fd,
                       int64_t num_tokens, int token_bytes, bool signed_tokens)
    : options_(options),
      fd_(fd),
      num_tokens_(num_tokens),
      token_bytes_(token_bytes),
      signed_tokens_(signed_tokens) {}

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
  std::vector<unsigned char> bytes(length * token_bytes_);
  const ssize_t read =
      ::pread(fd_, bytes.data(), bytes.size(), start * token_bytes_);
  if (read != static_cast<ssize_t>(bytes.size())) {
    return absl::DataLossError(absl::StrCat(
        "reading ", bytes.size(), " bytes at offset ", start * token_bytes_,
        " of data file '", ShownDataFile(options_), "' returned ", read));
  }
  for (int64_t j = 0; j < length; ++j) {
    out[j] =
        DecodeToken(&bytes[j * token_bytes_], token_bytes_, signed_tokens_);
    // The message names the position, never the value: a job's messages
    // reach its submitter, who may not read the file.
    if (out[j] < 0 || out[j] >= options_.vocab_size) {
      return absl::DataLossError(absl::StrCat(
          "token ", start + j, " of data file '", ShownDataFile(options_),
          "' is outside the vocabulary [0, ", options_.vocab_size, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace chimera::worker
