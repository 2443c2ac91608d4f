// The chaos suite (ctest -L chaos): real seam-stage and seam-coordinator
// processes on loopback under a load of streaming calls, hit by kill -9 and
// SIGSTOP of each process, forged control calls and forged UCX messages.
// Each scenario prints one "CHAOS" line of figures (docs/RELIABILITY.md), a
// stage's scenario also its recovery's timeline when that took over 2 s
// (chaos_timeline.h), and requires: calls in flight end (UNAVAILABLE) within
// 10 s and none hangs; service is back within 10 s of the repair; no
// completed call loses or duplicates a token against the single-process
// run; forged messages are refused or dropped and counted.
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "chaos_support.h"
#include "chaos_timeline.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/v1/coordinator_service.grpc.pb.h"
#include "seam/v1/stage_service.grpc.pb.h"
#include "seam/v1/stream_state.pb.h"
#include "seam/weights/model_config.h"
#include "seam/weights/random_checkpoint.h"
#include "seam/testing/temp_dir.h"

namespace seam::cli::chaos {
namespace {

constexpr auto kTen = std::chrono::seconds(10);

bool HaveBinaries() { return access((std::string(SEAM_BIN_DIR) + "/seam-stage").c_str(), X_OK) == 0; }

// The requirements every scenario shares.
void Expect(const Figures& f, bool in_flight_fail = true) {
  Print(f);
  EXPECT_EQ(f.hung, 0) << f.scenario;
  if (in_flight_fail) {
    EXPECT_GE(f.detection_s, 0) << f.scenario << ": no call was in flight at the fault";
    EXPECT_LT(f.detection_s, 10.0) << f.scenario;
    EXPECT_GT(f.unavailable, 0) << f.scenario;
  }
  EXPECT_GE(f.recovery_s, 0) << f.scenario;
  EXPECT_LT(f.recovery_s, 10.0) << f.scenario;
  EXPECT_GT(f.completed, 0) << f.scenario;
  EXPECT_EQ(f.lost, 0) << f.scenario;
  EXPECT_EQ(f.duplicated, 0) << f.scenario;
  EXPECT_EQ(f.bad_prefix, 0) << f.scenario;
}

// A recovery slower than this prints its timeline (chaos_timeline.h): the
// suite measures 0.1-0.3 s after a kill and after SIGCONT.
constexpr double kSlowRecoveryS = 2.0;

// Hits stage k with `signal` under load, repairs it (a new process on the
// same port after SIGKILL, SIGCONT after SIGSTOP) once the calls in flight
// ended, and judges. `stage` is the process now serving rank k.
Figures StageFault(LocalPipeline& p, int k, int signal, pid_t* stage_pid,
                   std::vector<std::unique_ptr<ChildProcess>>* respawned) {
  Load load(p, 3);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  const std::vector<std::string> cmdline = CommandLine(*stage_pid);
  const std::string what = absl::StrCat(signal == SIGKILL ? "kill -9" : "SIGSTOP", " stage ", k);
  const auto fault = Clock::now();
  Timeline timeline;
  EXPECT_EQ(kill(*stage_pid, signal), 0);
  const bool ended = load.InFlightEndedAfter(fault, std::chrono::seconds(15));
  EXPECT_TRUE(ended) << "calls in flight still open 15 s after the fault\n" << p.LogTails(20);
  timeline.Mark(ended ? "every call in flight at the fault has ended" : "calls in flight still open");
  if (signal == SIGKILL) {
    auto child = Respawn(p, cmdline, p.stage_address(k), absl::StrCat("stage", k, "-restart", respawned->size()));
    EXPECT_TRUE(child.ok()) << child.status();
    if (child.ok()) {
      *stage_pid = (*child)->pid();
      respawned->push_back(std::move(*child));
      timeline.Mark(absl::StrCat("stage ", k, " restarted: its new process wrote its port file"));
    }
  } else {
    EXPECT_EQ(kill(*stage_pid, SIGCONT), 0);
    timeline.Mark(absl::StrCat("SIGCONT to stage ", k));
  }
  absl::StatusOr<double> back = ServedAgainWithin(p, p.coordinator_address(), std::chrono::seconds(15));
  EXPECT_TRUE(back.ok()) << back.status() << "\n" << p.LogTails(20);
  timeline.Mark(back.ok() ? "served again (recovery_s ends)" : "not served again");
  if (!back.ok() || *back > kSlowRecoveryS) {
    std::printf("CHAOS %s: slow recovery; timeline, in seconds after the fault:\n%s", what.c_str(),
                timeline.Render(p.work_dir()).c_str());
    std::fflush(stdout);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the load runs on the repaired pipeline
  load.Stop();
  Figures f = Judge(what, load.Records(), fault);
  f.recovery_s = back.ok() ? *back : -1;
  return f;
}

TEST(Chaos, KillNineOfEachStage) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  std::vector<std::unique_ptr<ChildProcess>> respawned;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = p->stage(k).pid();
    Expect(StageFault(*p, k, SIGKILL, &pid, &respawned));
  }
}

// A stopped stage keeps its sockets open: its Run stream never breaks, and
// only the liveness probes (GetStatus every second, 3 missed) find it. The
// next stage may still be waiting for the stopped one's handoff of the old
// epoch: the reload for the new epoch cuts that wait short (and the
// microbatch's budget bounds it anyway; before budgets, recovery waited out
// a fixed --handoff-timeout: 10.2 s from SIGCONT once).
TEST(Chaos, SigstopOfEachStage) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  std::vector<std::unique_ptr<ChildProcess>> respawned;
  for (int k = 0; k < 2; ++k) {
    pid_t pid = p->stage(k).pid();
    Expect(StageFault(*p, k, SIGSTOP, &pid, &respawned));
  }
}

