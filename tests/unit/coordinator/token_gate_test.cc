// Which calls the token gate lets in, from their metadata alone.
#include "coordinator/token_gate.h"

#include <string>

#include "gtest/gtest.h"

namespace chimera::coordinator {
namespace {

constexpr char kClientToken[] = "client-token-0123456789";
constexpr char kWorkerToken[] = "worker-token-0123456789";

// The code the gate answers a call to `path` carrying `authorization`
// (none when empty).
grpc::StatusCode Admit(TokenGate& gate, const std::string& path,
                       const std::string& authorization) {
  grpc::AuthMetadataProcessor::InputMetadata metadata;
  if (!path.empty()) metadata.emplace(":path", path);
  if (!authorization.empty()) metadata.emplace("authorization", authorization);
  grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
  return gate.Process(metadata, nullptr, &consumed, &response).error_code();
}

TEST(TokenGateTest, EachServiceTakesItsOwnTokenOnly) {
  TokenGate gate(kClientToken, kWorkerToken);
  const std::string client = std::string("Bearer ") + kClientToken;
  const std::string worker = std::string("Bearer ") + kWorkerToken;
  EXPECT_EQ(Admit(gate, "/chimera.v1.JobService/SubmitJob", client), grpc::StatusCode::OK);
  EXPECT_EQ(Admit(gate, "/chimera.v1.WorkerService/Heartbeat", worker), grpc::StatusCode::OK);
  EXPECT_EQ(Admit(gate, "/chimera.v1.JobService/SubmitJob", worker),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Admit(gate, "/chimera.v1.WorkerService/Heartbeat", client),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Admit(gate, "/chimera.v1.JobService/GetJob", ""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Admit(gate, "/chimera.v1.JobService/GetJob", client + "x"),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Admit(gate, "/chimera.v1.JobService/GetJob", kClientToken),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenGateTest, HealthAndReflectionNeedNoToken) {
  TokenGate gate(kClientToken, kWorkerToken);
  EXPECT_EQ(Admit(gate, "/grpc.health.v1.Health/Check", ""), grpc::StatusCode::OK);
  EXPECT_EQ(Admit(gate, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", ""),
            grpc::StatusCode::OK);
}

// Without a path nothing says which token a call needs.
TEST(TokenGateTest, ACallWithoutAPathIsRefused) {
  TokenGate gate(kClientToken, kWorkerToken);
  EXPECT_EQ(Admit(gate, "", std::string("Bearer ") + kClientToken),
            grpc::StatusCode::UNAUTHENTICATED);
}

TEST(TokenGateTest, WithoutTokensEveryCallIsLetIn) {
  TokenGate gate("", "");
  EXPECT_EQ(Admit(gate, "/chimera.v1.JobService/SubmitJob", ""), grpc::StatusCode::OK);
  EXPECT_EQ(Admit(gate, "/chimera.v1.WorkerService/Heartbeat", ""), grpc::StatusCode::OK);
}

}  // namespace
}  // namespace chimera::coordinator
