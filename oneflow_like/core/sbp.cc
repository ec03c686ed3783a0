#include "oneflow_like/core/sbp.h"

#include <algorithm>
#include <limits>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "glog/logging.h"

namespace oneflow_like {
namespace {

absl::string_view Strip(absl::string_view s) { return absl::StripAsciiWhitespace(s); }

// The bracket that closes `open`, or 0.
char ClosingBracket(char open) {
  if (open == '(') return ')';
  if (open == '[') return ']';
  return 0;
}

// Splits `s` at commas that are not nested inside brackets. Fails on unbalanced brackets.
absl::StatusOr<std::vector<absl::string_view>> SplitTopLevel(absl::string_view s, absl::string_view whole,
                                                             absl::string_view what) {
  std::vector<absl::string_view> parts;
  std::vector<char> stack;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '(' || c == '[') {
      stack.push_back(ClosingBracket(c));
    } else if (c == ')' || c == ']') {
      if (stack.empty() || stack.back() != c) {
        return absl::InvalidArgumentError(
            absl::StrCat("unbalanced brackets in ", what, " '", whole, "': unexpected '", std::string(1, c), "'"));
      }
      stack.pop_back();
    } else if (c == ',' && stack.empty()) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (!stack.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unbalanced brackets in ", what, " '", whole, "': missing '", std::string(1, stack.back()), "'"));
  }
  parts.push_back(s.substr(start));
  return parts;
}

// If `s` is wholly enclosed by one matching pair of brackets ("(...)" or "[...]"), returns the
// inside; otherwise returns `s` unchanged.
absl::string_view StripEnclosingBrackets(absl::string_view s) {
  if (s.empty()) return s;
  char close = ClosingBracket(s.front());
  if (close == 0 || s.back() != close) return s;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(' || s[i] == '[') ++depth;
    if (s[i] == ')' || s[i] == ']') --depth;
    if (depth == 0 && i + 1 < s.size()) return s;  // the first bracket closes early: "(A), (B)"
  }
  return s.substr(1, s.size() - 2);
}

absl::StatusOr<DeviceType> ParseDeviceType(absl::string_view name, absl::string_view whole) {
  if (name == "cpu") return DeviceType::kCpu;
  if (name == "cuda") return DeviceType::kCuda;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device type '", name, "' in placement '", whole, "' (expected cpu or cuda)"));
}

absl::StatusOr<Rank> ParseRank(absl::string_view text, absl::string_view whole) {
  int64_t v;
  absl::string_view t = Strip(text);
  if (!absl::SimpleAtoi(t, &v)) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement '", whole, "': rank '", t, "' is not an integer"));
  }
  if (v < 0 || v > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("placement '", whole, "': rank ", v, " is out of range (ranks are >= 0)"));
  }
  return Rank(static_cast<int32_t>(v));
}

// A parsed nested rank list: a leaf rank or a list of nodes.
struct RankNode {
  bool is_leaf = false;
  Rank rank;
  std::vector<RankNode> children;
};

absl::StatusOr<RankNode> ParseRankNode(absl::string_view text, absl::string_view whole) {
  absl::string_view s = Strip(text);
  RankNode node;
  if (s.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("placement '", whole, "': empty entry in a rank list"));
  }
  if (s.front() != '[') {
    node.is_leaf = true;
    ASSIGN_OR_RETURN(node.rank, ParseRank(s, whole));
    return node;
  }
  if (s.back() != ']' || StripEnclosingBrackets(s).size() + 2 != s.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unbalanced brackets in placement '", whole, "' near '", s, "'"));
  }
  absl::string_view inner = Strip(s.substr(1, s.size() - 2));
  if (inner.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("placement '", whole, "': empty rank list '", s, "'"));
  }
  ASSIGN_OR_RETURN(std::vector<absl::string_view> parts, SplitTopLevel(inner, whole, "placement"));
  for (absl::string_view part : parts) {
    ASSIGN_OR_RETURN(RankNode child, ParseRankNode(part, whole));
    node.children.push_back(std::move(child));
  }
  return node;
}