// kill -9 of the coordinator: a new one on the same port adopts the running
// stages. SIGSTOP of it: clients with gRPC keepalive (1 s pings, 2 s
// timeout) end their calls UNAVAILABLE; SIGCONT serves again at once.
TEST(Chaos, KillNineAndSigstopOfTheCoordinator) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  const pid_t first = p->coordinator_pid();
  ASSERT_GT(first, 0);
  const std::vector<std::string> cmdline = CommandLine(first);
  std::unique_ptr<ChildProcess> second;
  {
    Load load(*p, 3);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto fault = Clock::now();
    ASSERT_EQ(kill(first, SIGKILL), 0);
    EXPECT_TRUE(load.InFlightEndedAfter(fault, std::chrono::seconds(15)));
    const auto restart = Clock::now();
    auto child = Respawn(*p, cmdline, p->coordinator_address(), "coordinator-restart");
    ASSERT_TRUE(child.ok()) << child.status() << "\n" << p->LogTails(20);
    second = std::move(*child);
    const auto probing = Clock::now();
    absl::StatusOr<double> back = ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(15));
    EXPECT_TRUE(back.ok()) << back.status() << "\n" << p->LogTails(20);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    load.Stop();
    Figures f = Judge("kill -9 coordinator", load.Records(), fault);
    // From the new process's start: its bring-up (adoption) is the recovery.
    f.recovery_s = back.ok() ? std::chrono::duration<double>(probing - restart).count() + *back : -1;
    Expect(f);
  }
  {
    Load load(*p, 3, /*keepalive=*/true);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto fault = Clock::now();
    second->Signal(SIGSTOP);
    EXPECT_TRUE(load.InFlightEndedAfter(fault, std::chrono::seconds(15)));
    second->Signal(SIGCONT);
    absl::StatusOr<double> back = ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(15));
    EXPECT_TRUE(back.ok()) << back.status() << "\n" << p->LogTails(20);
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    load.Stop();
    Figures f = Judge("SIGSTOP coordinator (client keepalive)", load.Records(), fault);
    f.recovery_s = back.ok() ? *back : -1;
    Expect(f);
  }
}

