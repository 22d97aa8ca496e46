#include "client/sentencepiece_model.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>
#include <utility>

namespace chimera::client {
namespace {

// SentencePiece's messages start with where in its sources they were
// raised ("Internal: ./src/trainer_interface.cc(660) [check] Vocabulary size
// too high (60). ..."); the user needs only what follows.
std::string Reason(const sentencepiece::util::Status& status) {
  const std::string text = status.ToString();
  const size_t check_end = text.rfind("] ");
  return check_end == std::string::npos ? text : text.substr(check_end + 2);
}

}  // namespace

std::unique_ptr<SentencePieceModel> SentencePieceModel::Load(
    const std::string& path, std::string* error) {
  // SentencePiece reads a missing file as an empty model; say what it is.
  if (!std::ifstream(path, std::ios::binary)) {
    *error = "cannot be opened";
    return nullptr;
  }
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const sentencepiece::util::Status status = processor->Load(path);
  if (!status.ok()) {
    *error = "is not a SentencePiece model";
    return nullptr;
  }
  return std::unique_ptr<SentencePieceModel>(
      new SentencePieceModel(std::move(processor)));
}

bool SentencePieceModel::Train(const std::string& input, int vocab_size,
                               int max_sentences, const std::string& model_path,
                               std::string* error) {
  // It writes PREFIX.model and PREFIX.vocab; the caller names the model.
  std::string prefix = model_path;
  const std::string extension = ".model";
  if (prefix.size() > extension.size() &&
      prefix.compare(prefix.size() - extension.size(), extension.size(),
                     extension) == 0) {
    prefix.resize(prefix.size() - extension.size());
  }
  const std::unordered_map<std::string, std::string> options = {
      {"input", input},
      {"model_prefix", prefix},
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", "unigram"},
      {"input_sentence_size", std::to_string(max_sentences)},
      {"shuffle_input_sentence", "true"},
      // Its progress log runs to thousands of lines; errors still show.
      {"minloglevel", "1"},
  };
  const sentencepiece::util::Status status =
      sentencepiece::SentencePieceTrainer::Train(options);
  if (!status.ok()) {
    *error = Reason(status);
    return false;
  }
  if (prefix + extension != model_path &&
      std::rename((prefix + extension).c_str(), model_path.c_str()) != 0) {
    *error = "the trained model could not be moved to " + model_path + ": " +
             std::strerror(errno);
    return false;
  }
  return true;
}

SentencePieceModel::SentencePieceModel(
    std::unique_ptr<sentencepiece::SentencePieceProcessor> processor)
    : processor_(std::move(processor)) {}

SentencePieceModel::~SentencePieceModel() = default;

int SentencePieceModel::vocab_size() const {
  return processor_->GetPieceSize();
}

int SentencePieceModel::end_of_sentence() const { return processor_->eos_id(); }

bool SentencePieceModel::Encode(const std::string& text, std::vector<int>* ids,
                                std::string* error) const {
  std::vector<int> encoded;
  const sentencepiece::util::Status status = processor_->Encode(text, &encoded);
  if (!status.ok()) {
    *error = Reason(status);
    return false;
  }
  ids->insert(ids->end(), encoded.begin(), encoded.end());
  return true;
}

}  // namespace chimera::client
