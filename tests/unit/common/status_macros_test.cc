#include "common/status_macros.h"

#include <memory>

#include "gtest/gtest.h"

namespace chimera {
namespace {

absl::Status FailIfNegative(int value) {
  if (value < 0) return absl::InvalidArgumentError("negative");
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<int>> MakeBox(int value) {
  RETURN_IF_ERROR(FailIfNegative(value));
  return std::make_unique<int>(value);
}

absl::StatusOr<int> DoubleBoxed(int value) {
  ASSIGN_OR_RETURN(std::unique_ptr<int> box, MakeBox(value));
  ASSIGN_OR_RETURN(auto second, MakeBox(*box * 2));
  return *second;
}

TEST(StatusMacrosTest, AssignOrReturnMovesMoveOnlyValues) {
  absl::StatusOr<int> result = DoubleBoxed(21);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(*result, 42);
}

TEST(StatusMacrosTest, ErrorsPropagateUnchanged) {
  absl::StatusOr<int> result = DoubleBoxed(-1);
  EXPECT_EQ(result.status(), absl::InvalidArgumentError("negative"));
}

}  // namespace
}  // namespace chimera