// Flattens `node` (at `depth`) into ranks, checking that it matches `hierarchy`.
absl::Status FlattenRankNode(const RankNode& node, size_t depth, const std::vector<int64_t>& hierarchy,
                             absl::string_view whole, std::vector<Rank>* ranks) {
  if (depth == hierarchy.size()) {
    if (!node.is_leaf) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ragged rank hierarchy in placement '", whole, "': expected a rank at depth ", depth, ", found a list"));
    }
    ranks->push_back(node.rank);
    return absl::OkStatus();
  }
  if (node.is_leaf || static_cast<int64_t>(node.children.size()) != hierarchy[depth]) {
    return absl::InvalidArgumentError(absl::StrCat("ragged rank hierarchy in placement '", whole,
                                                   "': every list at depth ", depth, " must have ",
                                                   hierarchy[depth], " entries (mesh ",
                                                   absl::StrJoin(hierarchy, "x"), ")"));
  }
  for (const RankNode& child : node.children) {
    RETURN_IF_ERROR(FlattenRankNode(child, depth + 1, hierarchy, whole, ranks));
  }
  return absl::OkStatus();
}

void AppendNested(const std::vector<Rank>& ranks, const std::vector<int64_t>& hierarchy, size_t depth,
                  int64_t* next, std::string* out) {
  if (depth == hierarchy.size()) {
    absl::StrAppend(out, ranks[(*next)++].value());
    return;
  }
  out->push_back('[');
  for (int64_t i = 0; i < hierarchy[depth]; ++i) {
    if (i > 0) out->push_back(',');
    AppendNested(ranks, hierarchy, depth + 1, next, out);
  }
  out->push_back(']');
}

}  // namespace

// ---- Sbp ----

std::string Sbp::ToString() const {
  switch (kind_) {
    case Kind::kSplit: return absl::StrCat("S(", axis_, ")");
    case Kind::kBroadcast: return "B";
    case Kind::kPartialSum: return "P";
  }
  return "?";
}

absl::StatusOr<Sbp> Sbp::Parse(absl::string_view text) {
  absl::string_view s = Strip(text);
  if (s == "B") return Broadcast();
  if (s == "P") return PartialSum();
  if (s.size() >= 2 && s[0] == 'S' && s[1] == '(') {
    if (s.back() != ')') {
      return absl::InvalidArgumentError(absl::StrCat("unbalanced brackets in SBP '", s, "': missing ')'"));
    }
    absl::string_view inner = Strip(s.substr(2, s.size() - 3));
    int64_t axis;
    if (!absl::SimpleAtoi(inner, &axis)) {
      return absl::InvalidArgumentError(
          absl::StrCat("SBP '", s, "': split axis '", inner, "' is not an integer"));
    }
    if (axis < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "SBP '", s, "': split axis must be >= 0 (negative axes are not allowed in SBP)"));
    }
    if (axis > std::numeric_limits<int32_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("SBP '", s, "': split axis is too large"));
    }
    return Split(static_cast<int>(axis));
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown SBP '", s, "' (expected S(axis), B or P)"));
}

SbpProto Sbp::ToProto() const {
  SbpProto proto;
  switch (kind_) {
    case Kind::kSplit: proto.set_kind(SbpProto::SPLIT); break;
    case Kind::kBroadcast: proto.set_kind(SbpProto::BROADCAST); break;
    case Kind::kPartialSum: proto.set_kind(SbpProto::PARTIAL_SUM); break;
  }
  proto.set_axis(axis_);
  return proto;
}

absl::StatusOr<Sbp> Sbp::FromProto(const SbpProto& proto) {
  switch (proto.kind()) {
    case SbpProto::SPLIT:
      if (proto.axis() < 0) {
        return absl::InvalidArgumentError(absl::StrCat("SbpProto: split axis ", proto.axis(), " must be >= 0"));
      }
      return Split(proto.axis());
    case SbpProto::BROADCAST:
    case SbpProto::PARTIAL_SUM:
      if (proto.axis() != 0) {
        return absl::InvalidArgumentError(absl::StrCat("SbpProto: axis ", proto.axis(), " is set on a ",
                                                       SbpProto::Kind_Name(proto.kind()), " SBP"));
      }
      return proto.kind() == SbpProto::BROADCAST ? Broadcast() : PartialSum();
    default: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("SbpProto: unknown kind ", static_cast<int>(proto.kind())));
}

