#include "worker/model/scripted_modules.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/directory.h"
#include "tests/support/scripted_model_files.h"
#include "tests/support/temp_dir.h"

namespace chimera::worker {
namespace {

using ::testing::HasSubstr;

constexpr ScriptedProbe kProbe{.seq_length = 5, .dtype = at::kDouble};

void Export(const std::string& out,
            const std::string& function = "chimera_model") {
  const chimera::testing::ProcessResult result =
      chimera::testing::ExportScriptedModel(out, function);
  ASSERT_EQ(result.exit_code, 0) << result.err;
}

void SavePiece(const std::string& piece_class, const std::string& path) {
  const chimera::testing::ProcessResult result =
      chimera::testing::SaveScriptedPiece(piece_class, path);
  ASSERT_EQ(result.exit_code, 0) << result.err;
}

// Each test gets model/, a copy of the test model as the helper exports it,
// in a directory of its own.
class ScriptedModulesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    exported_ = new chimera::testing::TempDir;
    Export(exported_->path() + "/model");
  }
  static void TearDownTestSuite() { delete exported_; }

  void SetUp() override {
    std::filesystem::copy(exported_->path() + "/model", Path(""),
                          std::filesystem::copy_options::recursive);
  }

  std::string Path(const std::string& file) const {
    return dir_.path() + "/model/" + file;
  }

  absl::StatusOr<ScriptedModules> Load() const {
    absl::StatusOr<Directory> root = Directory::OpenRoot(dir_.path());
    if (!root.ok()) return root.status();
    absl::StatusOr<Directory> model = root->Open("model", false);
    if (!model.ok()) return model.status();
    return LoadScriptedModules(*model, kProbe);
  }

  static chimera::testing::TempDir* exported_;
  chimera::testing::TempDir dir_;
};

chimera::testing::TempDir* ScriptedModulesTest::exported_ = nullptr;

TEST_F(ScriptedModulesTest, LoadsEveryPieceInTheJobsDtypeAndFindsItsSizes) {
  absl::StatusOr<ScriptedModules> model = Load();
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->blocks.size(), 3u);
  EXPECT_EQ(model->hidden_size, 8);
  EXPECT_EQ(model->vocab_size, 16);
  for (const at::Tensor& parameter : model->blocks[2].parameters()) {
    EXPECT_EQ(parameter.scalar_type(), at::kDouble);
    EXPECT_TRUE(parameter.requires_grad());
  }
  EXPECT_TRUE(model->head.is_training());
}

TEST_F(ScriptedModulesTest, ABlockThatChangesTheShapeIsRefusedNamingItsFile) {
  std::filesystem::remove_all(Path(""));
  Export(Path(""), "with_pooled_block");
  EXPECT_THAT(std::string(Load().status().message()),
              HasSubstr("'model/block-1.pt': returned a tensor of shape [1, 8] "
                        "given [1, 5, 8]; a block returns its input's shape"));
}

TEST_F(ScriptedModulesTest, APieceWithoutParametersIsRefusedNamingItsFile) {
  SavePiece("OneHotEmbedding", Path("embedding.pt"));
  EXPECT_THAT(std::string(Load().status().message()),
              HasSubstr("'model/embedding.pt': holds no parameters"));
}

TEST_F(ScriptedModulesTest, ALossOfEveryTokenIsRefusedForItsSum) {
  std::filesystem::remove_all(Path(""));
  Export(Path(""), "with_per_token_loss");
  EXPECT_THAT(std::string(Load().status().message()),
              HasSubstr("'model/loss.pt': returned a tensor of shape [5]; a "
                        "loss returns a scalar, the sum over the tokens"));
}

TEST_F(ScriptedModulesTest, AFileThatIsNoTorchScriptIsRefusedNamingIt) {
  chimera::testing::TempDir other;
  std::filesystem::copy_file(other.WriteFile("head.pt", "not a zip archive"),
                             Path("head.pt"),
                             std::filesystem::copy_options::overwrite_existing);
  const absl::Status status = Load().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("'model/head.pt': not a TorchScript module"));
}

TEST_F(ScriptedModulesTest, AMissingPieceIsNotFoundNamingIt) {
  std::filesystem::remove(Path("head.pt"));
  const absl::Status status = Load().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(status.message()), HasSubstr("'model/head.pt'"));
}

TEST_F(ScriptedModulesTest, BlocksNumberedWithAGapAreRefused) {
  std::filesystem::remove(Path("block-1.pt"));
  EXPECT_THAT(std::string(Load().status().message()),
              HasSubstr("'model/block-1.pt' is missing: blocks are numbered "
                        "from 0 without gaps"));
}

TEST_F(ScriptedModulesTest, AFileOfAnotherNameIsRefusedAsNoPieceOfTheModel) {
  std::filesystem::rename(Path("block-2.pt"), Path("blok-2.pt"));
  EXPECT_THAT(std::string(Load().status().message()),
              HasSubstr("'model/blok-2.pt': not a piece of a model"));
}

// The helper refuses, exiting 2 and writing nothing, to leave stale pieces
// beside new ones or to export a piece with nothing to train.
TEST(ExportTorchScriptTest, RefusesStalePiecesAndAPieceWithoutParameters) {
  chimera::testing::TempDir dir;
  Export(dir.path() + "/model");
  chimera::testing::ProcessResult again =
      chimera::testing::ExportScriptedModel(dir.path() + "/model");
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_THAT(again.err, HasSubstr("model already holds block-0.pt"));
  EXPECT_THAT(again.err, HasSubstr("pass --replace"));

  chimera::testing::ProcessResult one_hot =
      chimera::testing::ExportScriptedModel(dir.path() + "/one-hot",
                                            "with_one_hot_embedding");
  EXPECT_EQ(one_hot.exit_code, 2);
  EXPECT_THAT(one_hot.err, HasSubstr("embedding: holds no parameters"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/one-hot"));
}

}  // namespace
}  // namespace chimera::worker
