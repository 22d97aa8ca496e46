// A Megatron-LM dataset index (`spec.data.format: megatron`, its .idx):
// parsing any bytes, and for a valid index, checking data files of the
// size it describes and of sizes around it.
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/megatron_index.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const absl::StatusOr<chimera::MegatronIndex> index =
      chimera::ParseMegatronIndex(bytes);
  if (!index.ok()) return 0;
  const uint64_t described = index->tokens * index->token_bytes;
  for (const uint64_t data_bytes : {described, described + 1, uint64_t{0}}) {
    const bool matches = chimera::CheckMegatronData(*index, data_bytes).ok();
    if (matches != (data_bytes == described)) __builtin_trap();
  }
  return 0;
}