// Control calls from outside: no client certificate (TLS without one, and
// plaintext) never reaches StageControl; no token never reaches the
// coordinator; an authenticated client that steals the next sequence number
// makes the coordinator move to a new epoch, served within 10 s.
TEST(Chaos, ForgedControlCalls) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline({"--handoff-timeout", "3"});
  ASSERT_NE(p, nullptr);
  Load load(*p, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  int refused = 0;
  for (int k = 0; k < 2; ++k) {
    security::ClientSecurityOptions no_cert = p->stage_client_security();
    no_cert.tls_client_cert_file.clear();
    no_cert.tls_client_key_file.clear();
    for (const security::ClientSecurityOptions& who : {no_cert, security::ClientSecurityOptions{}}) {
      auto channel = security::MakeChannel(who, p->stage_address(k));
      ASSERT_TRUE(channel.ok()) << channel.status();
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
      v1::ShutdownRequest request;
      request.set_abandon_in_flight(true);
      v1::StageStatus reply;
      const grpc::Status s = v1::StageControl::NewStub(*channel)->Shutdown(&context, request, &reply);
      EXPECT_FALSE(s.ok()) << "stage " << k << " took Shutdown from a client without the coordinator's certificate";
      refused += !s.ok();
    }
    EXPECT_EQ(StageStatusOf(*p, k).state(), v1::STAGE_STATE_READY);
  }
  {
    security::ClientSecurityOptions no_token = p->client_security();
    no_token.auth_token_file.clear();
    auto channel = security::MakeChannel(no_token, p->coordinator_address());
    ASSERT_TRUE(channel.ok()) << channel.status();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::GenerateRequest request;
    request.add_prompts()->add_token_ids(1);
    request.mutable_sampling()->set_max_new_tokens(1);
    v1::GenerateResult result;
    const grpc::Status s = v1::Coordinator::NewStub(*channel)->GenerateAll(&context, request, &result);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << s.error_message();
    refused += s.error_code() == grpc::StatusCode::UNAUTHENTICATED;
  }
  // An authenticated client (the coordinator's certificate) steals the next
  // sequence number: with the pipeline idle (under load the coordinator's own
  // descriptor usually wins the race), then calls find it out.
  load.Stop();
  std::vector<CallRecord> records = load.Records();
  auto stage_channel = p->StageChannel(0);
  ASSERT_TRUE(stage_channel.ok()) << stage_channel.status();
  auto stage = v1::StageControl::NewStub(*stage_channel);
  const v1::StageStatus s = StageStatusOf(*p, 0);
  const auto fault = Clock::now();
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    auto run = stage->Run(&context);
    v1::MicrobatchDescriptor d;
    d.set_microbatch_id(999999);
    d.set_epoch(s.config().epoch());
    d.set_sequence_number(s.last_sequence_number() + 1);
    v1::SequenceEntry* e = d.add_sequences();
    e->set_sequence_id(999999);
    e->add_token_ids(7);
    e->set_is_prefill(true);
    EXPECT_TRUE(run->Write(d));
    v1::MicrobatchResult r;
    EXPECT_TRUE(run->Read(&r));
    EXPECT_FALSE(r.has_error()) << r.error().message();  // the stage took it: the theft happened
    run->WritesDone();
    (void)run->Finish();
  }
  // The coordinator's next microbatch is refused: a new epoch, then service.
  Load after(*p, 2);
  const auto probing = Clock::now();
  absl::StatusOr<double> back = ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(15));
  EXPECT_TRUE(back.ok()) << back.status() << "\n" << p->LogTails(20);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  after.Stop();
  const std::vector<CallRecord> later = after.Records();
  records.insert(records.end(), later.begin(), later.end());
  Figures f = Judge("forged control calls + stolen sequence", records, fault);
  f.recovery_s = back.ok() ? std::chrono::duration<double>(probing - fault).count() + *back : -1;
  f.drops = refused;
  Print(f);
  EXPECT_EQ(refused, 5);  // 2 stages x (TLS without certificate, plaintext) + no token
  EXPECT_EQ(f.hung, 0);
  EXPECT_LT(f.recovery_s, 10.0);
  EXPECT_EQ(f.lost, 0);
  EXPECT_EQ(f.duplicated, 0);
  EXPECT_EQ(f.bad_prefix, 0);
  EXPECT_GE(StageStatusOf(*p, 0).config().epoch(), s.config().epoch() + 1) << "the theft was healed by a new epoch";
}

