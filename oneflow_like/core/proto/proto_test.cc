// Round-trip tests of the Job and Plan schemas. The plan built here is the worked example of
// docs/plan_format.md (2-rank data-parallel matmul with a P -> B all-reduce of the gradient).
#include <string>

#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "oneflow_like/core/data_type.h"
#include "oneflow_like/core/device.h"
#include "oneflow_like/core/proto/job.pb.h"
#include "oneflow_like/core/proto/plan.pb.h"

namespace oneflow_like {
namespace {

using google::protobuf::util::MessageDifferencer;

PlacementProto TwoRanks() {
  PlacementProto p;
  p.set_device_type("cpu");
  p.add_ranks(0);
  p.add_ranks(1);
  p.add_hierarchy(2);
  return p;
}

NdSbpProto Split0() {
  NdSbpProto s;
  s.add_sbp()->set_kind(SbpProto::SPLIT);
  return s;
}
NdSbpProto Broadcast() {
  NdSbpProto s;
  s.add_sbp()->set_kind(SbpProto::BROADCAST);
  return s;
}
NdSbpProto Partial() {
  NdSbpProto s;
  s.add_sbp()->set_kind(SbpProto::PARTIAL_SUM);
  return s;
}

TensorDescProto Desc(std::initializer_list<int64_t> dims) {
  TensorDescProto d;
  d.set_dtype(DT_FLOAT32);
  for (int64_t v : dims) d.add_dims(v);
  return d;
}

LogicalTensorProto* AddTensor(JobProto* job, const std::string& name, TensorDescProto desc) {
  LogicalTensorProto* t = job->add_tensors();
  t->set_name(name);
  *t->mutable_desc() = std::move(desc);
  *t->mutable_placement() = TwoRanks();
  return t;
}

JobProto MakeJob() {
  JobProto job;
  job.set_name("dp_matmul");
  LogicalTensorProto* x = AddTensor(&job, "x", Desc({4, 3}));
  x->set_is_input(true);
  *x->mutable_nd_sbp() = Split0();
  AddTensor(&job, "dy", Desc({4, 2}))->set_is_input(true);
  LogicalTensorProto* w = AddTensor(&job, "w", Desc({3, 2}));
  w->set_is_variable(true);
  w->mutable_initializer()->set_kind(InitializerProto::NORMAL);
  w->mutable_initializer()->set_stddev(0.02);
  w->mutable_initializer()->set_seed(7);
  AddTensor(&job, "y", Desc({4, 2}))->set_is_output(true);
  AddTensor(&job, "dw", Desc({3, 2}))->set_is_output(true);

  OpProto* mm = job.add_ops();
  mm->set_name("y.matmul");
  mm->set_type("matmul");
  mm->add_inputs("x");
  mm->add_inputs("w");
  mm->add_outputs("y");
  (*mm->mutable_attrs())["alpha"].set_f(1.0);
  (*mm->mutable_output_nd_sbp())[0] = Split0();

  OpProto* grad = job.add_ops();
  grad->set_name("dw.matmul");
  grad->set_type("matmul");
  grad->add_inputs("x");
  grad->add_inputs("dy");
  grad->add_outputs("dw");
  (*grad->mutable_attrs())["transpose_a"].set_b(true);
  (*grad->mutable_attrs())["note"].set_s("weight gradient");
  grad->mutable_attrs()->operator[]("perm_like").mutable_ints()->add_values(1);
  grad->mutable_attrs()->operator[]("scales").mutable_floats()->add_values(0.5);
  (*grad->mutable_attrs())["out_dtype"].set_dtype(DT_FLOAT32);
  (*grad->mutable_attrs())["group"].set_i(3);
  (*grad->mutable_output_nd_sbp())[0] = Broadcast();
  grad->set_stage(1);
  grad->set_recompute(true);

  JobConfigProto* config = job.mutable_config();
  config->set_micro_batches(2);
  config->set_gradient_accumulation_steps(4);
  config->set_zero_stage(1);
  config->set_loss("y");
  config->set_seed(1234);
  config->mutable_optimizer()->set_kind(OptimizerProto::ADAMW);
  config->mutable_optimizer()->set_learning_rate(1e-3);
  config->mutable_optimizer()->set_beta1(0.8);  // beta2 left unset: "use the default"
  *config->add_stage_placements() = TwoRanks();
  PlacementProto stage1 = TwoRanks();
  stage1.set_ranks(0, 2);
  stage1.set_ranks(1, 3);
  *config->add_stage_placements() = stage1;
  return job;
}

// ---- the worked example plan: per rank r, task ids 10r+k and register ids 10r+j ----

TaskProto* AddTask(RankPlanProto* rp, int k, TaskProto::Type type, const std::string& name,
                   int stream) {
  const int r = rp->rank();
  TaskProto* t = rp->add_tasks();
  t->set_id(10 * r + k);
  t->set_rank(r);
  t->mutable_device()->set_type("cpu");
  t->mutable_device()->set_index(0);
  t->set_stream_id(stream);
  t->set_stream_kind(stream == 0 ? STREAM_COMPUTE : STREAM_COMM);
  t->set_type(type);
  t->set_name(name + "@r" + std::to_string(r));
  return t;
}

RegisterProto* AddRegister(RankPlanProto* rp, int j, int producer_k, std::vector<int> consumer_ks,
                           TensorDescProto slot, int count, int block, int64_t offset) {
  const int r = rp->rank();
  RegisterProto* reg = rp->add_registers();
  reg->set_id(10 * r + j);
  reg->mutable_producer()->set_task_id(10 * r + producer_k);
  reg->mutable_producer()->set_rank(r);
  for (int k : consumer_ks) {
    TaskRefProto* c = reg->add_consumers();
    c->set_task_id(10 * r + k);
    c->set_rank(r);
  }
  reg->set_count(count);
  *reg->add_slots() = std::move(slot);
  MemoryLocationProto* m = reg->mutable_memory();
  m->set_block_id(block);
  m->set_offset(offset);
  m->set_buffer_bytes(64);
  m->add_slot_offsets(0);
  return reg;
}

void Consume(TaskProto* t, std::initializer_list<int64_t> regs) {
  for (int64_t r : regs) {
    t->add_consumed_register_ids(r);
    SlotRefProto* in = t->add_inputs();
    in->set_register_id(r);
    in->set_slot(0);
  }
}
void Produce(TaskProto* t, int64_t reg) {
  t->add_produced_register_ids(reg);
  t->mutable_outputs()->Add()->set_register_id(reg);
}

ShardInfoProto Shard(std::initializer_list<int64_t> logical, std::initializer_list<int64_t> offset,
                     NdSbpProto sbp) {
  ShardInfoProto s;
  for (int64_t v : logical) s.add_logical_dims(v);
  for (int64_t v : offset) s.add_offset(v);
  *s.mutable_nd_sbp() = std::move(sbp);
  return s;
}

void BuildRank(int r, RankPlanProto* rp) {
  const int b = 10 * r;      // id base on this rank
  const int peer = 1 - r;
  rp->set_rank(r);
  MemoryBlockProto* persistent = rp->add_memory_blocks();
  persistent->set_id(0);
  persistent->mutable_device()->set_type("cpu");
  persistent->set_size_bytes(64);
  persistent->set_persistent(true);
  MemoryBlockProto* reusable = rp->add_memory_blocks();
  reusable->set_id(1);
  reusable->mutable_device()->set_type("cpu");
  reusable->set_size_bytes(384);

  AddRegister(rp, 0, 0, {2, 5}, Desc({2, 3}), 2, 1, 0);  // x shard
  AddRegister(rp, 1, 1, {2}, Desc({3, 2}), 1, 0, 0);     // w (persistent)
  AddRegister(rp, 2, 2, {3}, Desc({2, 2}), 1, 1, 128);   // y shard
  AddRegister(rp, 3, 4, {5}, Desc({2, 2}), 1, 1, 192);   // dy shard
  RegisterProto* partial = AddRegister(rp, 4, 5, {7}, Desc({3, 2}), 1, 1, 256);  // dw, P
  TaskRefProto* remote_consumer = partial->add_consumers();  // the peer's transfer task
  remote_consumer->set_task_id(10 * peer + 6);
  remote_consumer->set_rank(peer);
  AddRegister(rp, 5, 6, {7}, Desc({3, 2}), 1, 1, 320);   // peer's partial, received
  AddRegister(rp, 6, 7, {8}, Desc({3, 2}), 1, 1, 192);   // dw, B (reuses dy's offset)
  RegisterProto* mirror = rp->add_registers();           // the peer's dw partial
  mirror->set_id(10 * peer + 4);
  mirror->mutable_producer()->set_task_id(10 * peer + 5);
  mirror->mutable_producer()->set_rank(peer);
  mirror->add_consumers()->set_task_id(b + 6);
  mirror->mutable_consumers(0)->set_rank(r);
  mirror->set_count(1);
  *mirror->add_slots() = Desc({3, 2});
  mirror->mutable_remote()->set_rank(peer);

  int order = 0;
  auto add = [&](int k, TaskProto::Type type, const std::string& name, int stream) {
    TaskProto* t = AddTask(rp, k, type, name, stream);
    t->set_order_in_stream(stream == 0 ? order++ : 0);
    return t;
  };
  TaskProto* src_x = add(0, TaskProto::SOURCE, "x.source", 0);
  src_x->mutable_io()->set_tensor_name("x");
  Produce(src_x, b + 0);
  TaskProto* src_w = add(1, TaskProto::SOURCE, "w.source", 0);
  src_w->mutable_io()->set_tensor_name("w");
  Produce(src_w, b + 1);
  TaskProto* src_dy = add(4, TaskProto::SOURCE, "dy.source", 0);
  src_dy->mutable_io()->set_tensor_name("dy");
  Produce(src_dy, b + 3);
  TaskProto* mm = add(2, TaskProto::COMPUTE, "y.matmul", 0);
  mm->set_op_name("y.matmul");
  Consume(mm, {b + 0, b + 1});
  Produce(mm, b + 2);
  mm->mutable_compute()->set_op_type("matmul");
  (*mm->mutable_compute()->mutable_attrs())["alpha"].set_f(1.0);
  *mm->mutable_compute()->add_input_shards() = Shard({4, 3}, {2 * r, 0}, Split0());
  *mm->mutable_compute()->add_input_shards() = Shard({3, 2}, {0, 0}, Broadcast());
  *mm->mutable_compute()->add_output_shards() = Shard({4, 2}, {2 * r, 0}, Split0());
  TaskProto* grad = add(5, TaskProto::COMPUTE, "dw.matmul", 0);
  grad->set_op_name("dw.matmul");
  Consume(grad, {b + 0, b + 3});
  Produce(grad, b + 4);
  grad->mutable_compute()->set_op_type("matmul");
  (*grad->mutable_compute()->mutable_attrs())["transpose_a"].set_b(true);
  *grad->mutable_compute()->add_input_shards() = Shard({4, 3}, {2 * r, 0}, Split0());
  *grad->mutable_compute()->add_input_shards() = Shard({4, 2}, {2 * r, 0}, Split0());
  *grad->mutable_compute()->add_output_shards() = Shard({3, 2}, {0, 0}, Partial());
  TaskProto* transfer = AddTask(rp, 6, TaskProto::TRANSFER, "dw.transfer", 1);
  Consume(transfer, {10 * peer + 4});
  Produce(transfer, b + 5);
  transfer->mutable_transfer()->set_peer_rank(peer);
  TaskProto* sum = add(7, TaskProto::BOXING_ADD, "dw.all_reduce.add", 0);
  Consume(sum, {b + 4, b + 5});
  Produce(sum, b + 6);
  TaskProto* sink_y = add(3, TaskProto::SINK, "y.sink", 0);
  sink_y->mutable_io()->set_tensor_name("y");
  Consume(sink_y, {b + 2});
  TaskProto* sink_dw = add(8, TaskProto::SINK, "dw.sink", 0);
  sink_dw->mutable_io()->set_tensor_name("dw");
  Consume(sink_dw, {b + 6});

  TensorBindingProto* bind_w = rp->add_bindings();
  bind_w->set_tensor_name("w");
  bind_w->set_kind(TensorBindingProto::VARIABLE);
  bind_w->mutable_slot()->set_register_id(b + 1);
  *bind_w->mutable_shard() = Shard({3, 2}, {0, 0}, Broadcast());
  bind_w->mutable_initializer()->set_kind(InitializerProto::NORMAL);
  bind_w->mutable_initializer()->set_stddev(0.02);
  bind_w->mutable_initializer()->set_seed(7);
  struct Io {
    const char* name;
    TensorBindingProto::Kind kind;
    int j;
    ShardInfoProto shard;
  };
  for (const Io& io : {Io{"x", TensorBindingProto::INPUT, 0, Shard({4, 3}, {2 * r, 0}, Split0())},
                       Io{"dy", TensorBindingProto::INPUT, 3, Shard({4, 2}, {2 * r, 0}, Split0())},
                       Io{"y", TensorBindingProto::OUTPUT, 2, Shard({4, 2}, {2 * r, 0}, Split0())},
                       Io{"dw", TensorBindingProto::OUTPUT, 6, Shard({3, 2}, {0, 0}, Broadcast())}}) {
    TensorBindingProto* bind = rp->add_bindings();
    bind->set_tensor_name(io.name);
    bind->set_kind(io.kind);
    bind->mutable_slot()->set_register_id(b + io.j);
    *bind->mutable_shard() = io.shard;
  }
}

PlanProto MakePlan() {
  PlanProto plan;
  plan.set_job_name("dp_matmul");
  plan.set_world_size(2);
  plan.set_pieces_per_step(1);
  for (int r = 0; r < 2; ++r) {
    plan.add_ranks(r);
    BuildRank(r, plan.add_rank_plans());
    RankMemoryProto* mem = plan.add_memory();
    mem->set_rank(r);
    mem->set_planned_bytes(448);
    mem->set_naive_bytes(512);
  }
  OpSbpDecisionProto* d = plan.add_sbp_decisions();
  d->set_op_name("y.matmul");
  d->set_op_type("matmul");
  SbpCandidateProto* dp = d->add_candidates();
  *dp->add_inputs() = Split0();
  *dp->add_inputs() = Broadcast();
  *dp->add_outputs() = Split0();
  dp->set_compute_seconds(1e-6);
  dp->set_total_seconds(1e-6);
  SbpCandidateProto* mp = d->add_candidates();
  *mp->add_inputs() = Broadcast();
  *mp->add_inputs() = Broadcast();
  *mp->add_outputs() = Broadcast();
  mp->set_rejected_reason("output pinned to (S(0))");
  SbpCandidateProto::InputCommCost* gather = mp->add_input_comm();
  gather->set_input(0);
  *gather->mutable_producer_nd_sbp() = Split0();
  gather->set_boxing("all_gather");
  gather->set_bytes(24);
  gather->set_seconds(2e-5);
  d->set_chosen(0);
  plan.set_content_hash("fnv1a64:0123456789abcdef");
  return plan;
}

template <typename M>
M RoundTrip(const M& message) {
  std::string bytes;
  EXPECT_TRUE(message.SerializeToString(&bytes));
  M parsed;
  EXPECT_TRUE(parsed.ParseFromString(bytes));
  return parsed;
}

TEST(ProtoTest, JobRoundTripsThroughBytes) {
  const JobProto job = MakeJob();
  const JobProto parsed = RoundTrip(job);
  std::string diff;
  MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(job, parsed)) << diff;

