// SentencePiece behind an interface of the standard library only: the
// library's headers declare `absl::string_view` as std::string_view, which
// clashes with Debian's Abseil (a class of its own), so no file that sees
// Abseil may include them. client/tokenizer.h is the Abseil-side wrapper.
//
//   std::string error;
//   auto model = SentencePieceModel::Load("corpus.model", &error);
//   std::vector<int> ids;
//   if (!model || !model->Encode("a line of text", &ids, &error)) ...
#ifndef CHIMERA_CLIENT_SENTENCEPIECE_MODEL_H_
#define CHIMERA_CLIENT_SENTENCEPIECE_MODEL_H_

#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace chimera::client {

class SentencePieceModel {
 public:
  // The model in `path`; null with `error` set when it cannot be loaded.
  static std::unique_ptr<SentencePieceModel> Load(const std::string& path,
                                                  std::string* error);

  // Trains a unigram model of `vocab_size` pieces on the lines of `input`
  // (a random sample of at most `max_sentences` of them) and writes it to
  // `model_path`; false with `error` set when SentencePiece refuses.
  static bool Train(const std::string& input, int vocab_size, int max_sentences,
                    const std::string& model_path, std::string* error);

  ~SentencePieceModel();

  int vocab_size() const;
  // The id that ends a sentence, or -1 when the model has none.
  int end_of_sentence() const;

  // Appends the ids of `text` to `ids`; false with `error` set on failure.
  bool Encode(const std::string& text, std::vector<int>* ids,
              std::string* error) const;

 private:
  explicit SentencePieceModel(
      std::unique_ptr<sentencepiece::SentencePieceProcessor> processor);

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_SENTENCEPIECE_MODEL_H_
