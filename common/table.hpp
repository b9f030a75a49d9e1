// Tabular output shared by every subcommand: aligned text table or CSV from one row model.
#pragma once
#include <ostream>
#include <string>
#include <vector>

namespace dtsim {

enum class TextFormat { TABLE, CSV, JSON };

// Parses "table", "csv" or "json"; throws InputError naming the flag otherwise.
TextFormat parse_text_format(const std::string& value, const std::string& flag = "--format");

class Table {
 public:
  explicit Table(std::vector<std::string> header);
  void add_row(std::vector<std::string> cells);  // must have as many cells as the header
  void print(std::ostream& out, TextFormat format) const;  // TABLE or CSV (JSON is the caller's)
  const std::vector<std::string>& header() const { return header_; }
  const std::vector<std::vector<std::string>>& rows() const { return rows_; }

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace dtsim
