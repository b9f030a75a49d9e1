// Golden scenario check: runs `dtsim sweep` on one shipped scenario into a fresh directory and
// compares its results.csv with the golden CSV kept beside this file, column by column (predicted
// figures within a float tolerance; host time and simulation cost columns are never compared).
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

constexpr double RELATIVE_TOLERANCE = 1e-6;  // float noise across compilers and libm versions
constexpr double ABSOLUTE_TOLERANCE = 1e-9;  // figures that should be 0 but come out as 1e-17

// Columns that are not predictions: host time (wall_s) and the cost of the prediction (activities,
// which a faster simulation of the same model changes). Dropped from goldens, never compared.
bool is_uncompared_column(const std::string& name) {
  return name == "wall_s" || name.rfind("wall_", 0) == 0 || name == "activities";
}

using Row = std::vector<std::string>;

struct Table {
  Row header;
  std::vector<Row> rows;
};

// Splits one CSV record (RFC 4180 quoting; the sweep writes no embedded newlines).
Row parse_csv_line(const std::string& line) {
  Row cells;
  std::string cell;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        cell += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        cell += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      cells.push_back(cell);
      cell.clear();
    } else if (c != '\r') {
      cell += c;
    }
  }
  cells.push_back(cell);
  return cells;
}

std::optional<Table> read_csv(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  Table t;
  std::string line;
  bool first = true;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (first) {
      t.header = parse_csv_line(line);
      first = false;
    } else {
      t.rows.push_back(parse_csv_line(line));
    }
  }
  if (first) return std::nullopt;
  return t;
}

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

// The table without its uncompared columns.
Table simulated_columns(const Table& t) {
  std::vector<std::size_t> keep;
  for (std::size_t i = 0; i < t.header.size(); ++i)
    if (!is_uncompared_column(t.header[i])) keep.push_back(i);
  Table out;
  for (std::size_t i : keep) out.header.push_back(t.header[i]);
  for (const auto& r : t.rows) {
    Row row;
    for (std::size_t i : keep) row.push_back(i < r.size() ? r[i] : "");
    out.rows.push_back(std::move(row));
  }
  return out;
}

void write_csv(const fs::path& path, const Table& t) {
  std::ofstream out(path);
  auto line = [&](const Row& r) {
    for (std::size_t i = 0; i < r.size(); ++i) out << (i ? "," : "") << csv_cell(r[i]);
    out << '\n';
  };
  line(t.header);
  for (const auto& r : t.rows) line(r);
}

std::optional<double> as_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

bool cells_match(const std::string& expected, const std::string& got) {
  if (expected == got) return true;
  const auto e = as_number(expected), g = as_number(got);
  if (!e || !g) return false;
  return std::fabs(*e - *g) <= RELATIVE_TOLERANCE * std::max(std::fabs(*e), std::fabs(*g)) + ABSOLUTE_TOLERANCE;
}

// Prints every difference (scenario, row, column, expected, got); returns the number found.
int compare(const std::string& scenario, const Table& golden, const Table& got) {
  int mismatches = 0;
  auto report = [&](const std::string& what) {
    std::cerr << scenario << ": " << what << '\n';
    ++mismatches;
  };
  std::map<std::string, std::size_t> got_column;
  for (std::size_t i = 0; i < got.header.size(); ++i) got_column.emplace(got.header[i], i);
  std::set<std::string> golden_names(golden.header.begin(), golden.header.end());
  for (const auto& name : got.header)
    if (golden_names.count(name) == 0)
      report("column '" + name + "' is new (not in the golden file); accept it with scripts/update-goldens.sh");
  for (const auto& name : golden.header)
    if (got_column.count(name) == 0) report("column '" + name + "' is missing from the sweep output");
  if (golden.rows.size() != got.rows.size())
    report("expected " + std::to_string(golden.rows.size()) + " rows, got " + std::to_string(got.rows.size()));
  const std::size_t rows = std::min(golden.rows.size(), got.rows.size());
  for (std::size_t r = 0; r < rows; ++r) {
    const Row& e = golden.rows[r];
    const Row& g = got.rows[r];
    const std::string key = e.size() > 1 ? e[1] : "";
    for (std::size_t c = 0; c < golden.header.size(); ++c) {
      const auto it = got_column.find(golden.header[c]);
      if (it == got_column.end()) continue;
      const std::string expected = c < e.size() ? e[c] : "";
      const std::string actual = it->second < g.size() ? g[it->second] : "";
      if (!cells_match(expected, actual))
        report("row " + std::to_string(r + 1) + " (key " + key + "), column '" + golden.header[c] + "': expected " +
               (expected.empty() ? "(empty)" : expected) + ", got " + (actual.empty() ? "(empty)" : actual));
    }
  }
  return mismatches;
}

