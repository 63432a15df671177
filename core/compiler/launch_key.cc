#include "core/compiler/launch_key.h"

namespace mixrt::compiler {
namespace {

void AppendInt(std::string* key, int64_t v) {
  key->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void AppendLayout(std::string* key, const ValueRef& v) {
  AppendInt(key, v.offset);
  AppendInt(key, static_cast<int64_t>(v.dtype));
  AppendInt(key, static_cast<int64_t>(v.shape.size()));
  for (int64_t d : v.shape) AppendInt(key, d);
  for (int64_t d : v.strides) AppendInt(key, d);
}

}  // namespace

bool WholeSlot(const Graph& g, const ValueRef& v) {
  if (v.offset != 0) return false;
  int64_t expected = 1;
  for (int d = static_cast<int>(v.shape.size()) - 1; d >= 0; --d) {
    if (v.shape[d] != 1 && v.strides[d] != expected) return false;
    expected *= v.shape[d];
  }
  return static_cast<uint64_t>(expected) * DTypeSize(v.dtype) ==
         g.slots[v.slot].bytes;
}

std::string LaunchKey(const Graph& g, const GraphNode& n,
                      absl::FunctionRef<int64_t(int)> slot_id) {
  std::string key;
  AppendInt(&key, n.op);
  AppendInt(&key, static_cast<int64_t>(n.attrs.size()));
  key.append(n.attrs.begin(), n.attrs.end());
  // Random launches repeat one another only on the same numbers.
  AppendInt(&key, n.random_source);
  AppendInt(&key, n.random_offset);
  AppendInt(&key, static_cast<int64_t>(n.inputs.size()));
  for (const ValueRef& v : n.inputs) {
    AppendInt(&key, slot_id(v.slot));
    AppendLayout(&key, v);
  }
  for (const ValueRef& v : n.outputs) {
    AppendLayout(&key, v);
    AppendInt(&key, static_cast<int64_t>(g.slots[v.slot].bytes));
  }
  return key;
}

}  // namespace mixrt::compiler
