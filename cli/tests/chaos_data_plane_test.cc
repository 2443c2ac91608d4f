// The chaos suite's data-plane attempts (docs/RELIABILITY.md), each over a
// real PP 2 pipeline under a load of streaming calls checked token by token:
// an endpoint nobody named floods stage 1's UCX worker with forged payloads
// for the coming microbatch ids, sends a rendezvous-sized header and goes
// away, or floods it with a tag kind nobody uses; and a stage made slow by
// SIGSTOP for a bounded time. Each prints one "CHAOS" line of figures.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "chaos_support.h"
#include "seam/handoff/handoff_tag.h"
#include "seam/v1/coordinator_service.grpc.pb.h"

namespace seam::cli::chaos {
namespace {

bool HaveBinaries() { return access((std::string(SEAM_BIN_DIR) + "/seam-stage").c_str(), X_OK) == 0; }

// What a forgery must leave: calls served with the single-process tokens,
// nothing failed, the epoch where it was.
void ExpectUndisturbed(const Figures& f, const v1::StageStatus& before, const v1::StageStatus& after) {
  Print(f);
  EXPECT_GT(f.completed, 0) << f.scenario;
  EXPECT_EQ(f.failed, 0) << f.scenario;
  EXPECT_EQ(f.lost, 0) << f.scenario;
  EXPECT_EQ(f.duplicated, 0) << f.scenario;
  EXPECT_EQ(after.config().epoch(), before.config().epoch()) << f.scenario << ": the pipeline was reconfigured";
}

// Sends `count` messages of `bytes` bytes with the tags `tag(i)`, as fast as it can.
template <typename TagOf>
absl::Status Flood(Forger& f, int count, size_t bytes, TagOf tag) {
  const std::string payload(bytes, '\x42');
  for (int i = 0; i < count; ++i) {
    absl::Status sent =
        f.worker->Send(f.endpoint, tag(i), payload.data(), payload.size(), absl::Now() + absl::Seconds(10));
    if (!sent.ok()) return sent;
  }
  return absl::OkStatus();
}

// 20,000 four-byte payloads for the coming microbatch ids (1..2,000, ten
// tensor indices each, in the tag layout that carried ids), from an endpoint
// without the key. Before payloads were MAC'd and tags bound to the epoch's
// key they were taken as the real payloads: every call failed and only a
// restart of the stage cured it.
TEST(ChaosDataPlane, ForgedPayloadsForTheComingMicrobatchIdsAreDroppedAndCounted) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  const v1::StageStatus before = StageStatusOf(*p, 1);
  absl::StatusOr<Forger> forger = ConnectForger(*p, 1);
  ASSERT_TRUE(forger.ok()) << forger.status();
  const auto fault = Clock::now();
  ASSERT_TRUE(Flood(*forger, 20000, 4, [](int i) {
                return handoff::HandoffTag(handoff::HandoffKind::kTensor, 1 + i / 10, i % 10);
              }).ok());
  Load load(*p, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  load.Stop();
  Figures f = Judge("forged payloads (20,000 x 4 B, coming ids)", load.Records(), fault);
  const v1::StageStatus after = StageStatusOf(*p, 1);
  f.drops = Drops(after) - Drops(before);
  ExpectUndisturbed(f, before, after);
  EXPECT_EQ(f.drops, 20000) << after.handoff_drops().ShortDebugString();
  EXPECT_EQ(after.handoff_drops().unknown_peer() - before.handoff_drops().unknown_peer(), 20000u);
}

// A forger in a process of its own (forked before it makes any UCX state):
// connects to `address`, says "sending" on `report`, then sends `bytes`
// bytes under `tag`, which blocks until the stage fetches them.
pid_t ForkForger(const std::string& address, uint64_t tag, size_t bytes, int report) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  handoff::UcxWorkerOptions options;
  options.config = {{"TLS", "tcp"}};
  if (std::getenv("UCX_NET_DEVICES") == nullptr) options.config.push_back({"NET_DEVICES", "lo"});
  auto worker = handoff::UcxWorker::Create(options);
  if (!worker.ok()) _exit(2);
  auto endpoint = (*worker)->Connect(address);
  if (!endpoint.ok()) _exit(3);
  const std::string big(bytes, 'h');
  if (write(report, "s", 1) != 1) _exit(4);
  (void)(*worker)->Send(*endpoint, tag, big.data(), big.size(), absl::Now() + absl::Seconds(30));
  _exit(0);
}

// A 200 KB message under a header tag (a rendezvous: its bytes stay with the
// sender until fetched) from a process that is then killed. Before, the next
// real call failed UNAVAILABLE ("Request canceled"), 3 runs of 3.
TEST(ChaosDataPlane, AnOversizedHeaderWhoseSenderWasKilledDisturbsNothing) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(10)).ok());
  const v1::StageStatus before = StageStatusOf(*p, 1);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const auto fault = Clock::now();
  const pid_t forger = ForkForger(before.worker_address().ucx_address(),
                                  handoff::HandoffTag(handoff::HandoffKind::kHeader, 1, 0), 200 << 10, pipe_fds[1]);
  ASSERT_GT(forger, 0);
  char said = 0;
  ASSERT_EQ(read(pipe_fds[0], &said, 1), 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // its rendezvous announcement arrives
  kill(forger, SIGKILL);
  waitpid(forger, nullptr, 0);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  Load load(*p, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  load.Stop();
  Figures f = Judge("oversized header (200 KB), sender killed", load.Records(), fault);
  const v1::StageStatus after = StageStatusOf(*p, 1);
  f.drops = Drops(after) - Drops(before);
  ExpectUndisturbed(f, before, after);
  EXPECT_GE(f.drops, 1) << after.handoff_drops().ShortDebugString();  // the stray (and a failed transfer)
  EXPECT_LE(f.drops, 2) << after.handoff_drops().ShortDebugString();
}

// 20,000 messages of 8 KB under tag kind 5, which nothing uses. Before, UCX
// kept every one (60,000 took the stage from 187 to 900 MB, never counted or
// freed); now each is taken off the wire unread and counted.
TEST(ChaosDataPlane, AFloodOfAnUnusedTagKindIsDrainedCountedAndFreed) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline();
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(10)).ok());
  const pid_t stage = p->stage(1).pid();
  const v1::StageStatus before = StageStatusOf(*p, 1);
  const int64_t idle_kib = RssKiB(stage);
  absl::StatusOr<Forger> forger = ConnectForger(*p, 1);
  ASSERT_TRUE(forger.ok()) << forger.status();
  const auto fault = Clock::now();
  Load load(*p, 2);
  ASSERT_TRUE(Flood(*forger, 20000, 8192, [](int i) { return (uint64_t{5} << handoff::kTagKindShift) | i; }).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  load.Stop();
  Figures f = Judge("unused tag kind flood (20,000 x 8 KB)", load.Records(), fault);
  v1::StageStatus after = StageStatusOf(*p, 1);
  for (int i = 0; i < 50 && after.handoff_drops().unknown_kind() - before.handoff_drops().unknown_kind() < 20000; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    after = StageStatusOf(*p, 1);
  }
  f.drops = Drops(after) - Drops(before);
  const int64_t after_kib = RssKiB(stage);
  ExpectUndisturbed(f, before, after);
  std::printf("CHAOS %-36s stage1_rss_idle_mib=%.1f after_mib=%.1f ratio=%.2f (160 MB sent)\n", "unused tag kind flood",
              idle_kib / 1024.0, after_kib / 1024.0, static_cast<double>(after_kib) / idle_kib);
  EXPECT_EQ(after.handoff_drops().unknown_kind() - before.handoff_drops().unknown_kind(), 20000u)
      << after.handoff_drops().ShortDebugString();
  EXPECT_LT(after_kib, idle_kib * 5 / 4) << "the flood's 160 MB stayed in the stage";
}

