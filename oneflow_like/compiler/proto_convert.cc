#include "oneflow_like/compiler/proto_convert.h"

#include "oneflow_like/core/attr_proto.h"

// Thin wrappers: the conversions live in core (core/attr_proto.h) so that the runtime can use
// them without depending on the compiler.
namespace oneflow_like {
namespace compiler {

DataTypeProto DataTypeToProto(DataType dtype) { return ::oneflow_like::DataTypeToProto(dtype); }

absl::StatusOr<DataType> DataTypeFromProto(int dtype) { return ::oneflow_like::DataTypeFromProto(dtype); }

TensorDescProto TensorDescToProto(const TensorDesc& desc) { return ::oneflow_like::TensorDescToProto(desc); }

absl::StatusOr<TensorDesc> TensorDescFromProto(const TensorDescProto& proto) {
  return ::oneflow_like::TensorDescFromProto(proto);
}

AttrValueProto AttrValueToProto(const AttrValue& value) { return ::oneflow_like::AttrValueToProto(value); }

absl::StatusOr<AttrValue> AttrValueFromProto(const AttrValueProto& proto) {
  return ::oneflow_like::AttrValueFromProto(proto);
}

}  // namespace compiler
}  // namespace oneflow_like
