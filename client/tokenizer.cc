#include "client/tokenizer.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/sentencepiece_model.h"
#include "common/file_reader.h"
#include "common/status_macros.h"

namespace chimera::client {
namespace {

// How much of the encoded output is buffered between writes, and how often
// progress is reported.
constexpr size_t kFlushBytes = 1 << 20;
constexpr uint64_t kProgressEveryBytes = 1 << 20;

// The input must be a non-empty text file (as a `text` job's data must).
absl::StatusOr<uint64_t> CheckInput(const TokenizeOptions& options) {
  const absl::StatusOr<uint64_t> size = RegularFileSize(options.input);
  if (!size.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input: ", size.status().message()));
  }
  if (*size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input: '", options.input, "' is empty"));
  }
  ASSIGN_OR_RETURN(const std::string head,
                   ReadFilePrefix(options.input, kTextDataSniffBytes));
  if (const absl::Status text = CheckTextDataHead(options.input, head);
      !text.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--input: ", text.message()));
  }
  std::error_code error;
  if (std::filesystem::equivalent(options.input, options.output, error)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--output: '", options.output, "' is the input; name another file"));
  }
  return *size;
}

// The model to encode with: trained on the input first when asked.
absl::StatusOr<std::unique_ptr<SentencePieceModel>> ModelFor(
    const TokenizeOptions& options) {
  std::string error;
  if (options.train_vocab > 0 &&
      !SentencePieceModel::Train(options.input, options.train_vocab,
                                 options.max_training_lines, options.model,
                                 &error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--train-vocab ", options.train_vocab, ": training on '",
                     options.input, "' failed: ", error));
  }
  std::unique_ptr<SentencePieceModel> model =
      SentencePieceModel::Load(options.model, &error);
  if (model == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model: '", options.model, "' ", error));
  }
  return model;
}

absl::StatusOr<int> TokenBytesFor(const TokenizeOptions& options,
                                  int vocab_size) {
  constexpr int kTwoByteIds = 1 << 16;
  if (options.token_bytes == 0) return vocab_size <= kTwoByteIds ? 2 : 4;
  if (options.token_bytes != 2 && options.token_bytes != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("--token-bytes: ", options.token_bytes, " is not 2 or 4"));
  }
  if (options.token_bytes == 2 && vocab_size > kTwoByteIds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--token-bytes: 2-byte ids hold a vocabulary of at most ", kTwoByteIds,
        "; the model has ", vocab_size, " pieces (use 4)"));
  }
  return options.token_bytes;
}

// Encodes the input line by line into the open file `out`.
class Encoder {
 public:
  Encoder(const SentencePieceModel& model, int token_bytes,
          bool end_of_sentence, std::ofstream& out)
      : model_(model),
        token_bytes_(token_bytes),
        end_of_sentence_(end_of_sentence ? model.end_of_sentence() : -1),
        out_(out) {}

  absl::Status AddLine(const std::string& line, TokenizeResult& result) {
    if (line.empty()) return absl::OkStatus();
    ids_.clear();
    std::string error;
    if (!model_.Encode(line, &ids_, &error)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--input: line ", result.lines, " cannot be encoded: ", error));
    }
    if (end_of_sentence_ >= 0) ids_.push_back(end_of_sentence_);
    for (const int id : ids_) {
      for (int i = 0; i < token_bytes_; ++i) {
        bytes_.push_back(
            static_cast<char>(static_cast<uint32_t>(id) >> (8 * i)));
      }
    }
    result.tokens += static_cast<int64_t>(ids_.size());
    return bytes_.size() >= kFlushBytes ? Flush() : absl::OkStatus();
  }

  absl::Status Flush() {
    out_.write(bytes_.data(), static_cast<std::streamsize>(bytes_.size()));
    bytes_.clear();
    if (!out_) {
      return absl::InternalError(
          absl::StrCat("writing the tokens failed: ", std::strerror(errno)));
    }
    return absl::OkStatus();
  }

 private:
  const SentencePieceModel& model_;
  const int token_bytes_;
  const int end_of_sentence_;
  std::ofstream& out_;
  std::vector<int> ids_;
  std::string bytes_;
};

// Encodes every line of the input into `partial`.
absl::Status EncodeInto(const std::string& partial,
                        const TokenizeOptions& options,
                        const SentencePieceModel& model,
                        const TokenizeProgress& progress,
                        TokenizeResult& result) {
  std::ifstream in(options.input, std::ios::binary);
  std::ofstream out(partial, std::ios::binary | std::ios::trunc);
  if (!in || !out) {
    return absl::InternalError(absl::StrCat(
        "cannot ", !in ? "read '" + options.input : "write '" + partial,
        "': ", std::strerror(errno)));
  }
  Encoder encoder(model, result.token_bytes, options.end_of_sentence, out);
  uint64_t done = 0, reported = 0;
  std::string line;
  while (std::getline(in, line)) {
    ++result.lines;
    done += line.size() + 1;
    RETURN_IF_ERROR(encoder.AddLine(line, result));
    if (progress && done - reported >= kProgressEveryBytes) {
      progress(std::min(done, result.input_bytes), result.input_bytes);
      reported = done;
    }
  }
  RETURN_IF_ERROR(encoder.Flush());
  out.close();
  if (!out) {
    return absl::InternalError(
        absl::StrCat("closing '", partial, "' failed: ", std::strerror(errno)));
  }
  if (progress) progress(result.input_bytes, result.input_bytes);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizeResult> Tokenize(const TokenizeOptions& options,
                                        const TokenizeProgress& progress) {
  TokenizeResult result;
  ASSIGN_OR_RETURN(result.input_bytes, CheckInput(options));
  ASSIGN_OR_RETURN(const std::unique_ptr<SentencePieceModel> model,
                   ModelFor(options));
  result.vocab_size = model->vocab_size();
  ASSIGN_OR_RETURN(result.token_bytes,
                   TokenBytesFor(options, result.vocab_size));
  const std::string partial = options.output + ".partial";
  const absl::Status encoded =
      EncodeInto(partial, options, *model, progress, result);
  if (!encoded.ok()) {
    std::remove(partial.c_str());
    return encoded;
  }
  if (std::rename(partial.c_str(), options.output.c_str()) != 0) {
    const int error = errno;
    std::remove(partial.c_str());
    return absl::InternalError(absl::StrCat("cannot rename '", partial,
                                            "' to '", options.output,
                                            "': ", std::strerror(error)));
  }
  return result;
}

}  // namespace chimera::client
