// chimera-tokenize: what `chimera tokenize` runs, with the flags it checked
// (client/tokenize_command.h says why it is a program of its own). Text to
// a tokens file with a SentencePiece model (client/tokenizer.h), trained
// first with --train-vocab.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/exit_codes.h"
#include "client/tokenize_flags.h"
#include "client/tokenizer.h"
#include "common/progress_bar.h"

namespace chimera::client {
namespace {

// A progress bar on a terminal's stderr, in KiB of input.
TokenizeProgress TerminalProgress() {
  if (!isatty(STDERR_FILENO)) return {};
  const absl::Time start = absl::Now();
  return [start](uint64_t done, uint64_t total) {
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    const int done_kib = static_cast<int>(done >> 10);
    std::cerr << "\r\033[Ktokenizing, KiB "
              << ProgressBar(done_kib, static_cast<int>(total >> 10),
                             done_kib > 0 ? seconds / done_kib : 0)
              << (done == total ? "\n" : "") << std::flush;
  };
}

// What a finished run prints: the file, its size, and the job fields that
// read it.
std::string DescribeTokenized(const TokenizeOptions& options,
                              const TokenizeResult& result) {
  std::string text;
  if (options.train_vocab > 0) {
    absl::StrAppendFormat(&text, "trained %s: a unigram model of %d pieces\n",
                          options.model, result.vocab_size);
  }
  absl::StrAppendFormat(
      &text,
      "wrote %s: %d tokens from %d lines (%d bytes of text), %d-byte ids\n"
      "a job reads it with:\n"
      "  model: {vocabSize: %d, ...}\n"
      "  data: {format: tokens, path: %s%s}\n",
      options.output, result.tokens, result.lines, result.input_bytes,
      result.token_bytes, result.vocab_size, options.output,
      result.token_bytes == 2 ? "" : ", tokenBytes: 4");
  return text;
}

}  // namespace
}  // namespace chimera::client

int main(int argc, char** argv) {
  using namespace chimera::client;
  CLI::App app(kTokenizeDescription, "chimera tokenize");
  TokenizeOptions options;
  AddTokenizeFlags(app, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error) == 0 ? kExitOk : kExitUsage;
  }
  const absl::StatusOr<TokenizeResult> result =
      Tokenize(options, TerminalProgress());
  if (!result.ok()) {
    std::cerr << "chimera tokenize: " << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument
               ? kExitUsage
               : kExitFailure;
  }
  std::cout << DescribeTokenized(options, *result);
  return kExitOk;
}