int run_sweep(const std::string& dtsim, const fs::path& scenario, const fs::path& out_dir, const std::string& jobs) {
  std::cout.flush();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    const std::string scenario_arg = scenario.string(), out_arg = out_dir.string();
    std::vector<const char*> argv = {dtsim.c_str(), "sweep", scenario_arg.c_str(), "--out", out_arg.c_str(),
                                     "--quiet", "--jobs", jobs.c_str(), nullptr};
    ::execv(dtsim.c_str(), const_cast<char* const*>(argv.data()));
    std::perror(dtsim.c_str());
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int usage() {
  std::cerr << "usage: golden_check --dtsim BIN --scenario FILE.yaml --golden FILE.csv --work DIR [--jobs N] "
               "[--update]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string dtsim, scenario, golden_path, work, jobs = "1";
  bool update = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](std::string& dst) {
      if (i + 1 >= argc) return false;
      dst = argv[++i];
      return true;
    };
    if (a == "--update") {
      update = true;
    } else if (!((a == "--dtsim" && value(dtsim)) || (a == "--scenario" && value(scenario)) ||
                 (a == "--golden" && value(golden_path)) || (a == "--work" && value(work)) ||
                 (a == "--jobs" && value(jobs)))) {
      return usage();
    }
  }
  if (dtsim.empty() || scenario.empty() || golden_path.empty() || work.empty()) return usage();
  const std::string name = fs::path(scenario).stem().string();

  // A sweep resumes from what its --out holds: start empty so every point is simulated now.
  std::error_code ec;
  fs::remove_all(work, ec);
  const int rc = run_sweep(dtsim, scenario, work, jobs);
  if (rc != 0) {
    std::cerr << name << ": dtsim sweep exited with " << rc << '\n';
    return 1;
  }
  const auto produced = read_csv(fs::path(work) / "results.csv");
  if (!produced) {
    std::cerr << name << ": the sweep wrote no results.csv in " << work << '\n';
    return 1;
  }
  Table got = simulated_columns(*produced);
  // Paths in messages and labels are written relative to the checkout, wherever it lives.
  const std::string root = fs::absolute(scenario).lexically_normal().parent_path().parent_path().string() + "/";
  for (auto& row : got.rows)
    for (auto& cell : row)
      for (std::size_t at = cell.find(root); at != std::string::npos; at = cell.find(root, at)) cell.erase(at, root.size());
  if (update) {
    write_csv(golden_path, got);
    std::cout << name << ": wrote " << golden_path << " (" << got.rows.size() << " rows)\n";
    return 0;
  }
  const auto golden = read_csv(golden_path);
  if (!golden) {
    std::cerr << name << ": cannot read the golden file " << golden_path << " (make it with scripts/update-goldens.sh)\n";
    return 1;
  }
  const int mismatches = compare(name, simulated_columns(*golden), got);
  if (mismatches > 0) {
    std::cerr << name << ": " << mismatches << " difference(s) from " << golden_path << '\n';
    return 1;
  }
  std::cout << name << ": " << got.rows.size() << " rows match " << golden_path << '\n';
  return 0;
}
