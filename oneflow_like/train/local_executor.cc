// LocalExecutor: every rank of the plan in this process (step_executor.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "oneflow_like/train/step_executor.h"

namespace oneflow_like {
namespace train {
namespace {

class LocalExecutor : public StepExecutor {
 public:
  LocalExecutor(std::unique_ptr<actor::Session> session, int32_t world_size)
      : session_(std::move(session)), world_size_(world_size) {}

  int64_t pieces_per_step() const override { return session_->pieces_per_step(); }
  absl::Status Feed(const std::string& name, const Tensor& logical) override { return session_->Feed(name, logical); }
  absl::Status StartStep(int64_t) override { return session_->StartStep(); }
  absl::Status FinishStep(int64_t) override { return session_->FinishStep(); }
  absl::StatusOr<double> MeanScalar(const std::string& name, int64_t) override {
    const int64_t firings = session_->FetchCount(name);
    if (firings <= 0) return absl::InternalError(absl::StrCat("the step produced no '", name, "'"));
    double sum = 0;
    for (int64_t i = 0; i < firings; ++i) {
      ASSIGN_OR_RETURN(Tensor value, session_->Fetch(name, i));
      sum += value.GetAsDouble(0);
    }
    return sum / static_cast<double>(firings);
  }
  std::vector<actor::Runtime*> local_runtimes() const override {
    std::vector<actor::Runtime*> out;
    for (int32_t r = 0; r < world_size_; ++r) {
      if (actor::Runtime* runtime = session_->runtime(r)) out.push_back(runtime);
    }
    return out;
  }
  int32_t world_size() const override { return world_size_; }
  absl::Status Barrier(const std::string&) override { return absl::OkStatus(); }
  absl::Status Close() override { return session_->Close(); }
  bool leader() const override { return true; }
  std::string Description() const override {
    return absl::StrCat("all ", world_size_, " ranks run as threads of this process (loopback transport)");
  }
  actor::Session* session() const override { return session_.get(); }

 private:
  std::unique_ptr<actor::Session> session_;
  int32_t world_size_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepExecutor>> CreateLocalExecutor(const PlanProto& plan, const OpRegistry* registry,
                                                                  actor::SessionOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<actor::Session> session,
                   actor::Session::Create(plan, registry, std::move(options)));
  return std::unique_ptr<StepExecutor>(new LocalExecutor(std::move(session), plan.world_size()));
}

}  // namespace train
}  // namespace oneflow_like
