// Handoff headers as wire bytes, in process: sealing under a key and the
// checks CheckHeaderBytes makes before the receiver trusts a field.
#include "src/handoff_header.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "src/header_mac.h"
#include "tests/handoff_fixture.h"

namespace seam::handoff {
namespace {

using ::testing::HasSubstr;

constexpr char kKey[] = "epoch 1 handoff key";

v1::StreamState Described() {
  v1::StreamState header = testing::Header(7, 3, 1);
  v1::TensorDesc* desc = header.add_tensors();
  desc->set_name("hidden");
  desc->set_dtype(v1::DTYPE_F32);
  desc->add_shape(7);
  desc->add_shape(96);
  desc->set_byte_size(7 * 96 * 4);
  desc->set_crc32c(0x1234abcd);
  return header;
}

TEST(HandoffHeaderTest, SealedHeaderChecksBackUnderItsKeyWithoutItsMac) {
  const std::string sealed = SealHeader(Described(), kKey).value();
  const std::string plain = SealHeader(Described(), "").value();
  EXPECT_EQ(sealed.size(), plain.size() + kMacFieldBytes);
  EXPECT_EQ(sealed.substr(0, plain.size()), plain);
  // The MAC travels as StreamState.mac: a plain parse sees it.
  v1::StreamState parsed;
  ASSERT_TRUE(parsed.ParseFromString(sealed));
  EXPECT_EQ(parsed.mac(), HeaderMac(kKey, plain).value());
  auto checked = CheckHeaderBytes(sealed, kKey, HeaderLimits{});
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_TRUE(checked->mac().empty());
  EXPECT_EQ(checked->SerializeAsString(), Described().SerializeAsString());
}

TEST(HandoffHeaderTest, AMacGivenBySenderIsReplaced) {
  v1::StreamState header = Described();
  header.set_mac("stale");
  EXPECT_EQ(SealHeader(header, kKey).value(), SealHeader(Described(), kKey).value());
}

TEST(HandoffHeaderTest, KeylessReceiverAcceptsASealedHeader) {
  auto checked = CheckHeaderBytes(SealHeader(Described(), kKey).value(), "", HeaderLimits{});
  ASSERT_TRUE(checked.ok()) << checked.status();
  EXPECT_TRUE(checked->mac().empty());
}

TEST(HandoffHeaderTest, HeaderWithoutMacIsPermissionDeniedUnderAKey) {
  const std::string plain = SealHeader(Described(), "").value();
  const absl::Status status = CheckHeaderBytes(plain, kKey, HeaderLimits{}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(), HasSubstr("carries no MAC; the receiver has a key"));
}

TEST(HandoffHeaderTest, EveryAlteredByteFailsTheMac) {
  const std::string sealed = SealHeader(Described(), kKey).value();
  for (size_t i = 0; i < sealed.size(); ++i) {
    std::string altered = sealed;
    altered[i] ^= 0x01;
    const absl::Status status = CheckHeaderBytes(altered, kKey, HeaderLimits{}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << "byte " << i << ": " << status;
  }
}

TEST(HandoffHeaderTest, OtherKeyIsPermissionDenied) {
  const absl::Status status =
      CheckHeaderBytes(SealHeader(Described(), "epoch 0 handoff key").value(), kKey, HeaderLimits{}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << status;
  EXPECT_THAT(status.message(), HasSubstr("MAC does not verify under the receiver's key"));
}

TEST(HandoffHeaderTest, LongerThanMaxHeaderBytesIsOutOfRangeBeforeAnyOtherCheck) {
  HeaderLimits limits;
  limits.max_header_bytes = 16;
  const absl::Status status = CheckHeaderBytes(SealHeader(Described(), kKey).value(), kKey, limits).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  EXPECT_THAT(status.message(), HasSubstr("is longer than 16 bytes (max_header_bytes)"));
}

TEST(HandoffHeaderTest, PayloadOverMaxPayloadBytesIsOutOfRangeNamingTheTensor) {
  HeaderLimits limits;
  limits.max_payload_bytes = 7 * 96 * 4 - 1;
  const absl::Status status = CheckHeaderBytes(SealHeader(Described(), kKey).value(), kKey, limits).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange) << status;
  EXPECT_THAT(status.message(), HasSubstr("microbatch 7: tensors up to 'hidden' take more than 2687 bytes"));
}

TEST(HandoffHeaderTest, ByteSizeUnlikeTheShapeIsInvalidArgument) {
  v1::StreamState header = Described();
  header.mutable_tensors(0)->set_byte_size(1);
  const absl::Status status = CheckHeaderBytes(SealHeader(header, kKey).value(), kKey, HeaderLimits{}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("tensor 'hidden': byte_size 1 does not match"));
}

TEST(HandoffHeaderTest, EmptyTensorNameIsInvalidArgument) {
  v1::StreamState header = Described();
  header.mutable_tensors(0)->set_name("");
  const absl::Status status = CheckHeaderBytes(SealHeader(header, kKey).value(), kKey, HeaderLimits{}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("a tensor has an empty name"));
}

TEST(HandoffHeaderTest, MacdBytesThatAreNoStreamStateAreInvalidArgument) {
  const std::string sealed = SealHeaderBytes(std::string("\xff\xff\xff", 3), kKey).value();
  const absl::Status status = CheckHeaderBytes(sealed, kKey, HeaderLimits{}).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("does not parse as seam.v1.StreamState"));
}

}  // namespace
}  // namespace seam::handoff