// ---- NdSbp ----

bool NdSbp::all_broadcast() const {
  return std::all_of(sbps_.begin(), sbps_.end(), [](const Sbp& s) { return s.is_broadcast(); });
}

bool NdSbp::any_partial() const {
  return std::any_of(sbps_.begin(), sbps_.end(), [](const Sbp& s) { return s.is_partial_sum(); });
}

std::string NdSbp::ToString() const {
  return absl::StrCat("(", absl::StrJoin(sbps_, ", ", [](std::string* out, const Sbp& s) {
                        out->append(s.ToString());
                      }),
                      ")");
}

absl::StatusOr<NdSbp> NdSbp::Parse(absl::string_view text) {
  absl::string_view whole = Strip(text);
  // Check bracket balance over the whole text first, so errors quote all of it.
  RETURN_IF_ERROR(SplitTopLevel(whole, whole, "NdSbp").status());
  absl::string_view inner = Strip(StripEnclosingBrackets(whole));
  if (inner.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("empty NdSbp '", whole, "' (expected one SBP per mesh axis, e.g. (S(0), B))"));
  }
  ASSIGN_OR_RETURN(std::vector<absl::string_view> parts, SplitTopLevel(inner, whole, "NdSbp"));
  std::vector<Sbp> sbps;
  for (absl::string_view part : parts) {
    absl::StatusOr<Sbp> sbp = Sbp::Parse(part);
    if (!sbp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("NdSbp '", whole, "': ", sbp.status().message()));
    }
    sbps.push_back(*sbp);
  }
  return NdSbp(std::move(sbps));
}

NdSbpProto NdSbp::ToProto() const {
  NdSbpProto proto;
  for (const Sbp& s : sbps_) *proto.add_sbp() = s.ToProto();
  return proto;
}

absl::StatusOr<NdSbp> NdSbp::FromProto(const NdSbpProto& proto) {
  std::vector<Sbp> sbps;
  for (const SbpProto& p : proto.sbp()) {
    ASSIGN_OR_RETURN(Sbp s, Sbp::FromProto(p));
    sbps.push_back(s);
  }
  return NdSbp(std::move(sbps));
}

// ---- Placement ----

std::string DeviceTypeName(DeviceType t) {
  switch (t) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kCuda: return "cuda";
  }
  return "unknown";
}

Placement::Placement(DeviceType device_type, std::vector<Rank> ranks)
    : device_type_(device_type), ranks_(std::move(ranks)), hierarchy_({static_cast<int64_t>(ranks_.size())}) {}

absl::StatusOr<Placement> Placement::Create(DeviceType device_type, std::vector<Rank> ranks,
                                            std::vector<int64_t> hierarchy) {
  auto describe = [&] {
    return absl::StrCat("placement with ranks [",
                        absl::StrJoin(ranks, ",", [](std::string* o, Rank r) { absl::StrAppend(o, r.value()); }),
                        "] and hierarchy [", absl::StrJoin(hierarchy, ","), "]");
  };
  if (ranks.empty()) return absl::InvalidArgumentError(absl::StrCat(describe(), ": no ranks"));
  if (hierarchy.empty()) return absl::InvalidArgumentError(absl::StrCat(describe(), ": empty hierarchy"));
  int64_t product = 1;
  for (int64_t h : hierarchy) {
    if (h <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(describe(), ": hierarchy dims must be positive"));
    }
    product *= h;
  }
  if (product != static_cast<int64_t>(ranks.size())) {
    return absl::InvalidArgumentError(absl::StrCat(describe(), ": hierarchy product ", product,
                                                   " != number of ranks ", ranks.size()));
  }
  std::set<Rank> seen;
  for (Rank r : ranks) {
    if (!r.valid()) return absl::InvalidArgumentError(absl::StrCat(describe(), ": negative rank ", r.value()));
    if (!seen.insert(r).second) {
      return absl::InvalidArgumentError(absl::StrCat(describe(), ": duplicate rank ", r.value()));
    }
  }
  Placement p;
  p.device_type_ = device_type;
  p.ranks_ = std::move(ranks);
  p.hierarchy_ = std::move(hierarchy);
  return p;
}

