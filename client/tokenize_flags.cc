#include "client/tokenize_flags.h"

namespace chimera::client {

const char kTokenizeDescription[] =
    "Turn a text file into a tokens file (spec.data.format: tokens) with a "
    "SentencePiece model, training one on the text first with --train-vocab. "
    "Each non-empty line is encoded on its own and followed by the model's "
    "end-of-sentence id. Exits 2 for bad input, 1 when the output cannot be "
    "written.";

void AddTokenizeFlags(CLI::App& command, TokenizeOptions& options) {
  command.add_option("-i,--input", options.input, "The text file (UTF-8)")
      ->required();
  command
      .add_option("-o,--output", options.output,
                  "The tokens file to write (written whole or not at all)")
      ->required();
  command
      .add_option("-m,--model", options.model,
                  "The SentencePiece model (.model) to encode with; with "
                  "--train-vocab, where the trained model is written (and "
                  "its pieces beside it, as .vocab)")
      ->required();
  command
      .add_option("--train-vocab", options.train_vocab,
                  "Train a unigram model of this many pieces on the input "
                  "first")
      ->check(CLI::Range(1, 1 << 24));
  command
      .add_option("--max-training-lines", options.max_training_lines,
                  "Training reads a random sample of at most this many "
                  "lines")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      .add_option("--token-bytes", options.token_bytes,
                  "Bytes per id, 2 or 4 (default: the fewest that hold "
                  "the vocabulary)")
      ->check(CLI::IsMember({2, 4}));
  command.add_flag_callback(
      "--no-end-of-sentence", [&options] { options.end_of_sentence = false; },
      "Do not follow each line with the end-of-sentence id");
}

std::vector<std::string> TokenizeArguments(const TokenizeOptions& options) {
  std::vector<std::string> arguments = {
      "--input",
      options.input,
      "--output",
      options.output,
      "--model",
      options.model,
      "--max-training-lines",
      std::to_string(options.max_training_lines)};
  if (options.train_vocab > 0) {
    arguments.insert(arguments.end(),
                     {"--train-vocab", std::to_string(options.train_vocab)});
  }
  if (options.token_bytes > 0) {
    arguments.insert(arguments.end(),
                     {"--token-bytes", std::to_string(options.token_bytes)});
  }
  if (!options.end_of_sentence) arguments.push_back("--no-end-of-sentence");
  return arguments;
}

}  // namespace chimera::client
