#include "oneflow_like/core/attr_proto.h"

#include "absl/strings/str_cat.h"

namespace oneflow_like {

DataTypeProto DataTypeToProto(DataType dtype) { return static_cast<DataTypeProto>(dtype); }

absl::StatusOr<DataType> DataTypeFromProto(int dtype) {
  if (dtype <= static_cast<int>(DataType::kInvalid) || dtype > static_cast<int>(DataType::kFloat16)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid dtype number ", dtype));
  }
  return static_cast<DataType>(dtype);
}

TensorDescProto TensorDescToProto(const TensorDesc& desc) {
  TensorDescProto proto;
  proto.set_dtype(DataTypeToProto(desc.dtype));
  for (int64_t d : desc.shape.dims()) proto.add_dims(d);
  return proto;
}

absl::StatusOr<TensorDesc> TensorDescFromProto(const TensorDescProto& proto) {
  TensorDesc desc;
  ASSIGN_OR_RETURN(desc.dtype, DataTypeFromProto(proto.dtype()));
  desc.shape = Shape(std::vector<int64_t>(proto.dims().begin(), proto.dims().end()));
  RETURN_IF_ERROR(desc.shape.Validate());
  return desc;
}

AttrValueProto AttrValueToProto(const AttrValue& value) {
  AttrValueProto proto;
  switch (TypeOf(value)) {
    case AttrType::kInt:
      proto.set_i(std::get<int64_t>(value));
      break;
    case AttrType::kFloat:
      proto.set_f(std::get<double>(value));
      break;
    case AttrType::kBool:
      proto.set_b(std::get<bool>(value));
      break;
    case AttrType::kString:
      proto.set_s(std::get<std::string>(value));
      break;
    case AttrType::kInts:
      proto.mutable_ints();  // sets the oneof even for an empty list (e.g. fill's shape=[])
      for (int64_t v : std::get<std::vector<int64_t>>(value)) proto.mutable_ints()->add_values(v);
      break;
    case AttrType::kFloats:
      proto.mutable_floats();
      for (double v : std::get<std::vector<double>>(value)) proto.mutable_floats()->add_values(v);
      break;
    case AttrType::kDataType:
      proto.set_dtype(DataTypeToProto(std::get<DataType>(value)));
      break;
  }
  return proto;
}

absl::StatusOr<AttrValue> AttrValueFromProto(const AttrValueProto& proto) {
  switch (proto.value_case()) {
    case AttrValueProto::kI:
      return AttrValue(proto.i());
    case AttrValueProto::kF:
      return AttrValue(proto.f());
    case AttrValueProto::kB:
      return AttrValue(proto.b());
    case AttrValueProto::kS:
      return AttrValue(proto.s());
    case AttrValueProto::kInts:
      return AttrValue(std::vector<int64_t>(proto.ints().values().begin(), proto.ints().values().end()));
    case AttrValueProto::kFloats:
      return AttrValue(std::vector<double>(proto.floats().values().begin(), proto.floats().values().end()));
    case AttrValueProto::kDtype: {
      ASSIGN_OR_RETURN(DataType dtype, DataTypeFromProto(proto.dtype()));
      return AttrValue(dtype);
    }
    case AttrValueProto::VALUE_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("attribute value with no member set");
}

absl::StatusOr<AttrMap> AttrMapFromProto(const google::protobuf::Map<std::string, AttrValueProto>& proto) {
  AttrMap attrs;
  for (const auto& [name, value_proto] : proto) {
    absl::StatusOr<AttrValue> value = AttrValueFromProto(value_proto);
    if (!value.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "': ", value.status().message()));
    }
    attrs.Set(name, *std::move(value));
  }
  return attrs;
}

void AttrMapToProto(const AttrMap& attrs, google::protobuf::Map<std::string, AttrValueProto>* proto) {
  for (const auto& [name, value] : attrs.values()) (*proto)[name] = AttrValueToProto(value);
}

}  // namespace oneflow_like
