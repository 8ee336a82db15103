// yaml_file.cpp — yaml-cpp plus the merge keys it does not apply itself.
#include "yaml_file.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace compose_test {
namespace {

[[noreturn]] void fail(const std::string& where, const YAML::Mark& mark, const std::string& what) {
  std::ostringstream message;
  message << where;
  if (!mark.is_null()) message << ": line " << mark.line + 1 << ", column " << mark.column + 1;
  message << ": " << what;
  throw std::runtime_error(message.str());
}

// A merge key is the plain scalar <<; a quoted "<<" is an ordinary key.
bool is_merge_key(const YAML::Node& key) {
  return key.IsScalar() && key.Tag() == "?" && key.Scalar() == "<<";
}

// Copies a parsed document with every merge key applied. Aliases share one
// node in yaml-cpp, so the copy is built fresh rather than edited in place;
// `open` holds the collections being copied, to refuse an alias that
// contains itself (`&a [*a]`) instead of recursing forever.
class MergeResolver {
 public:
  explicit MergeResolver(std::string where) : where_(std::move(where)) {}

  YAML::Node resolve(const YAML::Node& node) {
    if (!node.IsMap() && !node.IsSequence()) return node;
    for (const auto& ancestor : open_) {
      if (ancestor.is(node)) fail(where_, node.Mark(), "an alias refers to a collection that contains it");
    }
    open_.push_back(node);
    YAML::Node copy = node.IsMap() ? resolve_map(node) : YAML::Node(YAML::NodeType::Sequence);
    if (node.IsSequence()) {
      for (const auto& item : node) copy.push_back(resolve(item));
    }
    open_.pop_back();
    return copy;
  }

 private:
  YAML::Node resolve_map(const YAML::Node& map) {
    std::set<std::string> own;  // this mapping's keys, which merged ones never replace
    for (const auto& entry : map) {
      if (!entry.first.IsScalar()) fail(where_, entry.first.Mark(), "a key must be a scalar");
      if (!own.insert(entry.first.Scalar()).second) {
        fail(where_, entry.first.Mark(), "duplicate key '" + entry.first.Scalar() + "'");
      }
    }
    YAML::Node copy(YAML::NodeType::Map);
    std::set<std::string> placed;
    for (const auto& entry : map) {
      if (!is_merge_key(entry.first)) {
        copy[entry.first.Scalar()] = resolve(entry.second);
        placed.insert(entry.first.Scalar());
        continue;
      }
      std::vector<YAML::Node> sources;
      if (entry.second.IsMap()) {
        sources.push_back(entry.second);
      } else if (entry.second.IsSequence()) {
        for (const auto& item : entry.second) sources.push_back(item);
      }
      // Errors point at the << itself: an alias's mark is its anchor's.
      const auto not_mappings = [&] { fail(where_, entry.first.Mark(), "<< needs a mapping or a list of mappings"); };
      if (sources.empty()) not_mappings();
      for (const auto& source : sources) {
        if (!source.IsMap()) not_mappings();
        for (const auto& merged : resolve(source)) {
          const std::string key = merged.first.Scalar();
          if (own.count(key) == 0 && placed.insert(key).second) copy[key] = merged.second;
        }
      }
    }
    return copy;
  }

  std::string where_;
  std::vector<YAML::Node> open_;
};

}  // namespace

YAML::Node load_yaml(const std::string& text, const std::string& where) {
  YAML::Node document;
  try {
    document = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    fail(where, e.mark, e.msg);
  }
  return MergeResolver(where).resolve(document);
}

YAML::Node load_yaml_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) fail(path, YAML::Mark::null_mark(), "cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return load_yaml(text.str(), path);
}

}  // namespace compose_test
