// Conversions between core value types and their protos (proto/types.proto): DataType,
// TensorDesc and AttrValue. Both the compiler (Job <-> Graph, plan emission) and the runtime
// (reading ComputeParams.attrs and register slot descs of a Plan) use them, so they live in core.
//
//   AttrValueProto p = AttrValueToProto(AttrValue(int64_t{3}));   // p.i() == 3
//   ASSIGN_OR_RETURN(AttrValue v, AttrValueFromProto(p));          // std::get<int64_t>(v) == 3
//   ASSIGN_OR_RETURN(AttrMap attrs, AttrMapFromProto(compute.attrs()));
//
// Pure functions; thread-safe. Errors are InvalidArgument and say what was wrong.
#ifndef ONEFLOW_LIKE_CORE_ATTR_PROTO_H_
#define ONEFLOW_LIKE_CORE_ATTR_PROTO_H_

#include <string>

#include "google/protobuf/map.h"
#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/proto/types.pb.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {

DataTypeProto DataTypeToProto(DataType dtype);
// InvalidArgument for DT_INVALID or an out-of-range number.
absl::StatusOr<DataType> DataTypeFromProto(int dtype);

TensorDescProto TensorDescToProto(const TensorDesc& desc);
// InvalidArgument for an invalid dtype or a negative dim.
absl::StatusOr<TensorDesc> TensorDescFromProto(const TensorDescProto& proto);

AttrValueProto AttrValueToProto(const AttrValue& value);
// InvalidArgument when no member is set or the dtype is invalid.
absl::StatusOr<AttrValue> AttrValueFromProto(const AttrValueProto& proto);

// A whole attribute map (e.g. ComputeParams.attrs). Errors name the offending attribute.
absl::StatusOr<AttrMap> AttrMapFromProto(const google::protobuf::Map<std::string, AttrValueProto>& proto);
void AttrMapToProto(const AttrMap& attrs, google::protobuf::Map<std::string, AttrValueProto>* proto);

}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_CORE_ATTR_PROTO_H_
