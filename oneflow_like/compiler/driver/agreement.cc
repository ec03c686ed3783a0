#include "oneflow_like/compiler/driver/agreement.h"

#include <algorithm>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "oneflow_like/compiler/proto_convert.h"

namespace oneflow_like {
namespace compiler {
namespace {

// FNV-1a-64 over length-prefixed fields.
class Digest {
 public:
  void Bytes(absl::string_view bytes) {
    Int(static_cast<int64_t>(bytes.size()));
    Raw(bytes);
  }
  void Int(int64_t v) { Raw(absl::string_view(reinterpret_cast<const char*>(&v), sizeof(v))); }
  void Real(double v) { Raw(absl::string_view(reinterpret_cast<const char*>(&v), sizeof(v))); }
  void Message(const google::protobuf::MessageLite& m) {
    std::string out;
    {
      google::protobuf::io::StringOutputStream stream(&out);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      m.SerializePartialToCodedStream(&coded);
    }
    Bytes(out);
  }
  void Layout(const Placement& p) {
    Int(static_cast<int64_t>(p.device_type()));
    Int(static_cast<int64_t>(p.ranks().size()));
    for (Rank r : p.ranks()) Int(r.value());
    Int(static_cast<int64_t>(p.hierarchy().size()));
    for (int64_t h : p.hierarchy()) Int(h);
  }
  void Desc(const TensorDesc& d) {
    Int(static_cast<int64_t>(d.dtype));
    Int(d.shape.num_axes());
    for (int64_t x : d.shape.dims()) Int(x);
  }
  std::string Hex() const { return absl::StrFormat("fnv1a64:%016x", hash_); }

 private:
  void Raw(absl::string_view bytes) {
    for (unsigned char c : bytes) hash_ = (hash_ ^ c) * 0x100000001b3ULL;
  }
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

const char* BoxingName(BoxingStyle style) {
  switch (style) {
    case BoxingStyle::kCollective: return "collective";
    case BoxingStyle::kAuto: return "auto";
    default: return "p2p";
  }
}

}  // namespace

JobAgreementProto MakeJobAgreement(const Graph& graph, const LowerOptions& options, int32_t world_size) {
  JobAgreementProto agreement;
  agreement.set_job_name(graph.name());
  agreement.set_world_size(world_size);
  agreement.set_num_ops(graph.num_ops());
  agreement.set_pieces_per_step(PiecesPerStep(graph.config()));
  agreement.set_boxing(BoxingName(options.boxing));
  agreement.set_bucket_bytes(options.bucket_bytes);
  agreement.set_reuse_memory(options.reuse_memory);
  if (options.compute_streams > 1) agreement.set_compute_streams(options.compute_streams);  // 0: one
  Digest digest;
  digest.Bytes(graph.name());
  digest.Message(graph.config());
  int64_t variables = 0, elements = 0;
  for (const TensorNode& t : graph.tensors()) {
    digest.Bytes(t.name);
    if (t.desc.has_value()) digest.Desc(*t.desc);
    if (t.placement.has_value()) digest.Layout(*t.placement);
    digest.Bytes(t.nd_sbp.has_value() ? NdSbpText(*t.nd_sbp) : "");
    digest.Int(t.producer.valid() ? t.producer.value() : -1);
    digest.Int(t.producer_output);
    digest.Int(t.is_variable * 1 + t.is_input * 2 + t.is_output * 4 + t.frozen * 8);
    if (t.is_variable) {
      digest.Message(t.initializer);
      ++variables;
      if (t.desc.has_value()) elements += t.desc->shape.elem_count();
    }
  }
  int max_stage = 0;
  const Placement* last = nullptr;
  for (OpId id : graph.op_order()) {
    const OpNode& op = graph.op(id);
    digest.Bytes(op.name);
    digest.Bytes(op.type);
    digest.Int(static_cast<int64_t>(op.attrs.values().size()));
    for (const auto& [name, value] : op.attrs.values()) {
      digest.Bytes(name);
      digest.Message(AttrValueToProto(value));
    }
    for (TensorId t : op.inputs) digest.Int(t.value());
    digest.Int(-1);
    for (TensorId t : op.outputs) digest.Int(t.value());
    if (op.placement.has_value()) {  // consecutive ops mostly share one: hashed once per run
      if (last != nullptr && *last == *op.placement) {
        digest.Int(-2);
      } else {
        digest.Layout(*op.placement);
      }
      last = &*op.placement;
    }
    digest.Int(op.stage);
    digest.Int(op.recompute);
    digest.Bytes(op.nd_sbp_signature.has_value() ? op.nd_sbp_signature->ToString() : "");
    max_stage = std::max(max_stage, op.stage);
  }
  for (const VariableUpdate& update : graph.variable_updates()) {
    digest.Int(update.variable.value());
    digest.Int(update.new_value.value());
  }
  digest.Bytes(BoxingName(options.boxing));
  digest.Int(options.bucket_bytes);
  digest.Int(options.reuse_memory);
  if (options.compute_streams > 1) digest.Int(options.compute_streams);  // one stream: digests as before
  digest.Int(options.alignment);
  digest.Int(options.max_register_count);
  digest.Int(world_size);
  const CostConfig& cost = options.boxing_options.cost;
  for (const LinkParams* link : {&cost.same_process, &cost.same_node, &cost.cross_node, &cost.host_device}) {
    digest.Real(link->alpha_seconds);
    digest.Real(link->beta_seconds_per_byte);
  }
  digest.Int(cost.ranks_per_node);
  for (int32_t node : cost.rank_to_node) digest.Int(node);
  digest.Real(cost.flops_per_second);
  digest.Real(cost.memory_bytes_per_second);
  digest.Real(cost.task_overhead_seconds);
  digest.Int(static_cast<int64_t>(options.boxing_options.policy));
  agreement.set_num_variables(variables);
  agreement.set_num_parameters(elements);
  agreement.set_num_stages(max_stage + 1);
  agreement.set_digest(digest.Hex());
  return agreement;
}

std::string AgreementDifference(const JobAgreementProto& mine, const JobAgreementProto& theirs) {
  if (mine.digest() == theirs.digest()) return "";
  std::vector<std::string> parts;
  auto field = [&](const char* name, const auto& a, const auto& b) {
    if (a != b) parts.push_back(absl::StrCat(name, " ", a, " vs ", b));
  };
  field("job", mine.job_name(), theirs.job_name());
  field("world_size", mine.world_size(), theirs.world_size());
  field("ops", mine.num_ops(), theirs.num_ops());
  field("variables", mine.num_variables(), theirs.num_variables());
  field("variable elements", mine.num_parameters(), theirs.num_parameters());
  field("pieces_per_step", mine.pieces_per_step(), theirs.pieces_per_step());
  field("stages", mine.num_stages(), theirs.num_stages());
  field("boxing", mine.boxing(), theirs.boxing());
  field("bucket_bytes", mine.bucket_bytes(), theirs.bucket_bytes());
  field("reuse_memory", mine.reuse_memory(), theirs.reuse_memory());
  field("compute_streams", std::max(1, mine.compute_streams()), std::max(1, theirs.compute_streams()));
  if (parts.empty()) {
    return absl::StrCat("the graphs or options differ in detail (digest ", mine.digest(), " vs ", theirs.digest(),
                        "; every summary field agrees)");
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace compiler
}  // namespace oneflow_like
