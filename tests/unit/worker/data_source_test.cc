#include "worker/runtime/data_source.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "common/file_reader.h"
#include "gmock/gmock.h"
#include "tests/support/megatron_dataset.h"
#include "tests/support/temp_dir.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

DataSourceOptions Options(DataFormat format, const std::string& path = "") {
  DataSourceOptions options;
  options.format = format;
  options.path = path;
  options.vocab_size = 300;
  options.sample_length = 5;
  options.seed = 3;
  return options;
}

TEST(DataSourceTest, MicroBatchesOfReplicasTileTheMiniBatch) {
  // W = 2, N = 3, B = 4: replica 1's micro-batch 2 is the last of 24.
  EXPECT_EQ(MicroBatchSamples(0, 0, 3, 4).first, 0);
  EXPECT_EQ(MicroBatchSamples(0, 2, 3, 4).first, 8);
  EXPECT_EQ(MicroBatchSamples(1, 0, 3, 4).first, 12);
  EXPECT_EQ(MicroBatchSamples(1, 2, 3, 4).first, 20);
  EXPECT_EQ(MicroBatchSamples(1, 2, 3, 4).count, 4);
}

TEST(DataSourceTest, SamplesDependOnlyOnStepAndIndex) {
  auto data = DataSource::Open(Options(DataFormat::kSynthetic)).value();
  const at::Tensor whole = data->Samples(7, 0, 6).value();
  ASSERT_EQ(whole.sizes(), (at::IntArrayRef{6, 5}));
  EXPECT_TRUE(at::equal(data->Samples(7, 2, 3).value(), whole.slice(0, 2, 5)));
  EXPECT_FALSE(at::equal(data->Samples(8, 0, 6).value(), whole));
  EXPECT_LT(whole.max().item<int64_t>(), 300);
  EXPECT_GE(whole.min().item<int64_t>(), 0);
}

TEST(DataSourceTest, TextSamplesAreContiguousBytesOfTheFile) {
  const chimera::testing::TempDir dir;
  const std::string text = "abcdefghijklmnopqrstuvwxyz";
  auto data =
      DataSource::Open(Options(DataFormat::kText, dir.WriteFile("t.txt", text)))
          .value();
  const at::Tensor samples = data->Samples(0, 0, 4).value();
  for (int64_t i = 0; i < 4; ++i) {
    const int64_t first = samples[i][0].item<int64_t>();
    ASSERT_GE(first, 'a');
    for (int64_t j = 1; j < 5; ++j) {
      EXPECT_EQ(samples[i][j].item<int64_t>(), first + j);
    }
  }
}

TEST(DataSourceTest, TokenFilesAreLittleEndianUint16) {
  const chimera::testing::TempDir dir;
  // Ids 258, 259, 260, 261, 262: exactly one sample fits.
  const std::string bytes("\x02\x01\x03\x01\x04\x01\x05\x01\x06\x01", 10);
  auto data = DataSource::Open(
                  Options(DataFormat::kTokens, dir.WriteFile("t.bin", bytes)))
                  .value();
  EXPECT_TRUE(at::equal(data->Samples(4, 9, 1).value(),
                        at::arange(258, 263, at::kLong).view({1, 5})));
}

TEST(DataSourceTest, FourByteTokenFilesHoldLargeVocabularies) {
  const chimera::testing::TempDir dir;
  std::string bytes;
  for (uint64_t id = 128250; id < 128255; ++id) {
    chimera::testing::AppendLittleEndian(bytes, id, 4);
  }
  DataSourceOptions options =
      Options(DataFormat::kTokens, dir.WriteFile("t.bin", bytes));
  options.token_bytes = 4;
  options.vocab_size = 128256;
  auto data = DataSource::Open(options).value();
  EXPECT_TRUE(at::equal(data->Samples(0, 3, 1).value(),
                        at::arange(128250, 128255, at::kLong).view({1, 5})));
  options.token_bytes = 3;
  EXPECT_THAT(DataSource::Open(options).status().message(),
              HasSubstr("token ids of 3 bytes; a tokens file holds 2 or 4"));
}

// Two documents, 1..4 and 5..9: every sample of five is a window of their
// concatenation 1..9.
TEST(DataSourceTest, MegatronSamplesAreWindowsOfTheConcatenatedSequences) {
  const chimera::testing::TempDir dir;
  for (const uint8_t dtype_code : {1, 3, 4, 5, 8}) {
    const chimera::testing::MegatronDataset dataset{
        .documents = {{1, 2, 3, 4}, {5, 6, 7, 8, 9}}, .dtype_code = dtype_code};
    dataset.Write(dir.path() + "/corpus");
    auto data =
        DataSource::Open(Options(DataFormat::kMegatron, dir.path() + "/corpus"))
            .value();
    const at::Tensor samples = data->Samples(2, 0, 8).value();
    for (int64_t i = 0; i < 8; ++i) {
      const int64_t first = samples[i][0].item<int64_t>();
      ASSERT_GE(first, 1);
      ASSERT_LE(first, 5);
      EXPECT_TRUE(
          at::equal(samples[i], at::arange(first, first + 5, at::kLong)))
          << int{dtype_code};
    }
  }
}

TEST(DataSourceTest, MegatronNegativeIdsAreOutsideTheVocabulary) {
  const chimera::testing::TempDir dir;
  const chimera::testing::MegatronDataset dataset{
      .documents = {{-1, -1, -1, -1, -1}}, .dtype_code = 4};
  dataset.Write(dir.path() + "/corpus");
  DataSourceOptions options =
      Options(DataFormat::kMegatron, dir.path() + "/corpus");
  options.name = "corpus";
  const auto samples = DataSource::Open(options).value()->Samples(0, 0, 1);
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(samples.status().message(),
              HasSubstr("token 0 of data file 'corpus.bin' is outside the "
                        "vocabulary [0, 300)"));
}

