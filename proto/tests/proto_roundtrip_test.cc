// Wire-format checks for seam's generated messages and services: binary and
// JSON round trips, rejection of truncated buffers, and the shape of the
// generated gRPC services.
#include <memory>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/empty.pb.h>
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "seam/v1/coordinator_service.grpc.pb.h"
#include "seam/v1/stage_service.grpc.pb.h"
#include "seam/v1/stream_state.pb.h"

namespace seam::v1 {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;

// A handoff header with every field, nested ones included, set to a value
// other than its default.
StreamState FullStreamState() {
  StreamState s;
  s.set_microbatch_id(41);
  s.set_sequence_number(7);
  s.set_epoch(3);
  s.set_state(StreamState::STATE_PENDING);
  s.mutable_owed()->set_sum_group(SUM_GROUP_ATTN_TP);
  s.mutable_owed()->set_row_movement(ROW_MOVEMENT_ATTN_DP_GATHER_PENDING);
  s.mutable_owed()->set_residual_update_owed(true);
  ProducerFacts* p = s.mutable_producer();
  p->set_stage_index(1);
  p->set_first_layer(12);
  p->set_last_layer(23);
  p->set_tp_size(4);
  p->set_attn_dp_size(2);
  p->set_last_stage_kind(STAGE_KIND_FFN);
  p->set_exit_policy("rs");
  p->set_row_form(ROW_FORM_ATTN_TP_SLICE);
  TensorDesc* t = s.add_tensors();
  t->set_name("hidden_states");
  t->set_dtype(DTYPE_BF16);
  t->add_shape(10);
  t->add_shape(2048);
  t->set_byte_size(10 * 2048 * 2);
  t->set_crc32c(0xDEADBEEFu);
  t->set_lane(1);
  t->set_offset(4096);
  t->set_mac(std::string(16, '\x6b'));
  s.set_transport(HANDOFF_TRANSPORT_CUDA_IPC);
  DeviceSlot* slot = s.mutable_device_slot();
  slot->set_link_id(0x1234567890ABCDEFull);
  slot->set_slot(1);
  slot->set_index(42);
  slot->set_checksum_seed(0xFEDCBA9876543210ull);
  DeviceLinkOffer* offer = s.mutable_device_offer();
  offer->set_link_id(0x1234567890ABCDEFull);
  offer->set_host_id("boot-id/host");
  offer->set_pid(4321);
  offer->set_slot_bytes(1 << 20);
  DeviceLane* lane = offer->add_lanes();
  lane->set_pci_bus_id("0000:19:00.0");
  lane->add_slot_memory(std::string(64, '\x01'));
  lane->add_slot_events(std::string(64, '\x02'));
  s.set_token_count(10);
  s.set_decode_step(3);
  s.set_mac(std::string(32, '\x5a'));
  s.set_payload_nonce(std::string(12, '\x4e'));
  s.add_attn_dp_row_counts(6);
  s.add_attn_dp_row_counts(4);
  return s;
}

// True when every field of `m`, and of every message field inside it, is set.
bool EveryFieldSet(const Message& m) {
  const Descriptor* d = m.GetDescriptor();
  const auto* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) {
      if (r->FieldSize(m, f) == 0) return false;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        for (int j = 0; j < r->FieldSize(m, f); ++j) {
          if (!EveryFieldSet(r->GetRepeatedMessage(m, f, j))) return false;
        }
      }
      continue;
    }
    if (!r->HasField(m, f)) return false;
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        !EveryFieldSet(r->GetMessage(m, f))) {
      return false;
    }
  }
  return true;
}

TEST(StreamStateProto, FixtureSetsEveryField) {
  // Guards the round-trip test below: a field added to the schema but not to
  // the fixture fails here.
  EXPECT_TRUE(EveryFieldSet(FullStreamState()));
}

TEST(StreamStateProto, EveryFieldSurvivesBinaryRoundTrip) {
  const StreamState sent = FullStreamState();
  std::string wire;
  ASSERT_TRUE(sent.SerializeToString(&wire));

  StreamState received;
  ASSERT_TRUE(received.ParseFromString(wire));
  std::string diff;
  MessageDifferencer differ;
  differ.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differ.Compare(sent, received)) << diff;
}

TEST(StreamStateProto, DifferencerSeesAChangedNestedField) {
  const StreamState sent = FullStreamState();
  StreamState changed = sent;
  changed.mutable_tensors(0)->set_crc32c(0);
  EXPECT_FALSE(MessageDifferencer::Equals(sent, changed));
}

TEST(StreamStateProto, UnknownFieldsAreKeptByAnOlderReader) {
  // An Empty message knows none of the fields, as a reader built from an
  // older schema would not know new ones: it keeps them and re-emits them.
  std::string wire;
  ASSERT_TRUE(FullStreamState().SerializeToString(&wire));
  google::protobuf::Empty older;
  ASSERT_TRUE(older.ParseFromString(wire));
  EXPECT_EQ(older.SerializeAsString(), wire);
}

