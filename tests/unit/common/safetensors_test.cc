#include "common/safetensors.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"
#include "tests/support/temp_dir.h"

namespace chimera {
namespace {

using ::testing::HasSubstr;

// Two float32 weights and a bfloat16 one: 8 + 24 + 12 bytes of data.
const std::vector<SafetensorsTensor> kTensors = {
    {.name = "model.norm.weight", .dtype = "F32", .shape = {2}},
    {.name = "lm_head.weight", .dtype = "F32", .shape = {2, 3}},
    {.name = "model.embed_tokens.weight", .dtype = "BF16", .shape = {3, 2}},
};
constexpr uint64_t kDataBytes = 8 + 24 + 12;

std::string File(const std::vector<SafetensorsTensor>& tensors,
                 const std::map<std::string, std::string>& metadata,
                 uint64_t data_bytes) {
  absl::StatusOr<std::string> header =
      SerializeSafetensorsHeader(tensors, metadata);
  EXPECT_TRUE(header.ok()) << header.status();
  return *header + std::string(data_bytes, '\x01');
}

// A file whose header is `json` (its length prefixed) and `data_bytes`
// bytes of data.
std::string FileWithHeader(const std::string& json, uint64_t data_bytes) {
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<char>(json.size() >> (8 * i));
  return file + json + std::string(data_bytes, '\0');
}

absl::Status ParseStatus(const std::string& file) {
  return ParseSafetensorsHeader(file, file.size()).status();
}

TEST(SafetensorsTest, WrittenHeadersParseBackWithTheirOffsets) {
  const std::string file = File(kTensors, {{"format", "pt"}}, kDataBytes);
  const absl::StatusOr<SafetensorsHeader> header =
      ParseSafetensorsHeader(file, file.size());
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->data_start % 8, 0u) << "the data is 8-byte aligned";
  EXPECT_EQ(header->data_start + kDataBytes, file.size());
  EXPECT_EQ(header->metadata.at("format"), "pt");
  ASSERT_EQ(header->tensors.size(), 3u);
  // In the order of their data, which is the order they were given in.
  EXPECT_EQ(header->tensors[0].name, "model.norm.weight");
  EXPECT_EQ(header->tensors[1].begin, 8u);
  EXPECT_EQ(header->tensors[1].end, 32u);
  EXPECT_EQ(header->tensors[2].dtype, "BF16");
  EXPECT_EQ(header->tensors[2].shape, (std::vector<int64_t>{3, 2}));
}

// Read as the format's own tooling reads it: Python's json on the header
// bytes, which must hold exactly the tensors and offsets written.
TEST(SafetensorsTest, TheHeaderIsWhatPythonsJsonReads) {
  chimera::testing::TempDir dir;
  const std::string path = dir.WriteFile(
      "model.safetensors", File(kTensors, {{"format", "pt"}}, kDataBytes));
  const testing::ProcessResult python = testing::RunProcess(
      {testing::FindOnPath("python3"), "-c",
       "import json, struct, sys\n"
       "f = open(sys.argv[1], 'rb')\n"
       "n = struct.unpack('<Q', f.read(8))[0]\n"
       "h = json.loads(f.read(n))\n"
       "print(h.pop('__metadata__'))\n"
       "for k, v in sorted(h.items(), key=lambda t: t[1]['data_offsets']):\n"
       "  print(k, v['dtype'], v['shape'], v['data_offsets'])\n",
       path});
  ASSERT_EQ(python.exit_code, 0) << python.err;
  EXPECT_EQ(python.out,
            "{'format': 'pt'}\n"
            "model.norm.weight F32 [2] [0, 8]\n"
            "lm_head.weight F32 [2, 3] [8, 32]\n"
            "model.embed_tokens.weight BF16 [3, 2] [32, 44]\n");
}

TEST(SafetensorsTest, FilesWithoutAWholeHeaderAreRefused) {
  EXPECT_THAT(ParseStatus("abc").message(), HasSubstr("fewer than the 8"));
  std::string huge(8, '\xff');
  EXPECT_THAT(ParseStatus(huge).message(), HasSubstr("more than the limit"));
  EXPECT_THAT(ParseStatus(FileWithHeader("{}", 0).substr(0, 9)).message(),
              HasSubstr("has only 1 after it"));
  const std::string file = File(kTensors, {}, kDataBytes);
  EXPECT_EQ(
      ParseSafetensorsHeader(file.substr(0, 12), file.size()).status().code(),
      absl::StatusCode::kOutOfRange);
}

struct BadHeader {
  std::string name;
  std::string json;
  uint64_t data_bytes;
  std::string message;
};

void PrintTo(const BadHeader& bad, std::ostream* out) { *out << bad.name; }

class SafetensorsBadHeaderTest : public ::testing::TestWithParam<BadHeader> {};

TEST_P(SafetensorsBadHeaderTest, IsRefusedNamingTheFault) {
  const BadHeader& bad = GetParam();
  const absl::Status status =
      ParseStatus(FileWithHeader(bad.json, bad.data_bytes));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr(bad.message));
}