int64_t Placement::IndexOf(Rank rank) const {
  auto it = std::find(ranks_.begin(), ranks_.end(), rank);
  return it == ranks_.end() ? -1 : static_cast<int64_t>(it - ranks_.begin());
}

std::vector<int64_t> Placement::Coordinates(int64_t index) const {
  CHECK(index >= 0 && index < num_devices()) << "parallel id " << index << " out of range for " << ToString();
  std::vector<int64_t> coords(hierarchy_.size());
  for (int i = num_hierarchy_axes() - 1; i >= 0; --i) {
    coords[i] = index % hierarchy_[i];
    index /= hierarchy_[i];
  }
  return coords;
}

std::string Placement::ToString() const {
  std::string out = absl::StrCat(DeviceTypeName(device_type_), ":");
  if (hierarchy_.empty()) return out + "[]";
  int64_t next = 0;
  AppendNested(ranks_, hierarchy_, 0, &next, &out);
  return out;
}

absl::StatusOr<Placement> Placement::Parse(absl::string_view text) {
  absl::string_view whole = Strip(text);
  size_t colon = whole.find(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "placement '", whole, "' has no device type (expected e.g. 'cpu:[0,1]', 'cpu:[[0,1],[2,3]]' or 'cpu:0-3')"));
  }
  ASSIGN_OR_RETURN(DeviceType device_type, ParseDeviceType(Strip(whole.substr(0, colon)), whole));
  absl::string_view body = Strip(whole.substr(colon + 1));
  if (body.empty()) return absl::InvalidArgumentError(absl::StrCat("placement '", whole, "' has no ranks"));

  std::vector<Rank> ranks;
  std::vector<int64_t> hierarchy;
  if (body.front() == '[' || body.front() == '(' || body.back() == ']') {
    RETURN_IF_ERROR(SplitTopLevel(body, whole, "placement").status());
    ASSIGN_OR_RETURN(RankNode root, ParseRankNode(body, whole));
    for (const RankNode* n = &root; !n->is_leaf; n = &n->children[0]) {
      hierarchy.push_back(static_cast<int64_t>(n->children.size()));
    }
    RETURN_IF_ERROR(FlattenRankNode(root, 0, hierarchy, whole, &ranks));
  } else {
    size_t dash = body.find('-');
    if (dash == absl::string_view::npos) {
      ASSIGN_OR_RETURN(Rank r, ParseRank(body, whole));
      ranks.push_back(r);
    } else {
      ASSIGN_OR_RETURN(Rank first, ParseRank(body.substr(0, dash), whole));
      ASSIGN_OR_RETURN(Rank last, ParseRank(body.substr(dash + 1), whole));
      if (last < first) {
        return absl::InvalidArgumentError(
            absl::StrCat("placement '", whole, "': empty rank range ", first.value(), "-", last.value()));
      }
      for (int32_t r = first.value(); r <= last.value(); ++r) ranks.push_back(Rank(r));
    }
    hierarchy.push_back(static_cast<int64_t>(ranks.size()));
  }
  std::set<Rank> seen;
  for (Rank r : ranks) {
    if (!seen.insert(r).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("placement '", whole, "': duplicate rank ", r.value(), " (each rank may appear once)"));
    }
  }
  return Create(device_type, std::move(ranks), std::move(hierarchy));
}

PlacementProto Placement::ToProto() const {
  PlacementProto proto;
  proto.set_device_type(DeviceTypeName(device_type_));
  for (Rank r : ranks_) proto.add_ranks(r.value());
  for (int64_t h : hierarchy_) proto.add_hierarchy(h);
  return proto;
}

absl::StatusOr<Placement> Placement::FromProto(const PlacementProto& proto) {
  ASSIGN_OR_RETURN(DeviceType device_type, ParseDeviceType(proto.device_type(), proto.ShortDebugString()));
  std::vector<Rank> ranks;
  for (int32_t r : proto.ranks()) ranks.push_back(Rank(r));
  std::vector<int64_t> hierarchy(proto.hierarchy().begin(), proto.hierarchy().end());
  if (hierarchy.empty()) hierarchy.push_back(static_cast<int64_t>(ranks.size()));
  return Create(device_type, std::move(ranks), std::move(hierarchy));
}

