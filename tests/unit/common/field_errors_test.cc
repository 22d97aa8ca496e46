#include "common/field_errors.h"

#include "gtest/gtest.h"

namespace chimera {
namespace {

TEST(FieldErrorsTest, EmptyListIsOk) {
  EXPECT_TRUE(FieldErrors().ToStatus().ok());
}

TEST(FieldErrorsTest, StatusListsEveryErrorOnItsOwnLineInOrder) {
  FieldErrors errors;
  errors.Add("spec.model.numLayers", "0 must be > 0");
  errors.Add("", "not valid YAML");
  absl::Status status = errors.ToStatus();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "spec.model.numLayers: 0 must be > 0\nnot valid YAML");
}

TEST(FieldErrorsTest, AppendKeepsOrder) {
  FieldErrors first, second;
  first.Add("a", "1");
  second.Add("b", "2");
  first.Append(second);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first.errors()[1].ToString(), "b: 2");
}

}  // namespace
}  // namespace chimera
