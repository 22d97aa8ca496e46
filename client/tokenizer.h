// Text to a tokens file (`spec.data.format: tokens`) with a SentencePiece
// model, trained on the text first when asked: how a user brings a real
// vocabulary to a job instead of byte-level text.
//
// Each non-empty line of the input is encoded on its own and, unless
// turned off, followed by the model's end-of-sentence id, so that a sample
// drawn across lines sees where one ends. Ids are written little-endian in
// the fewest bytes that hold the vocabulary (2 up to 65,536 pieces, else
// 4), to OUTPUT.partial first and renamed when complete: a failed or
// interrupted run leaves no half-written file under the output's name.
//
//   ASSIGN_OR_RETURN(TokenizeResult result,
//                    Tokenize({.input = "corpus.txt", .output =
//                    "corpus.tokens",
//                              .model = "corpus.model", .train_vocab = 2000},
//                             {}));
#ifndef CHIMERA_CLIENT_TOKENIZER_H_
#define CHIMERA_CLIENT_TOKENIZER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace chimera::client {

struct TokenizeOptions {
  // A UTF-8 text file.
  std::string input;
  // The tokens file to write.
  std::string output;
  // The SentencePiece model to encode with; with train_vocab, the file the
  // model trained first is written to.
  std::string model;
  // > 0: train a unigram model of this many pieces on the input first.
  int train_vocab = 0;
  // Training reads a random sample of at most this many lines.
  int max_training_lines = 1'000'000;
  // Bytes per id, 2 or 4; 0 picks the fewest that hold the vocabulary.
  int token_bytes = 0;
  // Follow each line's ids with the model's end-of-sentence id.
  bool end_of_sentence = true;
};

struct TokenizeResult {
  uint64_t input_bytes = 0;
  int64_t lines = 0;
  int64_t tokens = 0;
  int vocab_size = 0;
  int token_bytes = 0;
};

// Called as the input is read, with the bytes read so far and in all.
using TokenizeProgress = std::function<void(uint64_t done, uint64_t total)>;

// INVALID_ARGUMENT naming the file or flag for an input that is missing,
// empty or binary, a model that cannot be loaded, a vocabulary SentencePiece
// cannot train from the input, a token_bytes other than 0, 2 or 4 or too
// small for the model, or an output that is the input; INTERNAL when the
// output cannot be written.
absl::StatusOr<TokenizeResult> Tokenize(const TokenizeOptions& options,
                                        const TokenizeProgress& progress);

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_TOKENIZER_H_
