#include "schedule/params_proto.h"

#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace chimera::schedule {
namespace {

using ::testing::HasSubstr;

TEST(ParamsProtoTest, EverySchemeRoundTripsThroughAPlan) {
  for (auto scheme :
       {Scheme::kGpipe, Scheme::kOneFOneB, Scheme::kGems, Scheme::kChimera,
        Scheme::kMixPipe, Scheme::kInterleaved, Scheme::kBreadthFirst}) {
    ScheduleParams p;
    p.scheme = scheme;
    p.depth = 4;
    p.width = 2;
    p.micro_batches = 8;
    p.pipelines = 4;
    p.concat = Concat::kBackwardHalving;
    p.policy = WarmupPolicy::kPb;
    p.mixpipe_k = 2;
    p.mixpipe_gamma = 1;
    p.chunks = 2;
    p.recompute = true;
    chimera::v1::Plan plan;
    SetScheduleParams(p, 3, &plan);
    EXPECT_EQ(plan.micro_batch_size(), 3);
    absl::StatusOr<ScheduleParams> back = ScheduleParamsOf(plan);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->scheme, p.scheme);
    EXPECT_EQ(back->depth, 4);
    EXPECT_EQ(back->width, 2);
    EXPECT_EQ(back->micro_batches, 8);
    EXPECT_TRUE(back->recompute);
    if (scheme == Scheme::kChimera) {
      EXPECT_EQ(back->pipelines, 4);
      EXPECT_EQ(back->concat, Concat::kBackwardHalving);
    }
    if (scheme == Scheme::kMixPipe) {
      EXPECT_EQ(back->mixpipe_gamma, 1);
    }
    if (scheme == Scheme::kInterleaved) {
      EXPECT_EQ(back->chunks, 2);
    }
  }
}

TEST(ParamsProtoTest, UnknownSchemeInAPlanNamesTheField) {
  chimera::v1::Plan plan;
  plan.set_scheme("zigzag");
  EXPECT_THAT(ScheduleParamsOf(plan).status().message(),
              HasSubstr("plan.scheme: 'zigzag'"));
}

chimera::v1::ParallelismSpec Parallelism(const std::string& scheme, int depth) {
  chimera::v1::ParallelismSpec spec;
  spec.set_schedule(scheme);
  spec.set_pipeline(depth);
  return spec;
}

std::vector<std::string> Paths(const FieldErrors& errors) {
  std::vector<std::string> paths;
  for (const FieldError& e : errors.errors()) paths.push_back(e.path);
  return paths;
}

TEST(ParamsFromSpecTest, GivenKnobsAreReadAndMarkedGiven) {
  chimera::v1::ParallelismSpec spec = Parallelism("chimera", 4);
  spec.set_data(2);
  spec.set_micro_batches(8);
  spec.set_pipelines(4);
  spec.set_concat("backward-halving");
  SpecParams fixed;
  FieldErrors errors = ScheduleParamsFromSpec(spec, {}, &fixed);
  ASSERT_TRUE(errors.empty()) << errors.ToStatus();
  EXPECT_TRUE(fixed.FixesSchedule());
  EXPECT_EQ(fixed.params.scheme, Scheme::kChimera);
  EXPECT_EQ(fixed.params.pipelines, 4);
  EXPECT_EQ(fixed.params.concat, Concat::kBackwardHalving);
  EXPECT_TRUE(fixed.Gives(ScheduleParam::kConcat));
  EXPECT_FALSE(fixed.Gives(ScheduleParam::kSync));
  EXPECT_EQ(fixed.params.sync, ScheduleParams().sync);
}

TEST(ParamsFromSpecTest, MicroBatchSizeWithFixedDataGivesTheMicroBatches) {
  chimera::v1::ParallelismSpec spec = Parallelism("1f1b", 2);
  spec.set_data(2);
  chimera::v1::TrainingSpec training;
  training.set_global_batch_size(32);
  training.set_micro_batch_size(4);
  SpecParams fixed;
  ASSERT_TRUE(ScheduleParamsFromSpec(spec, training, &fixed).empty());
  EXPECT_TRUE(fixed.Gives(ScheduleParam::kMicroBatches));
  EXPECT_EQ(fixed.params.micro_batches, 4);
}