// ---- Layout ----

Range BalancedSplit(int64_t dim, int64_t parts, int64_t index) {
  CHECK_GT(parts, 0);
  CHECK(index >= 0 && index < parts) << "part " << index << " of " << parts;
  CHECK_GE(dim, 0);
  const int64_t base = dim / parts;
  const int64_t extra = dim % parts;
  Range r;
  r.begin = index * base + std::min(index, extra);
  r.end = r.begin + base + (index < extra ? 1 : 0);
  return r;
}

absl::Status ValidateNdSbp(const NdSbp& nd_sbp, const Shape& shape, const Placement& placement,
                           bool allow_empty_shards) {
  auto fail = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("NdSbp ", nd_sbp.ToString(), " cannot lay out shape ",
                                                   shape.ToString(), " on placement ", placement.ToString(),
                                                   ": ", why));
  };
  if (nd_sbp.num_axes() != placement.num_hierarchy_axes()) {
    return fail(absl::StrCat("it has ", nd_sbp.num_axes(), " SBP(s) but the placement hierarchy [",
                             absl::StrJoin(placement.hierarchy(), ","), "] has ",
                             placement.num_hierarchy_axes(), " axes (give one SBP per mesh axis)"));
  }
  if (!shape.Validate().ok()) return fail("the shape has a negative dim");
  std::vector<int64_t> parts(shape.num_axes(), 1);
  std::vector<std::vector<int>> mesh_axes(shape.num_axes());
  for (int i = 0; i < nd_sbp.num_axes(); ++i) {
    const Sbp& s = nd_sbp[i];
    if (!s.is_split()) continue;
    if (s.axis() >= shape.num_axes()) {
      return fail(absl::StrCat("split axis ", s.axis(), " (mesh axis ", i, ") is out of range for a tensor with ",
                               shape.num_axes(), " axes"));
    }
    parts[s.axis()] *= placement.hierarchy()[i];
    mesh_axes[s.axis()].push_back(i);
  }
  if (allow_empty_shards) return absl::OkStatus();
  for (int a = 0; a < shape.num_axes(); ++a) {
    if (parts[a] > 1 && shape.dim(a) < parts[a]) {
      return fail(absl::StrCat("axis ", a, " has ", shape.dim(a), " elements but is split into ", parts[a],
                               " parts (by mesh axes ", absl::StrJoin(mesh_axes[a], ", "),
                               "), so some shards would be empty"));
    }
  }
  return absl::OkStatus();
}

ShardSlice GetShardSlice(const Shape& logical_shape, const NdSbp& nd_sbp, const std::vector<int64_t>& hierarchy,
                         int64_t index) {
  CHECK_EQ(static_cast<size_t>(nd_sbp.num_axes()), hierarchy.size())
      << nd_sbp.ToString() << " on hierarchy [" << absl::StrJoin(hierarchy, ",") << "]";
  std::vector<int64_t> coords(hierarchy.size());
  int64_t rest = index;
  for (int i = static_cast<int>(hierarchy.size()) - 1; i >= 0; --i) {
    coords[i] = rest % hierarchy[i];
    rest /= hierarchy[i];
  }
  CHECK(index >= 0 && rest == 0) << "parallel id " << index << " out of range";
  ShardSlice slice;
  slice.shape = logical_shape;
  slice.offset.assign(logical_shape.num_axes(), 0);
  for (size_t i = 0; i < hierarchy.size(); ++i) {
    const Sbp& s = nd_sbp[static_cast<int>(i)];
    if (!s.is_split()) continue;
    const int a = s.axis();
    CHECK_LT(a, logical_shape.num_axes()) << nd_sbp.ToString() << " on " << logical_shape.ToString();
    Range r = BalancedSplit(slice.shape.dim(a), hierarchy[i], coords[i]);
    slice.offset[a] += r.begin;
    slice.shape.set_dim(a, r.size());
  }
  return slice;
}

}  // namespace oneflow_like
