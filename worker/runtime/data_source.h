// Where training samples come from: a text file read as byte tokens, a binary
// file of little-endian token ids (2 or 4 bytes each), a Megatron-LM indexed
// dataset (common/megatron_index.h: its sequences concatenated), or
// synthetic random tokens.
//
// Sampling is a pure function of (seed, step, global sample index): sample i
// of step s starts at a position drawn from KeyOf(seed, s, i), so any worker
// can read any sample of any step by itself. The worker holding a first stage
// reads exactly the samples of its micro-batches for their inputs, the one
// holding a last stage reads the same samples for their targets, and no
// tokens travel between workers.
//
// A global mini-batch has W x N x B samples: data-parallel replica w,
// micro-batch m of that replica covers samples [(w·N + m)·B, +B)
// (MicroBatchSamples).
//
//   DataSourceOptions options{.format = DataFormat::kText,
//                             .path = "corpus.txt", .vocab_size = 256,
//                             .sample_length = seq + 1, .seed = 7};
//   ASSIGN_OR_RETURN(std::unique_ptr<DataSource> data,
//                    DataSource::Open(options));
//   ASSIGN_OR_RETURN(at::Tensor tokens, data->Samples(step, first, count));
#ifndef CHIMERA_WORKER_RUNTIME_DATA_SOURCE_H_
#define CHIMERA_WORKER_RUNTIME_DATA_SOURCE_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace chimera::worker {

enum class DataFormat {
  // UTF-8 text: every byte is one token id in [0, 256).
  kText,
  // Little-endian unsigned token ids of DataSourceOptions::token_bytes.
  kTokens,
  // A Megatron-LM indexed dataset: `path` is the prefix of its .bin and .idx.
  kMegatron,
  // Uniform random ids in [0, vocab_size); no file.
  kSynthetic,
};

// "text", "tokens", "megatron", "synthetic" (the job file's
// spec.data.format).
absl::StatusOr<DataFormat> ParseDataFormat(absl::string_view name);

struct DataSourceOptions {
  DataFormat format = DataFormat::kSynthetic;
  // The file for kText and kTokens, the dataset's prefix for kMegatron;
  // ignored for kSynthetic. With a `root`
  // (a task's: the worker's --data-root), `path` is relative to it and
  // opened beneath it (common/directory.h), so that no symbolic link leads
  // the read out of it, even one swapped in after the job's path was
  // checked; without, `path` is opened as it is (tests, benchmarks).
  std::string root;
  std::string path;
  // How messages name the file; `path` when empty. A task gives the job's
  // spec.data.path, relative to the worker's data root: its errors reach
  // whoever submitted the job, who has no need to learn where the worker
  // keeps its data.
  std::string name;
  // Bytes per id of a kTokens file: 2 (uint16) or 4 (uint32). A Megatron
  // dataset's index says its own.
  int token_bytes = 2;
  // Every id a sample holds must be below this (checked per sample read).
  int64_t vocab_size = 256;
  // Tokens per sample: seq_length + 1 for GPT (inputs and the shifted
  // targets), seq_length for BERT.
  int64_t sample_length = 1;
  uint64_t seed = 0;
};

// The samples [first, first + count) of a step's global mini-batch.
struct SampleRange {
  int64_t first = 0;
  int64_t count = 0;
};

// Micro-batch `micro_batch` (of `micro_batches` per replica) of data-parallel
// replica `dp_rank`, with `micro_batch_size` samples each.
SampleRange MicroBatchSamples(int dp_rank, int micro_batch, int micro_batches,
                              int micro_batch_size);

// Reads samples; the file stays open for the source's lifetime and is read
// with positioned reads, so one source may serve several threads.
class DataSource {
 public:
  // INVALID_ARGUMENT for a non-positive sample length or vocabulary, a text
  // source with vocab_size < 256, token_bytes other than 2 or 4, a file
  // that is not a regular one (a FIFO or device: never opened blocking) or
  // is over kMaxDataFileBytes, a token file whose size is not a multiple of
  // its ids', a text file that is binary (CheckTextDataHead on its first
  // kTextDataSniffBytes), or a Megatron dataset whose index is invalid or
  // does not describe its .bin (ParseMegatronIndex, CheckMegatronData);
  // NOT_FOUND when a file cannot be opened; FAILED_PRECONDITION when the
  // data holds fewer than sample_length tokens.
  static absl::StatusOr<std::unique_ptr<DataSource>> Open(
      const DataSourceOptions& options);

  ~DataSource();
  DataSource(const DataSource&) = delete;
  DataSource& operator=(const DataSource&) = delete;

  // Tokens [count, sample_length], int64 on the CPU, of the step's samples
  // [first, first + count). The same arguments always give the same tokens.
  // INVALID_ARGUMENT for a negative step, first or count < 1; DATA_LOSS when a
  // token file holds an id outside [0, vocab_size) or a read comes up short.
  absl::StatusOr<at::Tensor> Samples(int64_t step, int64_t first,
                                     int64_t count) const;

  const DataSourceOptions& options() const { return options_; }

 private:
  DataSource(const DataSourceOptions& options, int fd, int64_t num_tokens,
             int token_bytes, bool signed_tokens);

  // Fills `out` (sample_length ids) with sample `index` of `step`.
  absl::Status ReadSample(int64_t step, int64_t index, int64_t* out) const;

  const DataSourceOptions options_;
  const int fd_;  // -1 for synthetic data
  const int64_t num_tokens_;
  // How the file stores each id.
  const int token_bytes_;
  const bool signed_tokens_;
};

}  // namespace chimera::worker

#endif  // CHIMERA_WORKER_RUNTIME_DATA_SOURCE_H_
