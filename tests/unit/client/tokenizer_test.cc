#include "client/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/sentencepiece_model.h"
#include "client/tokenize_flags.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/temp_dir.h"

namespace chimera::client {
namespace {

using ::testing::HasSubstr;

// Lines of a small language, enough for a model of 32 pieces.
std::string Corpus() {
  const std::vector<std::string> words = {
      "pipeline", "stage", "gradient", "bubble",   "weights", "tensor",
      "batch",    "micro", "forward",  "backward", "the",     "of"};
  std::string text;
  for (int line = 0; line < 400; ++line) {
    for (int word = 0; word < 9; ++word) {
      absl::StrAppend(&text, words[(line * 7 + word * word * 3) % words.size()],
                      word < 8 ? " " : "\n");
    }
    if (line % 50 == 0) text += "\n";  // an empty line now and then
  }
  return text;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The ids a tokens file of `width`-byte little-endian ids holds.
std::vector<int> Ids(const std::string& bytes, int width) {
  std::vector<int> ids;
  for (size_t at = 0; at + width <= bytes.size(); at += width) {
    int id = 0;
    for (int i = width - 1; i >= 0; --i) {
      id = id << 8 | static_cast<unsigned char>(bytes[at + i]);
    }
    ids.push_back(id);
  }
  return ids;
}

class TokenizerTest : public ::testing::Test {
 protected:
  TokenizeOptions Options() const {
    return {.input = input_,
            .output = dir_.path() + "/corpus.tokens",
            .model = dir_.path() + "/corpus.model",
            .train_vocab = 32};
  }

  chimera::testing::TempDir dir_;
  const std::string input_ = dir_.WriteFile("corpus.txt", Corpus());
};

TEST_F(TokenizerTest, EachLineIsEncodedAndEndedByTheEndOfSentenceId) {
  const TokenizeOptions options = Options();
  const absl::StatusOr<TokenizeResult> result = Tokenize(options, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->vocab_size, 32);
  EXPECT_EQ(result->token_bytes, 2);
  EXPECT_EQ(result->lines, 408);

  std::string error;
  const auto model = SentencePieceModel::Load(options.model, &error);
  ASSERT_NE(model, nullptr) << error;
  std::vector<int> expected;
  std::ifstream lines(input_);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty()) continue;
    ASSERT_TRUE(model->Encode(line, &expected, &error)) << error;
    expected.push_back(model->end_of_sentence());
  }
  EXPECT_EQ(Ids(Bytes(options.output), 2), expected);
  EXPECT_EQ(result->tokens, static_cast<int64_t>(expected.size()));
  EXPECT_FALSE(std::filesystem::exists(options.output + ".partial"));
}

TEST_F(TokenizerTest, AGivenModelEncodesInTheBytesAsked) {
  ASSERT_TRUE(Tokenize(Options(), {}).ok());
  TokenizeOptions options = Options();
  options.train_vocab = 0;
  options.token_bytes = 4;
  options.end_of_sentence = false;
  options.output = dir_.path() + "/wide.tokens";
  const absl::StatusOr<TokenizeResult> result = Tokenize(options, {});
  ASSERT_TRUE(result.ok()) << result.status();
  std::vector<int> narrow = Ids(Bytes(Options().output), 2);
  std::string error;
  const int end =
      SentencePieceModel::Load(options.model, &error)->end_of_sentence();
  narrow.erase(std::remove(narrow.begin(), narrow.end(), end), narrow.end());
  EXPECT_EQ(Ids(Bytes(options.output), 4), narrow);
}

TEST_F(TokenizerTest, ReportsProgressUpToTheWholeInput) {
  std::vector<uint64_t> reported;
  uint64_t total = 0;
  ASSERT_TRUE(Tokenize(Options(), [&](uint64_t done, uint64_t all) {
                reported.push_back(done);
                total = all;
              }).ok());
  ASSERT_FALSE(reported.empty());
  EXPECT_EQ(reported.back(), Corpus().size());
  EXPECT_EQ(total, Corpus().size());
}

void ExpectRefused(const TokenizeOptions& options, const std::string& message) {
  const absl::StatusOr<TokenizeResult> result = Tokenize(options, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument)
      << result.status();
  EXPECT_THAT(result.status().message(), HasSubstr(message));
  EXPECT_FALSE(std::filesystem::exists(options.output));
}

TEST_F(TokenizerTest, BadInputIsRefusedNamingTheFlag) {
  TokenizeOptions options = Options();
  options.input = dir_.path() + "/none.txt";
  ExpectRefused(options, "--input: '" + options.input + "' does not exist");
  options.input = dir_.WriteFile("empty.txt", "");
  ExpectRefused(options, "is empty");
  options.input = dir_.WriteFile("ids.bin", std::string("\0\1\0\2", 4));
  ExpectRefused(options, "is binary");

  options = Options();
  options.train_vocab = 100000;
  ExpectRefused(options, "--train-vocab 100000: training on '" + input_ +
                             "' failed: Vocabulary size too high (100000)");
  options.train_vocab = 0;
  options.model = input_;
  ExpectRefused(options, "is not a SentencePiece model");
  options.model = dir_.path() + "/none.model";
  ExpectRefused(options, "--model: '" + options.model + "' cannot be opened");
  options = Options();
  options.output = input_;
  const absl::StatusOr<TokenizeResult> same = Tokenize(options, {});
  EXPECT_THAT(same.status().message(), HasSubstr("is the input"));
}

// chimera checks the flags and hands chimera-tokenize the same options.
TEST(TokenizeFlagsTest, ArgumentsParseBackIntoTheOptions) {
  const TokenizeOptions given = {.input = "a b.txt",
                                 .output = "out.tokens",
                                 .model = "m.model",
                                 .train_vocab = 3000,
                                 .max_training_lines = 17,
                                 .token_bytes = 4,
                                 .end_of_sentence = false};
  for (const TokenizeOptions& options :
       {given, TokenizeOptions{.input = "i", .output = "o", .model = "m"}}) {
    CLI::App app;
    TokenizeOptions parsed;
    AddTokenizeFlags(app, parsed);
    std::vector<std::string> arguments = TokenizeArguments(options);
    std::reverse(arguments.begin(),
                 arguments.end());  // CLI11 parses a vector from its back
    app.parse(arguments);
    EXPECT_EQ(parsed.input, options.input);
    EXPECT_EQ(parsed.output, options.output);
    EXPECT_EQ(parsed.model, options.model);
    EXPECT_EQ(parsed.train_vocab, options.train_vocab);
    EXPECT_EQ(parsed.max_training_lines, options.max_training_lines);
    EXPECT_EQ(parsed.token_bytes, options.token_bytes);
    EXPECT_EQ(parsed.end_of_sentence, options.end_of_sentence);
  }
}

TEST_F(TokenizerTest, AnUnwritableOutputLeavesNothingBehind) {
  TokenizeOptions options = Options();
  options.output = dir_.path() + "/no/such/dir/corpus.tokens";
  const absl::StatusOr<TokenizeResult> result = Tokenize(options, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(result.status().message(), HasSubstr("cannot write"));
}

}  // namespace
}  // namespace chimera::client