  // Spot-check that every kind of field survived, including oneof cases and presence.
  ASSERT_EQ(parsed.tensors_size(), 5);
  EXPECT_TRUE(parsed.tensors(0).has_nd_sbp());
  EXPECT_FALSE(parsed.tensors(1).has_nd_sbp());
  EXPECT_EQ(parsed.tensors(2).initializer().kind(), InitializerProto::NORMAL);
  EXPECT_EQ(parsed.tensors(2).initializer().seed(), 7u);
  const auto& attrs = parsed.ops(1).attrs();
  EXPECT_EQ(attrs.at("transpose_a").value_case(), AttrValueProto::kB);
  EXPECT_EQ(attrs.at("group").i(), 3);
  EXPECT_EQ(attrs.at("note").s(), "weight gradient");
  EXPECT_EQ(attrs.at("perm_like").ints().values(0), 1);
  EXPECT_EQ(attrs.at("scales").floats().values(0), 0.5);
  EXPECT_EQ(attrs.at("out_dtype").dtype(), DT_FLOAT32);
  EXPECT_EQ(parsed.ops(1).output_nd_sbp().at(0).sbp(0).kind(), SbpProto::BROADCAST);
  EXPECT_EQ(parsed.ops(1).stage(), 1);
  EXPECT_TRUE(parsed.ops(1).recompute());
  EXPECT_TRUE(parsed.config().optimizer().has_beta1());
  EXPECT_FALSE(parsed.config().optimizer().has_beta2());
  EXPECT_EQ(parsed.config().optimizer().kind(), OptimizerProto::ADAMW);
  EXPECT_EQ(parsed.config().gradient_accumulation_steps(), 4);
  ASSERT_EQ(parsed.config().stage_placements_size(), 2);
  EXPECT_EQ(parsed.config().stage_placements(1).ranks(1), 3);