TEST(ParamsFromSpecTest, KnobOfAnotherSchemeIsRefusedNamingItsField) {
  chimera::v1::ParallelismSpec spec = Parallelism("gpipe", 2);
  spec.set_chunks(2);
  spec.set_policy("pb");
  SpecParams fixed;
  FieldErrors errors = ScheduleParamsFromSpec(spec, {}, &fixed);
  EXPECT_THAT(Paths(errors), ::testing::UnorderedElementsAre("spec.parallelism.chunks",
                                                             "spec.parallelism.policy"));
  EXPECT_THAT(errors.ToStatus().message(),
              HasSubstr("only applies to schedule interleaved or breadth-first, not 'gpipe'"));
}

TEST(ParamsFromSpecTest, ErrorsUseTheCallersNamesForParameters) {
  chimera::v1::ParallelismSpec spec = Parallelism("chimera", 3);
  SpecParams fixed;
  FieldErrors errors = ScheduleParamsFromSpec(
      spec, {}, &fixed, [](ScheduleParam p) { return "--" + ScheduleParamName(p); });
  EXPECT_THAT(Paths(errors), ::testing::ElementsAre("--depth"));
  EXPECT_THAT(errors.ToStatus().message(), HasSubstr("3 must be even"));
}

TEST(ParamsFromSpecTest, OpenSchemeLeavesEverythingToThePlanner) {
  chimera::v1::ParallelismSpec spec;
  spec.set_pipeline(4);
  spec.set_chunks(2);
  SpecParams fixed;
  EXPECT_TRUE(ScheduleParamsFromSpec(spec, {}, &fixed).empty());
  EXPECT_FALSE(fixed.FixesSchedule());
  EXPECT_TRUE(fixed.Gives(ScheduleParam::kChunks));
}

TEST(ParamsFromSpecTest, OutOfRangeSizesAndUnknownNamesAreEachReported) {
  chimera::v1::ParallelismSpec spec = Parallelism("zigzag", 0);
  spec.set_mixpipe_gamma(-1);
  spec.set_sync("sometimes");
  SpecParams fixed;
  EXPECT_THAT(Paths(ScheduleParamsFromSpec(spec, {}, &fixed)),
              ::testing::UnorderedElementsAre(
                  "spec.parallelism.pipeline", "spec.parallelism.mixpipeGamma",
                  "spec.parallelism.schedule", "spec.parallelism.sync"));
}

// Sharding needs gradient groups of two or more: a width above 1, or a
// bidirectional schedule at any width; a width the spec leaves open is
// the planner's to choose above 1.
TEST(ParamsFromSpecTest, ShardingIsRefusedWhereNoStageHasAGroupNamingTheField) {
  for (const auto& [scheme, data, refused] :
       {std::tuple{"1f1b", 1, true}, std::tuple{"breadth-first", 1, true},
        std::tuple{"zbv", 1, true}, std::tuple{"1f1b", 2, false},
        std::tuple{"chimera", 1, false}, std::tuple{"gems", 1, false},
        std::tuple{"1f1b", 0, false}}) {
    for (const auto& [name, mode] :
         {std::pair{"optimizer", Sharding::kOptimizer},
          std::pair{"gradients-and-optimizer",
                    Sharding::kGradientsAndOptimizer},
          std::pair{"full", Sharding::kFull}}) {
      chimera::v1::ParallelismSpec spec = Parallelism(scheme, 2);
      if (data > 0) spec.set_data(data);
      spec.set_sharding(name);
      SpecParams fixed;
      const FieldErrors errors = ScheduleParamsFromSpec(spec, {}, &fixed);
      SCOPED_TRACE(absl::StrCat(scheme, " data ", data, " sharding ", name));
      if (!refused) {
        EXPECT_TRUE(errors.empty()) << errors.ToStatus();
        EXPECT_EQ(fixed.params.sharding, mode);
        EXPECT_TRUE(fixed.Gives(ScheduleParam::kSharding));
        continue;
      }
      EXPECT_THAT(Paths(errors),
                  ::testing::ElementsAre("spec.parallelism.sharding"));
      EXPECT_THAT(
          errors.ToStatus().message(),
          HasSubstr(absl::StrCat(name,
                                 " needs gradient groups of two "
                                 "or more workers, and at data width 1 ",
                                 scheme, " holds every stage on one worker")));
    }
  }
}

TEST(ParamsFromSpecTest, AnUnknownShardingIsRefusedListingTheModes) {
  chimera::v1::ParallelismSpec spec = Parallelism("chimera", 2);
  spec.set_sharding("zero3");
  SpecParams fixed;
  const FieldErrors errors = ScheduleParamsFromSpec(spec, {}, &fixed);
  EXPECT_THAT(Paths(errors),
              ::testing::ElementsAre("spec.parallelism.sharding"));
  EXPECT_THAT(errors.ToStatus().message(), HasSubstr("'zero3'"));
  EXPECT_THAT(errors.ToStatus().message(),
              HasSubstr("none, optimizer, gradients-and-optimizer, full"));
}