TEST(StreamStateProto, TruncatedBufferFailsToParseEvenWhenUnknownFieldsAreTolerated) {
  std::string wire;
  ASSERT_TRUE(FullStreamState().SerializeToString(&wire));
  // The last field is the packed row-count list (length-delimited), so
  // dropping the final byte leaves a length that overruns the buffer.
  const std::string truncated = wire.substr(0, wire.size() - 1);

  StreamState typed;
  EXPECT_FALSE(typed.ParseFromString(truncated));
  google::protobuf::Empty tolerant;
  EXPECT_FALSE(tolerant.ParseFromString(truncated));
}

TEST(GenerateRequestProto, RoundTripsThroughJson) {
  GenerateRequest sent;
  sent.set_request_id("req-1");
  sent.add_prompts()->add_token_ids(151643);
  TokenSequence* second = sent.add_prompts();
  second->add_token_ids(1);
  second->add_token_ids(2);
  SamplingParams* sp = sent.mutable_sampling();
  sp->set_temperature(0.5f);
  sp->set_top_k(40);
  sp->set_top_p(0.875f);
  sp->set_seed(1234567890123ULL);
  sp->set_max_new_tokens(16);
  sp->add_stop_token_ids(151645);

  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(sent, &json).ok());
  // JSON uses the lowerCamelCase field names.
  EXPECT_NE(json.find("\"requestId\":\"req-1\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"maxNewTokens\":16"), std::string::npos) << json;

  GenerateRequest received;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &received).ok()) << json;
  EXPECT_TRUE(MessageDifferencer::Equals(sent, received)) << json;
}

TEST(ServiceProto, MethodsHaveTheDeclaredStreamingShapes) {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  struct Expected {
    const char* full_name;
    bool client_streaming;
    bool server_streaming;
  };
  for (const Expected& e : {
           Expected{"seam.v1.Coordinator.Generate", false, true},
           Expected{"seam.v1.Coordinator.GenerateAll", false, false},
           Expected{"seam.v1.Coordinator.Score", false, false},
           Expected{"seam.v1.Coordinator.GetMetadata", false, false},
           Expected{"seam.v1.StageControl.Configure", false, false},
           Expected{"seam.v1.StageControl.GetStatus", false, false},
           Expected{"seam.v1.StageControl.Drain", false, false},
           Expected{"seam.v1.StageControl.Shutdown", false, false},
           Expected{"seam.v1.StageControl.Run", true, true},
       }) {
    const auto* m = pool->FindMethodByName(e.full_name);
    ASSERT_NE(m, nullptr) << e.full_name;
    EXPECT_EQ(m->client_streaming(), e.client_streaming) << e.full_name;
    EXPECT_EQ(m->server_streaming(), e.server_streaming) << e.full_name;
  }
}

// Streams one response per prompt; enough to exercise the generated stubs.
class EchoCoordinator final : public Coordinator::Service {
  grpc::Status Generate(grpc::ServerContext*, const GenerateRequest* request,
                        grpc::ServerWriter<GenerateResponse>* writer) override {
    for (int i = 0; i < request->prompts_size(); ++i) {
      GenerateResponse r;
      r.set_request_id(request->request_id());
      r.set_sequence_index(static_cast<uint32_t>(i));
      r.mutable_token_ids()->CopyFrom(request->prompts(i).token_ids());
      r.set_finish_reason(FINISH_REASON_MAX_NEW_TOKENS);
      writer->Write(r);
    }
    return grpc::Status::OK;
  }
};

TEST(ServiceProto, GeneratedCoordinatorStreamsOverAnInProcessChannel) {
  EchoCoordinator service;
  grpc::ServerBuilder builder;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = Coordinator::NewStub(server->InProcessChannel(grpc::ChannelArguments()));

  GenerateRequest request;
  request.set_request_id("r");
  request.add_prompts()->add_token_ids(5);
  request.add_prompts()->add_token_ids(9);
  grpc::ClientContext ctx;
  auto reader = stub->Generate(&ctx, request);
  GenerateResponse response;
  int received = 0;
  while (reader->Read(&response)) {
    EXPECT_EQ(response.sequence_index(), static_cast<uint32_t>(received));
    EXPECT_EQ(response.token_ids(0), request.prompts(received).token_ids(0));
    ++received;
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(received, 2);

  // A method the service does not override answers UNIMPLEMENTED.
  grpc::ClientContext meta_ctx;
  Metadata metadata;
  grpc::Status status = stub->GetMetadata(&meta_ctx, GetMetadataRequest(), &metadata);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  server->Shutdown();
}

TEST(ServiceProto, GeneratedStageControlServiceCanBeSubclassed) {
  class IdleStage final : public StageControl::Service {
    grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest*,
                           StageStatus* status) override {
      status->set_state(STAGE_STATE_UNCONFIGURED);
      return grpc::Status::OK;
    }
  };
  IdleStage stage;
  grpc::ServerBuilder builder;
  builder.RegisterService(&stage);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = StageControl::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  grpc::ClientContext ctx;
  StageStatus status;
  ASSERT_TRUE(stub->GetStatus(&ctx, GetStatusRequest(), &status).ok());
  EXPECT_EQ(status.state(), STAGE_STATE_UNCONFIGURED);
  server->Shutdown();
}

}  // namespace
}  // namespace seam::v1