  // The comparison is not vacuous: one changed dim is a difference.
  JobProto changed = parsed;
  changed.mutable_tensors(0)->mutable_desc()->set_dims(1, 5);
  EXPECT_FALSE(MessageDifferencer::Equals(job, changed));
}

TEST(ProtoTest, PlanRoundTripsThroughBytesAndText) {
  const PlanProto plan = MakePlan();
  const PlanProto parsed = RoundTrip(plan);
  EXPECT_TRUE(MessageDifferencer::Equals(plan, parsed));

  std::string text;
  ASSERT_TRUE(google::protobuf::TextFormat::PrintToString(plan, &text));
  PlanProto from_text;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &from_text));
  EXPECT_TRUE(MessageDifferencer::Equals(plan, from_text));

  ASSERT_EQ(parsed.rank_plans_size(), 2);
  const RankPlanProto& r1 = parsed.rank_plans(1);
  EXPECT_EQ(r1.tasks_size(), 9);
  EXPECT_EQ(r1.registers_size(), 8);
  const RegisterProto& mirror = r1.registers(7);
  EXPECT_EQ(mirror.location_case(), RegisterProto::kRemote);
  EXPECT_EQ(mirror.remote().rank(), 0);
  EXPECT_EQ(mirror.id(), 4);
  const RegisterProto& partial = r1.registers(4);
  EXPECT_EQ(partial.location_case(), RegisterProto::kMemory);
  ASSERT_EQ(partial.consumers_size(), 2);
  EXPECT_EQ(partial.consumers(1).rank(), 0);
  EXPECT_EQ(partial.consumers(1).task_id(), 6);
  const TaskProto& transfer = r1.tasks(5);
  EXPECT_EQ(transfer.type(), TaskProto::TRANSFER);
  EXPECT_EQ(transfer.params_case(), TaskProto::kTransfer);
  EXPECT_EQ(transfer.stream_kind(), STREAM_COMM);
  EXPECT_EQ(r1.tasks(3).compute().output_shards(0).offset(0), 2);
  EXPECT_EQ(r1.tasks(4).compute().output_shards(0).nd_sbp().sbp(0).kind(), SbpProto::PARTIAL_SUM);
  EXPECT_EQ(parsed.sbp_decisions(0).candidates(1).input_comm(0).boxing(), "all_gather");
  ASSERT_EQ(r1.bindings_size(), 5);
  EXPECT_EQ(r1.bindings(4).tensor_name(), "dw");
  EXPECT_EQ(r1.bindings(4).slot().register_id(), 16);

  PlanProto changed = parsed;
  changed.mutable_rank_plans(0)->mutable_registers(0)->set_count(1);
  EXPECT_FALSE(MessageDifferencer::Equals(plan, changed));
}

