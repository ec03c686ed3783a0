#include "oneflow_like/compiler/pipeline/test_jobs.h"

namespace oneflow_like {
namespace compiler {
namespace testing {

const char kTwoStageMlpText[] = R"(config(micro_batches=2, stages=[cpu:[0], cpu:[1]])
x = input(shape=[32,512])
label = input(shape=[32], dtype=int64)
w1 = variable(shape=[512,512], init=normal(0.02))
w2 = variable(shape=[512,64], init=normal(0.02))
w3 = variable(shape=[64,64], init=normal(0.02))
w4 = variable(shape=[64,10], init=normal(0.02))
h1 = matmul(x, w1)
a1 = relu(h1)
h2 = matmul(a1, w2)
a2 = relu(h2)
h3 = matmul(a2, w3)
a3 = relu(h3)
logits = matmul(a3, w4)
loss = sparse_softmax_cross_entropy(logits, label)
train(loss, optimizer=sgd(lr=0.1))
)";

}  // namespace testing
}  // namespace compiler
}  // namespace oneflow_like
