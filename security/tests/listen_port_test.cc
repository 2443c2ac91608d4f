// One server per port: a port another socket listens on is refused, by our
// own listening sockets and by gRPC servers built with ListenExclusively,
// with "address already in use" and the port.
#include <unistd.h>

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "seam/security/listen_port.h"

namespace seam::security {
namespace {

using ::testing::HasSubstr;

TEST(ListenPort, ASecondListenerOnATakenPortIsRefusedNamingThePort) {
  absl::StatusOr<ListeningSocket> first = ListenTcp("127.0.0.1:0", 16);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_GT(first->port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", first->port);
  absl::StatusOr<ListeningSocket> second = ListenTcp(address, 16);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("cannot listen on ", address, ": address already in use (port ", first->port, ")")));
  EXPECT_THAT(CheckCanListen(address, "--http-listen").message(), HasSubstr("address already in use"));
  EXPECT_THAT(CheckCanListen(address, "--http-listen").message(), HasSubstr("(--http-listen)"));
  close(first->fd);
  EXPECT_TRUE(CheckCanListen(address, "--http-listen").ok()) << "the port is free once the first socket closed";
}

TEST(ListenPort, AnAddressThatIsNotHostPortIsInvalid) {
  EXPECT_EQ(ListenTcp("127.0.0.1", 16).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ListenTcp("127.0.0.1:70000", 16).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ListenPort, AGrpcServerBuiltExclusivelyCannotShareAPortWithAnother) {
  grpc::CallbackGenericService unimplemented;  // a server needs a service
  grpc::ServerBuilder first_builder;
  ListenExclusively(first_builder);
  first_builder.RegisterCallbackGenericService(&unimplemented);
  int port = 0;
  first_builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> first = first_builder.BuildAndStart();
  ASSERT_NE(first, nullptr);
  ASSERT_GT(port, 0);
  const std::string address = absl::StrCat("127.0.0.1:", port);
  grpc::CallbackGenericService unimplemented_too;
  grpc::ServerBuilder second_builder;
  ListenExclusively(second_builder);
  second_builder.RegisterCallbackGenericService(&unimplemented_too);
  int second_port = 0;
  second_builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &second_port);
  std::unique_ptr<grpc::Server> second = second_builder.BuildAndStart();
  EXPECT_TRUE(second == nullptr || second_port == 0) << "two gRPC servers share port " << port;
  EXPECT_THAT(ListenFailure(address, "--listen").message(),
              HasSubstr(absl::StrCat("address already in use (port ", port, ") (--listen)")));
  first->Shutdown();
}

}  // namespace
}  // namespace seam::security