TEST(ProtoTest, DeterministicSerializationIgnoresMapInsertionOrder) {
  // The content hash is computed over deterministic serialization; map order must not matter.
  OpProto a, b;
  (*a.mutable_attrs())["alpha"].set_f(2.0);
  (*a.mutable_attrs())["transpose_b"].set_b(true);
  (*b.mutable_attrs())["transpose_b"].set_b(true);
  (*b.mutable_attrs())["alpha"].set_f(2.0);
  auto deterministic = [](const OpProto& m) {
    std::string out;
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    m.SerializeToCodedStream(&coded);
    coded.Trim();
    return out;
  };
  EXPECT_FALSE(deterministic(a).empty());
  EXPECT_EQ(deterministic(a), deterministic(b));
  (*b.mutable_attrs())["alpha"].set_f(3.0);
  EXPECT_NE(deterministic(a), deterministic(b));
}

TEST(ProtoTest, EnumsMirrorCoreEnums) {
  EXPECT_EQ(static_cast<int>(DT_INVALID), static_cast<int>(DataType::kInvalid));
  EXPECT_EQ(static_cast<int>(DT_FLOAT32), static_cast<int>(DataType::kFloat32));
  EXPECT_EQ(static_cast<int>(DT_FLOAT64), static_cast<int>(DataType::kFloat64));
  EXPECT_EQ(static_cast<int>(DT_INT32), static_cast<int>(DataType::kInt32));
  EXPECT_EQ(static_cast<int>(DT_INT64), static_cast<int>(DataType::kInt64));
  EXPECT_EQ(static_cast<int>(DT_BOOL), static_cast<int>(DataType::kBool));
  EXPECT_EQ(static_cast<int>(DT_BFLOAT16), static_cast<int>(DataType::kBFloat16));
  EXPECT_EQ(static_cast<int>(DT_FLOAT16), static_cast<int>(DataType::kFloat16));
  EXPECT_EQ(DataTypeProto_MAX, static_cast<int>(DataType::kFloat16));
  EXPECT_EQ(static_cast<int>(STREAM_COMPUTE), static_cast<int>(StreamKind::kCompute));
  EXPECT_EQ(static_cast<int>(STREAM_COPY), static_cast<int>(StreamKind::kCopy));
  EXPECT_EQ(static_cast<int>(STREAM_COMM), static_cast<int>(StreamKind::kComm));
  EXPECT_EQ(StreamKindProto_MAX, static_cast<int>(StreamKind::kComm));
}

}  // namespace
}  // namespace oneflow_like
