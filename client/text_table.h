// A table for the terminal whose columns are as wide as their widest cell,
// so that no value, however long, pushes the columns out of line.
//
//   TextTable table({{"rank"}, {"W", TextTable::kRight}});
//   table.AddRow({"1", "8"});
//   std::cout << table.ToString();
#ifndef CHIMERA_CLIENT_TEXT_TABLE_H_
#define CHIMERA_CLIENT_TEXT_TABLE_H_

#include <string>
#include <vector>

namespace chimera::client {

class TextTable {
 public:
  enum Alignment { kLeft, kRight };
  struct Column {
    std::string header;
    Alignment alignment = kLeft;
  };

  explicit TextTable(std::vector<Column> columns);

  // `cells` must have one cell per column.
  void AddRow(std::vector<std::string> cells);

  // The header and the rows, columns two spaces apart, each line ending in
  // a newline and carrying no trailing spaces.
  std::string ToString() const;

 private:
  std::vector<Column> columns_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace chimera::client

#endif  // CHIMERA_CLIENT_TEXT_TABLE_H_
