// The plaintext health-only port follows the status it is given.
#include "seam/security/health_port.h"

#include <future>

#include <grpcpp/generic/generic_stub.h>
#include <gtest/gtest.h>

namespace seam::security {
namespace {

// grpc.health.v1 Check of the whole server: the ServingStatus number, -1 on error.
int Check(int port) {
  grpc::GenericStub stub(grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::Slice empty(std::string{});
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  if (!done.get_future().get().ok()) return -1;
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok() || slices.empty() || slices[0].size() < 2) return 0;
  return slices[0].begin()[1];
}

TEST(HealthPort, ReportsWhatItIsToldWithoutTls) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(Check((*port)->port()), 2);  // NOT_SERVING until told
  (*port)->SetServing("seam.v1.StageControl", true);
  EXPECT_EQ(Check((*port)->port()), 1);  // SERVING
}

}  // namespace
}  // namespace seam::security