TEST(DataSourceTest, MegatronDatasetsThatDoNotAgreeWithTheirIndexAreRefused) {
  const chimera::testing::TempDir dir;
  const chimera::testing::MegatronDataset dataset{
      .documents = {{1, 2, 3, 4, 5, 6}}};
  dataset.Write(dir.path() + "/corpus");
  DataSourceOptions options =
      Options(DataFormat::kMegatron, dir.path() + "/corpus");
  options.name = "corpus";
  dir.WriteFile("corpus.bin", dataset.DataBytes() + "xx");
  EXPECT_THAT(DataSource::Open(options).status().message(),
              HasSubstr("data file 'corpus.bin' is 14 bytes; its index "
                        "describes 6 uint16 tokens, 12 bytes"));
  dir.WriteFile("corpus.idx", "MMIDIDX");
  EXPECT_THAT(DataSource::Open(options).status().message(),
              HasSubstr("index file 'corpus.idx' does not start with "
                        "Megatron's index magic"));
  options.path = dir.path() + "/none";
  options.name = "none";
  const auto missing = DataSource::Open(options);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("'none.idx'"));
  options.sample_length = 7;
  options.path = dir.path() + "/short";
  options.name = "short";
  dataset.Write(options.path);
  EXPECT_EQ(DataSource::Open(options).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(DataSourceTest, RejectsIdsOutsideTheVocabulary) {
  const chimera::testing::TempDir dir;
  const std::string bytes("\xff\xff\x01\x00\x01\x00\x01\x00\x01\x00", 10);
  auto data = DataSource::Open(
                  Options(DataFormat::kTokens, dir.WriteFile("t.bin", bytes)))
                  .value();
  const auto samples = data->Samples(0, 0, 1);
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(samples.status().message().find("outside the vocabulary [0, 300)"),
            std::string::npos);
  // Never the file's contents: a job's message reaches its submitter.
  EXPECT_EQ(samples.status().message().find("65535"), std::string::npos);
}

// A FIFO used to block open() until a writer came, so the job hung RUNNING
// with 0 steps; now it is refused at once.
TEST(DataSourceTest, RefusesAFifoWithoutWaitingForAWriter) {
  const chimera::testing::TempDir dir;
  const std::string fifo = dir.path() + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto data = DataSource::Open(Options(DataFormat::kText, fifo));
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("not a regular file"),
            std::string::npos);
  EXPECT_EQ(
      DataSource::Open(Options(DataFormat::kText, dir.path())).status().code(),
      absl::StatusCode::kInvalidArgument);
}

// The coordinator checks no data file, so the worker holds the size limit
// itself: a sparse 5 GB file was trained on, its holes read as text.
TEST(DataSourceTest, RefusesASparseFileOverTheSizeLimit) {
  const chimera::testing::TempDir dir;
  const std::string sparse = dir.path() + "/sparse.txt";
  ASSERT_EQ(::truncate(dir.WriteFile("sparse.txt", "a").c_str(),
                       static_cast<off_t>(kMaxDataFileBytes + 1)),
            0);
  const auto data = DataSource::Open(Options(DataFormat::kText, sparse));
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("more than the 4294967296-byte limit"),
            std::string::npos)
      << data.status();
}

// The coordinator checks no data file: a binary file submitted as text
// trained, its bytes read as characters, though the docs say it is refused.
TEST(DataSourceTest, RefusesABinaryFileAsTextNamingItAndWhy) {
  const chimera::testing::TempDir dir;
  const std::string binary =
      dir.WriteFile("model.bin", "\177ELF" + std::string(104, '\0'));
  const auto data = DataSource::Open(Options(DataFormat::kText, binary));
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(data.status().message().find("'" + binary + "' is binary"),
            std::string::npos)
      << data.status();
  EXPECT_NE(data.status().message().find("format 'tokens'"), std::string::npos)
      << data.status();
  // The same bytes are a token file's.
  EXPECT_TRUE(DataSource::Open(Options(DataFormat::kTokens, binary)).ok());
}

// Only the head is checked: a character it cuts in two is text still.
TEST(DataSourceTest, AcceptsTextWhoseCharacterStraddlesTheCheckedHead) {
  const chimera::testing::TempDir dir;
  const std::string text =
      std::string(kTextDataSniffBytes - 1, 'a') + "\xe2\x82\xac and more";
  const auto data = DataSource::Open(
      Options(DataFormat::kText, dir.WriteFile("t.txt", text)));
  EXPECT_TRUE(data.ok()) << data.status();
}

TEST(DataSourceTest, RejectsFilesThatCannotHoldASample) {
  const chimera::testing::TempDir dir;
  EXPECT_EQ(DataSource::Open(
                Options(DataFormat::kText, dir.WriteFile("short.txt", "abcd")))
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DataSource::Open(Options(DataFormat::kTokens,
                                     dir.WriteFile("odd.bin", "abcdefghijk")))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataSource::Open(Options(DataFormat::kText, dir.path() + "/none"))
                .status()
                .code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(ParseDataFormat("csv").status().message(),
              HasSubstr("not one of text, tokens, megatron, synthetic"));
  EXPECT_EQ(ParseDataFormat("megatron").value(), DataFormat::kMegatron);
}

}  // namespace
}  // namespace chimera::worker