TEST(ParamsProtoTest, ShardingRoundTripsThroughAPlan) {
  ScheduleParams p;
  p.scheme = Scheme::kChimera;
  p.depth = 4;
  p.micro_batches = 4;
  p.sharding = Sharding::kGradientsAndOptimizer;
  chimera::v1::Plan plan;
  SetScheduleParams(p, 2, &plan);
  EXPECT_EQ(plan.sharding(), "gradients-and-optimizer");
  absl::StatusOr<ScheduleParams> back = ScheduleParamsOf(plan);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sharding, Sharding::kGradientsAndOptimizer);
  // A plan of before sharding existed reads as none.
  plan.clear_sharding();
  EXPECT_EQ(ScheduleParamsOf(plan)->sharding, Sharding::kNone);
}

TEST(KnobTableTest, EachSchemeOnlyKnobAppliesToItsSchemes) {
  EXPECT_TRUE(KnobApplies(ScheduleParam::kPipelines, Scheme::kChimera));
  EXPECT_FALSE(KnobApplies(ScheduleParam::kPipelines, Scheme::kGems));
  EXPECT_TRUE(KnobApplies(ScheduleParam::kPolicy, Scheme::kOneFOneB));
  EXPECT_FALSE(KnobApplies(ScheduleParam::kPolicy, Scheme::kChimera));
  EXPECT_TRUE(KnobApplies(ScheduleParam::kChunks, Scheme::kBreadthFirst));
  EXPECT_FALSE(KnobApplies(ScheduleParam::kMixPipeGamma, Scheme::kGpipe));
  EXPECT_TRUE(KnobApplies(ScheduleParam::kSync, Scheme::kGpipe));
  EXPECT_EQ(SchemesReading(ScheduleParam::kChunks), "interleaved or breadth-first");
}

// The translations find each knob's field by its name; a row that names no
// field, or one of another type, would break every job at its first use.
TEST(KnobTableTest, EveryKnobNamesAFieldOfItsKindInTheSpecAndThePlan) {
  for (const Knob& knob : kKnobs) {
    for (const google::protobuf::Descriptor* message :
         {chimera::v1::ParallelismSpec::descriptor(),
          chimera::v1::Plan::descriptor()}) {
      const google::protobuf::FieldDescriptor* field =
          message->FindFieldByCamelcaseName(std::string(knob.field));
      ASSERT_NE(field, nullptr)
          << message->name() << " has no field " << knob.field;
      EXPECT_EQ(field->cpp_type(),
                knob.names != nullptr
                    ? google::protobuf::FieldDescriptor::CPPTYPE_STRING
                    : google::protobuf::FieldDescriptor::CPPTYPE_INT32)
          << message->name() << "." << knob.field;
    }
  }
}

TEST(KnobTableTest, EveryKnobSetInASpecIsReadBackAsGiven) {
  ScheduleParams p;
  p.pipelines = 4;
  p.concat = Concat::kBackwardHalving;
  p.policy = WarmupPolicy::kPb;
  p.sync = Sync::kEnd;
  p.mixpipe_k = 4;
  p.mixpipe_gamma = 3;
  p.chunks = 2;
  p.sharding = Sharding::kOptimizer;
  p.replication = {2, 1};
  for (const Knob& knob : kKnobs) {
    chimera::v1::ParallelismSpec spec;
    SetSpecKnob(knob, p, &spec);
    SpecParams read;
    ASSERT_TRUE(ScheduleParamsFromSpec(spec, {}, &read).empty()) << knob.field;
    if (knob.param == ScheduleParam::kReplication) {
      // A replication names every stage: it gives the depth too.
      EXPECT_THAT(read.given, ::testing::UnorderedElementsAre(
                                  ScheduleParam::kDepth, knob.param));
      EXPECT_EQ(read.params.depth, 2);
    } else {
      EXPECT_THAT(read.given, ::testing::ElementsAre(knob.param)) << knob.field;
    }
    if (knob.names != nullptr) {
      EXPECT_EQ(knob.names->name(read.params), knob.names->name(p))
          << knob.field;
    } else {
      EXPECT_EQ(read.params.*knob.number, p.*knob.number) << knob.field;
    }
  }
}

}  // namespace
}  // namespace chimera::schedule