const std::string kOne =
    R"("a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";

INSTANTIATE_TEST_SUITE_P(
    Faults, SafetensorsBadHeaderTest,
    ::testing::Values(
        BadHeader{"NotJson", "{\"a\": ", 0, "its header is not JSON"},
        BadHeader{"NotAnObject", "[1, 2]", 0, "not a JSON object"},
        BadHeader{"DuplicateName", "{" + kOne + ", " + kOne + "}", 8,
                  "names 'a' twice"},
        BadHeader{
            "UnknownDtype",
            R"({"a": {"dtype": "F12", "shape": [2], "data_offsets": [0, 8]}})",
            8, "tensor 'a' has an unknown dtype 'F12'"},
        BadHeader{
            "NegativeDimension",
            R"({"a": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})",
            8, "tensor 'a' has no shape of non-negative integers"},
        BadHeader{
            "FractionalDimension",
            R"({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}})",
            8, "no shape of non-negative integers"},
        BadHeader{
            "BackwardsOffsets",
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}})",
            8, "begin <= end"},
        BadHeader{
            "BytesNotTheShapes",
            R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}})",
            8, "holds 8 bytes, not the 12"},
        BadHeader{
            "ShapeOverflowing",
            R"({"a": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})",
            8, "not the over 2^63"},
        BadHeader{
            "UnknownField",
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8], "x": 1}})",
            8, "unknown field 'x'"},
        BadHeader{
            "Gap",
            R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})",
            12, "starts at byte 4 of the data, where 0 was expected"},
        BadHeader{
            "Overlap",
            "{" + kOne +
                R"(, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})",
            8, "tensor 'b' starts at byte 4 of the data, where 8"},
        BadHeader{"TrailingData", "{" + kOne + "}", 9,
                  "its tensors hold 8 bytes of data, but the file has 9"},
        BadHeader{"MissingData", "{" + kOne + "}", 4,
                  "hold 8 bytes of data, but the file has 4"},
        BadHeader{"MetadataNotStrings", R"({"__metadata__": {"step": 3}})", 0,
                  "__metadata__['step'] is not a string"}),
    [](const auto& info) { return info.param.name; });

TEST(SafetensorsTest, WritingRefusesWhatNoFileCanHold) {
  EXPECT_THAT(
      SerializeSafetensorsHeader(
          {{.name = "a", .dtype = "F32"}, {.name = "a", .dtype = "F32"}}, {})
          .status()
          .message(),
      HasSubstr("'a' is reserved or given twice"));
  EXPECT_THAT(
      SerializeSafetensorsHeader({{.name = "__metadata__", .dtype = "F32"}}, {})
          .status()
          .message(),
      HasSubstr("reserved"));
  EXPECT_THAT(SerializeSafetensorsHeader({{.name = "a", .dtype = "float"}}, {})
                  .status()
                  .message(),
              HasSubstr("unknown dtype 'float'"));
}

}  // namespace
}  // namespace chimera