// Stage 0 stopped for 1.5 s with a call's microbatch in flight, under a 1 s
// --stage-timeout floor: stage 1 runs out of the microbatch's budget waiting
// for its handoff and answers DEADLINE_EXCEEDED naming itself; stage 0,
// resumed, finds the budget spent and skips it. That call fails alone: the
// pipeline is not reconfigured (1.5 s is within the liveness probes' 3
// misses and the coordinator's grace past the budget), and the calls after
// it are served. Before, a stage's wait was a fixed --handoff-timeout
// whatever the microbatch's work, and a late handoff could break the link
// for the microbatches behind it.
TEST(ChaosDataPlane, ASlowStageFailsOnlyTheMicrobatchThatRanOutOfItsBudget) {
  if (!HaveBinaries()) GTEST_SKIP() << "no seam-stage";
  std::unique_ptr<LocalPipeline> p = StartPipeline({}, ModelDir(), "1s", false, {"--stage-timeout-per-token", "1ms"});
  ASSERT_NE(p, nullptr);
  ASSERT_TRUE(ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(10)).ok());
  const v1::StageStatus before = StageStatusOf(*p, 1);
  auto stub = v1::Coordinator::NewStub(p->ClientChannel());
  v1::GenerateRequest request;
  request.set_request_id("slow");
  request.add_prompts()->mutable_token_ids()->Add(LoadPrompts()[0].begin(), LoadPrompts()[0].end());
  request.mutable_sampling()->set_max_new_tokens(4);
  const auto fault = Clock::now();
  p->stage(0).Signal(SIGSTOP);  // the call's first microbatch reaches a stopped stage 0
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::GenerateResult result;
  grpc::Status status;
  std::thread call([&] { status = stub->GenerateAll(&context, request, &result); });
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  p->stage(0).Signal(SIGCONT);
  call.join();
  const double ended = std::chrono::duration<double>(Clock::now() - fault).count();
  absl::StatusOr<double> back = ServedAgainWithin(*p, p->coordinator_address(), std::chrono::seconds(10));
  const v1::StageStatus after = StageStatusOf(*p, 1);
  std::printf("CHAOS %-36s code=%d ended_s=%.2f served_again_s=%.2f epoch %lu->%lu\n", "slow stage (SIGSTOP 1.5 s)",
              static_cast<int>(status.error_code()), ended, back.ok() ? *back : -1.0,
              static_cast<unsigned long>(before.config().epoch()), static_cast<unsigned long>(after.config().epoch()));
  std::fflush(stdout);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();
  EXPECT_NE(status.error_message().find("ran out of its budget"), std::string::npos) << status.error_message();
  EXPECT_NE(status.error_message().find("pipeline rank 1"), std::string::npos) << status.error_message();
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << p->LogTails(20);
  EXPECT_EQ(after.config().epoch(), before.config().epoch()) << "one slow microbatch took the pipeline down";
  Load load(*p, 2);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  load.Stop();
  const Figures f = Judge("after the slow stage", load.Records(), fault);
  EXPECT_GT(f.completed, 0);
  EXPECT_EQ(f.failed, 0);
  EXPECT_EQ(f.lost, 0);
}

}  // namespace
}  // namespace seam::cli::chaos