// An endpoint the coordinator never named sends stage 1's UCX worker a 64-byte
// message and a header claiming 64 GiB: both are dropped and counted, and
// the load goes on with the single-process tokens.
TEST(Chaos, ForgedUcxMessagesFromAnUnknownEndpoint) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  const v1::StageStatus before = StageStatusOf(*p, 1);
  handoff::UcxWorkerOptions options;
  if (std::getenv("UCX_NET_DEVICES") == nullptr) {
    options.config = {{"TLS", "tcp"}, {"NET_DEVICES", "lo"}};
  } else {
    options.config = {{"TLS", "tcp"}};
  }
  auto forger = handoff::UcxWorker::Create(options);
  ASSERT_TRUE(forger.ok()) << forger.status();
  auto endpoint = (*forger)->Connect(before.worker_address().ucx_address());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  Load load(*p, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const auto fault = Clock::now();
  const std::string garbage(64, '\x5a');
  absl::Status sent = (*forger)->Send(*endpoint, handoff::HandoffTag(handoff::HandoffKind::kHeader, 1, 0), garbage.data(), garbage.size(),
                                      absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(sent.ok()) << sent;
  v1::StreamState claim;
  claim.set_microbatch_id(1);
  claim.set_sequence_number(1);
  claim.set_epoch(before.config().epoch());
  v1::TensorDesc* huge = claim.add_tensors();
  huge->set_name("r0.hidden");
  huge->set_dtype(v1::DTYPE_F32);
  huge->add_shape(int64_t{1} << 28);
  huge->add_shape(64);
  huge->set_byte_size(uint64_t{64} << 30);
  const std::string bytes = claim.SerializeAsString();
  sent = (*forger)->Send(*endpoint, handoff::HandoffTag(handoff::HandoffKind::kHeader, 1, 0), bytes.data(), bytes.size(), absl::Now() + absl::Seconds(10));
  ASSERT_TRUE(sent.ok()) << sent;
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  load.Stop();
  absl::StatusOr<double> back = ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(10));
  Figures f = Judge("forged UCX messages (64 B + 64 GiB claim)", load.Records(), fault);
  f.detection_s = -1;  // nothing is to fail
  f.recovery_s = back.ok() ? *back : -1;
  const v1::StageStatus after = StageStatusOf(*p, 1);
  f.drops = Drops(after) - Drops(before);
  Print(f);
  EXPECT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(f.drops, 2) << after.handoff_drops().ShortDebugString();
  EXPECT_EQ(f.failed, 0);
  EXPECT_GT(f.completed, 0);
  EXPECT_EQ(f.lost, 0);
  EXPECT_EQ(f.duplicated, 0);
  EXPECT_EQ(after.config().epoch(), before.config().epoch()) << "the stream never broke";
}

// A prefill far longer than the --stage-timeout floor (300 ms here) is work,
// not a failure: the deadline adds --stage-timeout-per-token for each token.
// The stages bound their waits by the same budget (the descriptor carries
// it), not by --handoff-timeout: 1 s here, far shorter than the prefill
// stage 1 waits for.
TEST(Chaos, ALongPrefillOutlastsTheStageTimeoutFloor) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  const seam::testing::TempDir model("seam_chaos_wide_model");
  weights::ModelConfig c;
  c.architecture = "qwen3";
  c.num_hidden_layers = 2;
  c.hidden_size = 512;
  c.num_attention_heads = 8;
  c.num_key_value_heads = 4;
  c.head_dim = 64;
  c.intermediate_size = 2048;
  c.vocab_size = 256;
  c.max_position_embeddings = 4096;
  c.bos_token_id = 0;
  c.eos_token_id = 1;
  weights::RandomCheckpointOptions rc;
  rc.seed = 3;
  ASSERT_TRUE(weights::WriteRandomCheckpoint(c, rc, model.path()).ok());
  std::unique_ptr<LocalPipeline> p = StartPipeline({"--handoff-timeout", "1"}, model.path(), "300ms");
  ASSERT_NE(p, nullptr);
  auto stub = v1::Coordinator::NewStub(p->ClientChannel());
  v1::GenerateRequest request;
  request.set_request_id("long-prefill");
  v1::TokenSequence* prompt = request.add_prompts();
  for (int i = 0; i < 2000; ++i) prompt->add_token_ids((i * 37 + 11) % 256);
  request.mutable_sampling()->set_max_new_tokens(2);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::GenerateResult result;
  const auto start = Clock::now();
  const grpc::Status s = stub->GenerateAll(&context, request, &result);
  const double took = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("CHAOS %-36s work_s=%.2f floor_s=0.30 bound_s=%.2f ok=%d\n", "long prefill (2000 tokens)", took,
              0.3 + 0.1 * 2000, s.ok());
  std::fflush(stdout);
  ASSERT_TRUE(s.ok()) << s.error_message() << "\n" << p->LogTails(20);
  EXPECT_EQ(result.completions(0).token_ids_size(), 2);
  EXPECT_GT(took, 0.3) << "the prefill was not longer than the floor: the test shows nothing here";
}

}  // namespace
}  // namespace seam::cli::chaos
