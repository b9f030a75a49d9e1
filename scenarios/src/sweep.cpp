// Sweep expansion: the `sweep:` block parsed into axes, then crossed/zipped into edited copies of the
// scenario node, each with a canonical key and a stable id.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "common/errors.hpp"
#include "common/text.hpp"
#include "scenarios/sweep.hpp"

namespace dtsim::scenarios {
namespace {

constexpr std::size_t MAX_POINTS = 1000000;  // guards against an accidental combinatorial explosion

SweepAxis parse_axis(const YAML::Node& key, const YAML::Node& values, const yaml::Origin& origin,
                     std::string_view context) {
  SweepAxis axis;
  axis.field = key.Scalar();
  if (axis.field.empty() || axis.field.front() == '.' || axis.field.back() == '.' ||
      axis.field.find("..") != std::string::npos)
    yaml::fail(key, origin, context, fmt::format("field '{}' is not a dotted field path", axis.field));
  if (axis.field == "sweep") yaml::fail(key, origin, context, "the sweep block cannot sweep itself");
  if (!values.IsSequence() || values.size() == 0)
    yaml::fail(values, origin, context,
               fmt::format("field '{}' must be a non-empty list of values, e.g. [1, 2, 4]", axis.field));
  for (const auto& v : values) axis.values.push_back(YAML::Clone(v));
  return axis;
}

std::vector<SweepAxis> parse_axis_map(const YAML::Node& map, const yaml::Origin& origin, std::string_view context) {
  if (!map.IsMap() || map.size() == 0)
    yaml::fail(map, origin, context, "expected a map of field: [values]");
  std::vector<SweepAxis> axes;
  for (const auto& item : map) axes.push_back(parse_axis(item.first, item.second, origin, context));
  return axes;
}

void emit_canonical(const YAML::Node& node, std::string& out) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      out += "~";
      return;
    case YAML::NodeType::Scalar:
      out += node.Scalar();
      return;
    case YAML::NodeType::Sequence: {
      out += '[';
      bool first = true;
      for (const auto& v : node) {
        if (!first) out += ',';
        first = false;
        emit_canonical(v, out);
      }
      out += ']';
      return;
    }
    case YAML::NodeType::Map: {
      // Emit children to text before sorting: assigning YAML::Node values would edit the tree.
      std::vector<std::pair<std::string, std::string>> items;
      for (const auto& kv : node) {
        std::string child;
        emit_canonical(kv.second, child);
        items.emplace_back(kv.first.Scalar(), std::move(child));
      }
      std::sort(items.begin(), items.end());
      out += '{';
      bool first = true;
      for (const auto& [k, v] : items) {
        if (!first) out += ',';
        first = false;
        out += k;
        out += ':';
        out += v;
      }
      out += '}';
      return;
    }
  }
}

std::vector<std::string> split_path(const std::string& field) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = field.find('.', start);
    parts.push_back(field.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

// Sets `field` (dotted path) of `root` to a copy of `value`, creating intermediate maps.
void set_field(YAML::Node root, const std::string& field, const YAML::Node& value, const yaml::Origin& origin) {
  const auto parts = split_path(field);
  YAML::Node cur = root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node next = cur[parts[i]];
    if (!next.IsDefined() || next.IsNull()) {
      cur[parts[i]] = YAML::Node(YAML::NodeType::Map);
      next.reset(cur[parts[i]]);
    } else if (!next.IsMap()) {
      throw InputError(fmt::format("{}: sweep field '{}': '{}' is not a map in the scenario", origin.file, field,
                                   parts[i]));
    }
    cur.reset(next);
  }
  cur[parts.back()] = YAML::Clone(value);
}

}  // namespace

