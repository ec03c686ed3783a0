// Conversions between core value types and their protos (types.proto): DataType, TensorDesc
// and AttrValue. Thin wrappers over core/attr_proto.h (where the implementation lives, so the
// runtime can share it), kept for the compiler's callers. Used by Graph::FromJobProto/ToJobProto
// and by plan emission. Pure functions; thread-safe.
#ifndef ONEFLOW_LIKE_COMPILER_PROTO_CONVERT_H_
#define ONEFLOW_LIKE_COMPILER_PROTO_CONVERT_H_

#include "oneflow_like/core/attr.h"
#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/proto/types.pb.h"
#include "oneflow_like/core/shape.h"
#include "oneflow_like/core/status.h"

namespace oneflow_like {
namespace compiler {

DataTypeProto DataTypeToProto(DataType dtype);
// InvalidArgument for DT_INVALID or an out-of-range number.
absl::StatusOr<DataType> DataTypeFromProto(int dtype);

TensorDescProto TensorDescToProto(const TensorDesc& desc);
// InvalidArgument for an invalid dtype or a negative dim.
absl::StatusOr<TensorDesc> TensorDescFromProto(const TensorDescProto& proto);

AttrValueProto AttrValueToProto(const AttrValue& value);
// InvalidArgument when no member is set or the dtype is invalid.
absl::StatusOr<AttrValue> AttrValueFromProto(const AttrValueProto& proto);

}  // namespace compiler
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_COMPILER_PROTO_CONVERT_H_
