// Strict YAML helpers: file/line-aware errors for every dtsim schema.
#include "common/yaml_util.hpp"

#include <fmt/format.h>
#include <yaml-cpp/eventhandler.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "common/errors.hpp"
#include "common/text.hpp"

namespace dtsim::yaml {

std::string Origin::where(const YAML::Node& node) const {
  const YAML::Mark mark = node.Mark();
  if (mark.line < 0) return file;
  return fmt::format("{}:{}", file, mark.line + 1);
}

namespace {

// Bounds on what one YAML document may expand to. Aliases let a few hundred bytes stand for
// billions of nodes ("billion laughs") and an anchor may even refer to itself; every consumer
// walks the tree (canonical text, key checks), so the reader refuses such documents up front.
constexpr int kMaxDepth = 64;                           // nesting of maps/sequences, aliases expanded
constexpr std::uint64_t kMaxExpandedNodes = 1'000'000;  // nodes after expanding every alias

// Watches the parser's events before the tree is built: alias cycles, expansion size, depth and
// duplicate map keys, each refused with the line where it happens.
class Guard : public YAML::EventHandler {
 public:
  explicit Guard(std::string label) : label_(std::move(label)) {}

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override { leaf(mark, anchor, "~"); }
  void OnScalar(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                const std::string& value) override {
    leaf(mark, anchor, value);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    for (const auto& f : stack_)
      if (f.anchor == anchor && anchor != YAML::NullAnchor)
        refuse(mark, "an alias refers to the node that contains it (recursive alias)");
    const auto id = static_cast<std::size_t>(anchor);  // anchor_t is signed in some yaml-cpp releases
    const Extent e = id < extents_.size() ? extents_[id] : Extent{1, 0};
    begin(mark, nullptr);
    add_nodes(mark, e.nodes);
    check_depth(mark, static_cast<int>(stack_.size()) + e.height);
    end_node(e.height);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(mark, anchor, false);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(mark, anchor, true);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Extent {
    std::uint64_t nodes = 1;
    int height = 0;  // levels of collections below and including this node
  };
  struct Frame {
    bool is_map = false;
    YAML::anchor_t anchor = YAML::NullAnchor;
    std::uint64_t nodes_before = 0;
    int height = 0;
    bool expect_key = true;
    std::map<std::string, int> keys;  // key -> 1-based line of its first appearance
  };

  [[noreturn]] void refuse(const YAML::Mark& mark, std::string_view what) const {
    throw InputError(fmt::format("{}:{}: {}", label_, mark.line + 1, what));
  }
  // A node starts: if it is a key of the enclosing map, it must not repeat an earlier key.
  void begin(const YAML::Mark& mark, const std::string* scalar) {
    if (stack_.empty() || !stack_.back().is_map || !stack_.back().expect_key || scalar == nullptr) return;
    const auto [it, fresh] = stack_.back().keys.emplace(*scalar, mark.line + 1);
    if (!fresh)
      refuse(mark, fmt::format("duplicate key '{}' (first at line {})", printable(*scalar), it->second));
  }
  // A node is complete: the enclosing map alternates key, value; the enclosing node grows.
  void end_node(int height) {
    if (stack_.empty()) return;
    Frame& parent = stack_.back();
    if (parent.is_map) parent.expect_key = !parent.expect_key;
    parent.height = std::max(parent.height, height);
  }
  void add_nodes(const YAML::Mark& mark, std::uint64_t n) {
    nodes_ += n;
    if (nodes_ > kMaxExpandedNodes)
      refuse(mark, fmt::format("aliases expand the document past {} nodes (alias bomb?)", kMaxExpandedNodes));
  }
  void check_depth(const YAML::Mark& mark, int depth) const {
    if (depth > kMaxDepth) refuse(mark, fmt::format("nesting deeper than {} levels", kMaxDepth));
  }
  void record(YAML::anchor_t anchor, Extent e) {
    if (anchor == YAML::NullAnchor) return;
    const auto id = static_cast<std::size_t>(anchor);
    if (extents_.size() <= id) extents_.resize(id + 1);
    extents_[id] = e;
  }
  void leaf(const YAML::Mark& mark, YAML::anchor_t anchor, const std::string& value) {
    begin(mark, &value);
    add_nodes(mark, 1);
    record(anchor, Extent{1, 0});
    end_node(0);
  }
  void open(const YAML::Mark& mark, YAML::anchor_t anchor, bool is_map) {
    begin(mark, nullptr);
    add_nodes(mark, 1);
    stack_.push_back(Frame{is_map, anchor, nodes_ - 1, 0, true, {}});
    check_depth(mark, static_cast<int>(stack_.size()));
  }
  void close() {
    const Frame f = std::move(stack_.back());
    stack_.pop_back();
    const Extent e{nodes_ - f.nodes_before, f.height + 1};
    record(f.anchor, e);
    end_node(e.height);
  }

  std::string label_;
  std::vector<Frame> stack_;
  std::vector<Extent> extents_;  // by anchor id, set when the anchored node is complete
  std::uint64_t nodes_ = 0;
};

// YAML text is UTF-8 (YAML 1.2, 5.2); a stray byte would later break JSON output of a name.
// Returns the offset of the first byte that does not start or continue a valid sequence, or npos.
std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    // Sequence length from the lead byte's high bits, and the code point bits it carries.
    const std::size_t len = c < 0x80             ? 1
                            : (c & 0xE0) == 0xC0 ? 2
                            : (c & 0xF0) == 0xE0 ? 3
                            : (c & 0xF8) == 0xF0 ? 4
                                                 : 0;
    if (len == 0) return i;
    std::uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
    if (i + len > text.size()) return i;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const bool overlong = (len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
    if (overlong || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

YAML::Node load_string(const std::string& text, const std::string& label) {
  if (const std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(bad), '\n');
    throw InputError(fmt::format("{}:{}: invalid UTF-8 byte 0x{:02x} (YAML files are UTF-8 text)", label,
                                 line, static_cast<unsigned char>(text[bad])));
  }
  try {
    std::istringstream events(text);
    YAML::Parser parser(events);
    Guard guard(label);
    parser.HandleNextDocument(guard);
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw InputError(fmt::format("{}:{}: malformed YAML: {}", label, e.mark.line + 1, printable(e.msg)));
  }
}

YAML::Node load_file(const std::string& path) {
  std::error_code ec;  // the throwing overload reports "File name too long" as a raw library error
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(fmt::format("{}: no such file", printable(path)));
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) throw InputError(fmt::format("{}: cannot be read", path));
  return load_string(text.str(), path);
}

namespace {
template <class Keys>
void check_keys_impl(const YAML::Node& node, const Keys& allowed, const Origin& origin,
                     std::string_view context) {
  if (!node.IsMap()) fail(node, origin, context, "expected a map of fields");
  for (const auto& item : node) {
    const std::string key = item.first.Scalar();
    bool ok = false;
    for (const auto& a : allowed) ok = ok || key == a;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      fail(item.first, origin, context, fmt::format("unknown key '{}' (allowed: {})", printable(key), list));
    }
  }
}
}  // namespace

void check_keys(const YAML::Node& node, std::initializer_list<std::string_view> allowed, const Origin& origin,
                std::string_view context) {
  check_keys_impl(node, allowed, origin, context);
}

void check_keys(const YAML::Node& node, const std::vector<std::string>& allowed, const Origin& origin,
                std::string_view context) {
  check_keys_impl(node, allowed, origin, context);
}

double require_positive(double value, const YAML::Node& at, std::string_view key, const Origin& origin,
                        std::string_view context) {
  if (!(value > 0)) fail(at, origin, context, fmt::format("field '{}' must be > 0, got {}", key, value));
  return value;
}

double require_non_negative(double value, const YAML::Node& at, std::string_view key, const Origin& origin,
                            std::string_view context) {
  if (!(value >= 0)) fail(at, origin, context, fmt::format("field '{}' must be >= 0, got {}", key, value));
  return value;
}

void fail(const YAML::Node& at, const Origin& origin, std::string_view context, std::string_view message) {
  if (context.empty()) throw InputError(fmt::format("{}: {}", origin.where(at), message));
  throw InputError(fmt::format("{}: {}: {}", origin.where(at), context, message));
}

}  // namespace dtsim::yaml