SweepSpec parse_sweep(const YAML::Node& sweep, const yaml::Origin& origin) {
  SweepSpec spec;
  if (!sweep.IsDefined() || sweep.IsNull()) return spec;
  yaml::check_keys(sweep, {"product", "zip"}, origin, "sweep");
  if (sweep["product"]) spec.product = parse_axis_map(sweep["product"], origin, "sweep.product");
  if (const YAML::Node zip = sweep["zip"]) {
    std::vector<YAML::Node> groups;
    if (zip.IsMap()) {
      groups.push_back(zip);
    } else if (zip.IsSequence() && zip.size() > 0) {
      for (const auto& g : zip) groups.push_back(g);
    } else {
      yaml::fail(zip, origin, "sweep.zip", "expected a map of field: [values], or a list of such maps");
    }
    for (const auto& g : groups) {
      auto axes = parse_axis_map(g, origin, "sweep.zip");
      for (const auto& a : axes)
        if (a.values.size() != axes.front().values.size())
          yaml::fail(g, origin, "sweep.zip",
                     fmt::format("zipped lists must have equal lengths: '{}' has {}, '{}' has {}",
                                 axes.front().field, axes.front().values.size(), a.field, a.values.size()));
      spec.zips.push_back(std::move(axes));
    }
  }
  if (spec.empty()) yaml::fail(sweep, origin, "sweep", "needs 'product' and/or 'zip'");
  std::vector<std::string> fields;
  for (const auto& a : spec.product) fields.push_back(a.field);
  for (const auto& g : spec.zips)
    for (const auto& a : g) fields.push_back(a.field);
  for (std::size_t i = 0; i < fields.size(); ++i)
    for (std::size_t j = i + 1; j < fields.size(); ++j)
      if (fields[i] == fields[j])
        yaml::fail(sweep, origin, "sweep", fmt::format("field '{}' is swept twice", fields[i]));
  return spec;
}

std::string canonical_text(const YAML::Node& node) {
  std::string out;
  emit_canonical(node, out);
  return out;
}

std::vector<SweepPoint> expand_sweep(const YAML::Node& scenario, const SweepSpec& spec,
                                     const yaml::Origin& origin) {
  if (!scenario.IsMap()) throw InputError(fmt::format("{}: a scenario must be a map of fields", origin.file));
  // Dimensions: each product axis, then each zip group.
  std::vector<std::size_t> sizes;
  for (const auto& a : spec.product) sizes.push_back(a.values.size());
  for (const auto& g : spec.zips) sizes.push_back(g.front().values.size());
  std::size_t total = 1;
  for (std::size_t s : sizes) {
    if (total > MAX_POINTS / s)
      throw InputError(fmt::format("{}: sweep: more than {} points; split the sweep", origin.file, MAX_POINTS));
    total *= s;
  }
  std::vector<SweepPoint> points;
  points.reserve(total);
  std::vector<std::size_t> idx(sizes.size(), 0);
  for (std::size_t n = 0; n < total; ++n) {
    SweepPoint p;
    p.index = n;
    p.node = YAML::Clone(scenario);
    p.node.remove("sweep");
    auto assign = [&](const SweepAxis& axis, std::size_t i) {
      set_field(p.node, axis.field, axis.values[i], origin);
      p.assignments.emplace_back(axis.field, canonical_text(axis.values[i]));
    };
    std::size_t d = 0;
    for (const auto& a : spec.product) assign(a, idx[d++]);
    for (const auto& g : spec.zips) {
      for (const auto& a : g) assign(a, idx[d]);
      ++d;
    }
    for (const auto& [f, v] : p.assignments) p.key += (p.key.empty() ? "" : ";") + f + "=" + v;
    if (p.key.empty()) p.key = "base";
    p.id = fnv1a64_hex(canonical_text(p.node));
    points.push_back(std::move(p));
    // Odometer: the last dimension varies fastest.
    for (std::size_t k = sizes.size(); k-- > 0;) {
      if (++idx[k] < sizes[k]) break;
      idx[k] = 0;
    }
  }
  return points;
}

}  // namespace dtsim::scenarios
