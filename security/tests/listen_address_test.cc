// Plaintext only on loopback: which addresses are loopback, and the refusal.
#include "seam/security/listen_address.h"

#include <gtest/gtest.h>

namespace seam::security {
namespace {

TEST(ListenAddress, HostOfAddress) {
  EXPECT_EQ(HostOfAddress("127.0.0.1:0"), "127.0.0.1");
  EXPECT_EQ(HostOfAddress("[::1]:50051"), "::1");
  EXPECT_EQ(HostOfAddress("::1"), "::1");
  EXPECT_EQ(HostOfAddress("localhost:5"), "localhost");
  EXPECT_EQ(HostOfAddress("dns:///seam-stage-0.seam-stage:50051"), "seam-stage-0.seam-stage");
  EXPECT_EQ(HostOfAddress(":50051"), "");
  EXPECT_EQ(HostOfAddress("0.0.0.0:50051"), "0.0.0.0");
}

TEST(ListenAddress, LoopbackIs127Slash8AndColonColon1AndLocalhost) {
  for (const char* a : {"127.0.0.1:0", "127.255.3.4:80", "[::1]:1", "localhost:50051", "LOCALHOST:1",
                        "[::ffff:127.0.0.1]:5", "unix:/tmp/seam.sock"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (const char* a : {"0.0.0.0:50051", "[::]:50051", ":50051", "10.0.0.1:5", "128.0.0.1:1", "[::2]:1",
                        "localhost.example.com:1", "seam-stage-0:50051"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(ListenAddress, PlaintextOnEveryInterfaceIsRefusedUnlessInsecure) {
  EXPECT_TRUE(CheckPlaintextListen("127.0.0.1:0", false).ok());
  const absl::Status refused = CheckPlaintextListen("0.0.0.0:50051", false);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("refusing to listen on 0.0.0.0:50051 without TLS"), std::string::npos) << refused;
  EXPECT_NE(refused.message().find("--insecure"), std::string::npos) << refused;
  EXPECT_TRUE(CheckPlaintextListen("0.0.0.0:50051", true).ok());
}

}  // namespace
}  // namespace seam::security
