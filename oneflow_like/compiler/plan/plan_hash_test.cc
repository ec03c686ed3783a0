#include "oneflow_like/compiler/plan/plan_hash.h"

#include <cstdio>
#include <functional>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>

#include "gtest/gtest.h"
#include "oneflow_like/compiler/plan/plan_test_util.h"

namespace oneflow_like {
namespace compiler {
namespace {

TEST(PlanHashTest, Fnv1a64KnownVectors) {
  // Published FNV-1a 64-bit test vectors.
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ULL);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ULL);
}

TEST(PlanHashTest, HashOfTinyPlansMatchesHandSerialization) {
  // An empty message serializes to no bytes.
  EXPECT_EQ(PlanContentHash(PlanProto()), "fnv1a64:cbf29ce484222325");
  // job_name "a" is field 1, wire type 2: bytes 0x0a 0x01 'a'.
  PlanProto plan;
  plan.set_job_name("a");
  char expected[32];
  std::snprintf(expected, sizeof(expected), "fnv1a64:%016llx",
                static_cast<unsigned long long>(Fnv1a64(std::string("\x0a\x01"
                                                                    "a",
                                                                    3))));
  EXPECT_EQ(PlanContentHash(plan), expected);
}

PlanProto SamplePlan() {
  TestPlanBuilder b(/*world_size=*/2, /*pieces_per_step=*/2);
  auto [x_source, x] = b.AddInput(0, "x");
  const int64_t relu = b.AddTask(0, TaskProto::COMPUTE, "relu");
  b.Connect(x, relu);
  b.task(relu)->mutable_compute()->set_op_type("relu");
  const int64_t y = b.AddRegister(relu, "y");
  const int64_t pull = b.AddTransfer(y, 1, "y.transfer");
  b.AddSink(b.AddRegister(pull, "y@1"), "y");
  return b.Build();
}

TEST(PlanHashTest, SealThenCheckAndFormat) {
  PlanProto plan = SamplePlan();
  EXPECT_EQ(CheckPlanHash(plan).code(), absl::StatusCode::kInvalidArgument);  // never sealed
  SealPlan(&plan);
  EXPECT_TRUE(std::regex_match(plan.content_hash(), std::regex("fnv1a64:[0-9a-f]{16}")))
      << plan.content_hash();
  EXPECT_TRUE(CheckPlanHash(plan).ok());
  // The stored hash does not feed the hash; re-sealing is idempotent; a copy and a
  // serialization round trip keep it.
  EXPECT_EQ(PlanContentHash(plan), plan.content_hash());
  PlanProto resealed = plan;
  SealPlan(&resealed);
  EXPECT_EQ(resealed.content_hash(), plan.content_hash());
  PlanProto parsed;
  ASSERT_TRUE(parsed.ParseFromString(plan.SerializeAsString()));
  EXPECT_TRUE(CheckPlanHash(parsed).ok());
}

TEST(PlanHashTest, MapInsertionOrderDoesNotMatter) {
  const std::vector<std::string> keys = {"transpose_a", "alpha", "zeta",    "beta", "k",
                                         "axis",        "m",     "epsilon", "b2",   "b1"};
  PlanProto forward = SamplePlan();
  PlanProto backward = SamplePlan();
  auto* forward_attrs = FindTask(&forward, 2)->mutable_compute()->mutable_attrs();
  auto* backward_attrs = FindTask(&backward, 2)->mutable_compute()->mutable_attrs();
  for (size_t i = 0; i < keys.size(); ++i) {
    (*forward_attrs)[keys[i]].set_i(static_cast<int64_t>(i));
    (*backward_attrs)[keys[keys.size() - 1 - i]].set_i(static_cast<int64_t>(keys.size() - 1 - i));
  }
  EXPECT_EQ(PlanContentHash(forward), PlanContentHash(backward));
  (*backward_attrs)["alpha"].set_i(99);
  EXPECT_NE(PlanContentHash(forward), PlanContentHash(backward));
}

TEST(PlanHashTest, EveryFieldChangeChangesTheHash) {
  const std::vector<std::function<void(PlanProto*)>> edits = {
      [](PlanProto* p) { p->set_job_name("other"); },
      [](PlanProto* p) { p->set_world_size(3); },
      [](PlanProto* p) { p->set_pieces_per_step(4); },
      [](PlanProto* p) { FindTask(p, 2)->set_order_in_stream(7); },
      [](PlanProto* p) { FindTask(p, 2)->set_name("relu2"); },
      [](PlanProto* p) { FindTask(p, 3)->mutable_transfer()->set_peer_rank(1); },
      [](PlanProto* p) { FindEntry(p, 0, 102)->set_count(2); },
      [](PlanProto* p) { FindEntry(p, 0, 102)->mutable_slots(0)->set_dims(1, 3); },
      [](PlanProto* p) { FindEntry(p, 1, 102)->mutable_remote()->set_rank(1); },
      [](PlanProto* p) { FindEntry(p, 0, 101)->mutable_memory()->set_offset(64); },
      [](PlanProto* p) { p->mutable_memory(0)->set_naive_bytes(1); },
      [](PlanProto* p) { (*FindTask(p, 2)->mutable_compute()->mutable_attrs())["k"].set_i(0); },
      [](PlanProto* p) { p->add_sbp_decisions()->set_op_name("relu"); },
  };
  const PlanProto original = SamplePlan();
  std::set<std::string> hashes = {PlanContentHash(original)};
  for (size_t i = 0; i < edits.size(); ++i) {
    PlanProto edited = original;
    SealPlan(&edited);
    edits[i](&edited);
    EXPECT_EQ(CheckPlanHash(edited).code(), absl::StatusCode::kInvalidArgument) << "edit " << i;
    EXPECT_TRUE(hashes.insert(PlanContentHash(edited)).second) << "edit " << i << " collides";
  }
  PlanProto sealed = original;
  SealPlan(&sealed);
  sealed.set_pieces_per_step(8);
  const absl::Status status = CheckPlanHash(sealed);
  EXPECT_NE(status.message().find("stores content_hash \"fnv1a64:"), std::string::npos) << status;
  EXPECT_NE(status.message().find("edited after SealPlan"), std::string::npos) << status;
}

// The hash is computed in parts (the rank plans serialized on several threads); it must equal
// FNV-1a-64 of the whole plan's deterministic serialization, for many rank plans, with maps,
// unknown fields and a stored content_hash.
TEST(PlanHashTest, ManyRankPlansHashLikeTheWholeSerialization) {
  PlanProto plan;
  plan.set_job_name("wide");
  plan.set_world_size(40);
  plan.set_pieces_per_step(3);
  for (int r = 0; r < 37; ++r) {
    plan.add_ranks(r);
    RankPlanProto* rank_plan = plan.add_rank_plans();
    rank_plan->set_rank(r);
    for (int t = 0; t < 50 + 7 * r; ++t) {
      TaskProto* task = rank_plan->add_tasks();
      task->set_id(1000 * r + t);
      task->set_rank(r);
      task->set_name("t" + std::to_string(t));
      auto& attrs = *task->mutable_compute()->mutable_attrs();
      for (int k = 0; k < 5; ++k) attrs["a" + std::to_string((k * 7 + t) % 5)].set_i(k + t);
    }
    RankMemoryProto* memory = plan.add_memory();
    memory->set_rank(r);
    memory->set_planned_bytes(64 * r);
  }
  plan.add_sbp_decisions()->set_op_name("relu");
  auto whole = [](PlanProto copy) {
    copy.clear_content_hash();
    std::string bytes;
    {
      google::protobuf::io::StringOutputStream stream(&bytes);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      copy.SerializeToCodedStream(&coded);
    }
    char text[32];
    std::snprintf(text, sizeof(text), "fnv1a64:%016llx",
                  static_cast<unsigned long long>(Fnv1a64(bytes)));
    return std::string(text);
  };
  EXPECT_EQ(PlanContentHash(plan), whole(plan));
  SealPlan(&plan);
  EXPECT_EQ(plan.content_hash(), whole(plan));
  EXPECT_TRUE(CheckPlanHash(plan).ok());
  plan.mutable_rank_plans(36)->mutable_tasks(3)->set_name("x");  // the last rank plan counts too
  EXPECT_EQ(CheckPlanHash(plan).code(), absl::StatusCode::kInvalidArgument);
  // An unknown field (e.g. from a newer writer) is hashed too.
  plan.GetReflection()->MutableUnknownFields(&plan)->AddVarint(99, 5);
  EXPECT_EQ(PlanContentHash(plan), whole(plan));
}

// A plan hashed in pieces (head, rank plans one at a time, tail) hashes like the whole plan.
TEST(PlanHashTest, StreamedHashEqualsTheWholePlansHash) {
  PlanProto plan = SamplePlan();
  for (int r = 2; r < 5; ++r) {
    plan.add_ranks(r);
    RankPlanProto* rank_plan = plan.add_rank_plans();
    rank_plan->set_rank(r);
    rank_plan->add_tasks()->set_name("t" + std::to_string(r));
    plan.add_memory()->set_rank(r);
  }
  plan.set_world_size(5);
  plan.add_sbp_decisions()->set_op_name("relu");
  plan.add_boxing_choices()->set_transition("x");
  plan.mutable_per_rank()->set_rank(1);
  auto streamed = [](const PlanProto& p) {
    StreamedPlanHash hash(p);  // reads the head fields only
    for (const RankPlanProto& rank_plan : p.rank_plans()) hash.AddRankPlan(DeterministicBytes(rank_plan));
    PlanProto tail = p;
    tail.clear_job_name();
    tail.clear_world_size();
    tail.clear_ranks();
    tail.clear_rank_plans();
    tail.clear_content_hash();
    return hash.Finish(tail);
  };
  EXPECT_EQ(streamed(plan), PlanContentHash(plan));
  PlanProto changed = plan;
  changed.mutable_rank_plans(2)->mutable_tasks(0)->set_name("y");
  EXPECT_NE(streamed(changed), streamed(plan));
  EXPECT_EQ(streamed(changed), PlanContentHash(changed));
  changed.set_pieces_per_step(7);
  EXPECT_EQ(streamed(changed), PlanContentHash(changed));
  // The tail in pieces: pieces_per_step, each SBP decision, the rest.
  StreamedPlanHash pieces(plan);
  for (const RankPlanProto& rank_plan : plan.rank_plans()) pieces.AddRankPlan(DeterministicBytes(rank_plan));
  PlanProto first;
  first.set_pieces_per_step(plan.pieces_per_step());
  pieces.AddFields(first);
  for (const OpSbpDecisionProto& d : plan.sbp_decisions()) pieces.AddElement(6, d);
  PlanProto rest;
  *rest.mutable_memory() = plan.memory();
  *rest.mutable_boxing_choices() = plan.boxing_choices();
  *rest.mutable_per_rank() = plan.per_rank();
  EXPECT_EQ(pieces.Finish(rest), PlanContentHash(plan));
}

}  // namespace
}  // namespace compiler
}  // namespace oneflow_like
