// Small helpers shared by the actor tests (testonly).
//
//   std::unique_ptr<OpRegistry> registry = MakeBuiltinRegistry();
//   Tensor x = Iota(Shape{2, 3}, /*start=*/-1, /*step=*/0.5);   // -1, -0.5, 0, ...
#ifndef ONEFLOW_LIKE_ACTOR_TEST_UTIL_H_
#define ONEFLOW_LIKE_ACTOR_TEST_UTIL_H_

#include <memory>
#include <utility>

#include "glog/logging.h"
#include "oneflow_like/core/op_registry.h"
#include "oneflow_like/core/ops/builtin_ops.h"
#include "oneflow_like/core/tensor.h"

namespace oneflow_like {
namespace actor {

inline TensorDesc F32(Shape shape) { return TensorDesc{DataType::kFloat32, std::move(shape)}; }

inline std::unique_ptr<OpRegistry> MakeBuiltinRegistry() {
  auto registry = std::make_unique<OpRegistry>();
  CHECK(RegisterBuiltinOps(registry.get()).ok());
  return registry;
}

// float32 tensor with elements start, start + step, ...
inline Tensor Iota(Shape shape, float start, float step) {
  Tensor t(DataType::kFloat32, std::move(shape));
  for (int64_t i = 0; i < t.elem_count(); ++i) t.data<float>()[i] = start + step * static_cast<float>(i);
  return t;
}

}  // namespace actor
}  // namespace oneflow_like

#endif  // ONEFLOW_LIKE_ACTOR_TEST_UTIL_H_
