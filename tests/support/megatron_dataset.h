// Writes Megatron-LM indexed datasets (PREFIX.bin + PREFIX.idx) for tests,
// byte by byte as the layout in common/megatron_index.h documents it, so
// that the reader is tested against the format and not against itself.
//
//   MegatronDataset dataset{.documents = {{1, 2, 3}, {4, 5}}};
//   dataset.Write(dir.path() + "/corpus");  // corpus.bin, corpus.idx
#ifndef CHIMERA_TESTS_SUPPORT_MEGATRON_DATASET_H_
#define CHIMERA_TESTS_SUPPORT_MEGATRON_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

namespace chimera::testing {

struct MegatronDataset {
  // Each document is one sequence of token ids.
  std::vector<std::vector<int64_t>> documents;
  // Megatron's dtype code: 8 uint16 (its choice below 65,500 ids), 4 int32
  // (above), 1 uint8, 2 int8, 3 int16, 5 int64.
  uint8_t dtype_code = 8;

  // The .idx file's bytes.
  std::string IndexBytes() const;
  // The .bin file's bytes.
  std::string DataBytes() const;
  // Writes PREFIX.idx and PREFIX.bin.
  void Write(const std::string& prefix) const;
};

// Appends `value`'s low `width` bytes, little-endian.
void AppendLittleEndian(std::string& out, uint64_t value, int width);

}  // namespace chimera::testing

#endif  // CHIMERA_TESTS_SUPPORT_MEGATRON_DATASET_H_
