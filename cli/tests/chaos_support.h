// Support for the chaos suite (chaos_test.cc): a background load of greedy
// streaming calls whose tokens are checked against the single-process run,
// the figures each scenario prints, and the restart of a killed process with
// its own command line. Real processes on loopback (LocalPipeline).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "child_process.h"
#include "local_pipeline.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::cli::chaos {

using Clock = std::chrono::steady_clock;

// The model of the suite (`seam run`'s default checkpoint), written once.
const std::string& ModelDir();

// The prompts the load cycles through and their greedy tokens from a single
// in-process StageGroup (no pipeline, no coordinator).
constexpr int kLoadNewTokens = 12;
const std::vector<std::vector<int32_t>>& LoadPrompts();
const std::vector<std::vector<int32_t>>& ReferenceTokens();

// One streaming call of the load, as the client saw it.
struct CallRecord {
  int prompt = 0;
  std::vector<int32_t> tokens;
  grpc::StatusCode code = grpc::StatusCode::OK;
  std::string message;
  Clock::time_point start, end;
};

// `clients` threads, each calling Generate (streaming) back to back on its own
// channel until Stop(). `keepalive`: gRPC keepalive pings every second (the
// client's own way to notice a stopped coordinator).
class Load {
 public:
  Load(const LocalPipeline& pipeline, int clients, bool keepalive = false);
  ~Load();  // Stop()
  void Stop();
  std::vector<CallRecord> Records();
  // Waits until every client's call that was open at `fault` has ended (each
  // client has a record ending after it); false after `timeout`.
  bool InFlightEndedAfter(Clock::time_point fault, std::chrono::milliseconds timeout);

 private:
  void Client(int index);
  const LocalPipeline& pipeline_;
  bool keepalive_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<CallRecord> records_;
  std::vector<Clock::time_point> last_end_;  // per client
  std::vector<std::thread> threads_;
};

// What a scenario measured.
struct Figures {
  std::string scenario;
  double detection_s = -1;   // fault until the last call in flight ended (-1: none measured)
  double recovery_s = -1;    // repair until the first call succeeded again
  int completed = 0;         // load calls that ended OK
  int failed = 0;            // load calls that ended with an error
  int unavailable = 0;       // ... of which UNAVAILABLE
  int hung = 0;              // calls in flight at the fault still open 10 s after it
  int lost = 0;              // tokens missing from completed calls (or differing)
  int duplicated = 0;        // tokens too many in completed calls
  int bad_prefix = 0;        // failed calls whose streamed tokens are not a prefix of the reference
  int64_t drops = -1;        // forged messages counted by the stages (-1: not applicable)
};

// Figures of the load's calls around a fault at `fault`.
Figures Judge(const std::string& scenario, const std::vector<CallRecord>& records, Clock::time_point fault);
// One line "CHAOS <scenario> detection_s=... recovery_s=... ..." on stdout.
void Print(const Figures& f);

// Retries one short GenerateAll against `target` until it gives the
// reference tokens or `within` passes; the time it took.
absl::StatusOr<double> ServedAgainWithin(const LocalPipeline& p, const std::string& target,
                                         std::chrono::milliseconds within);

// A PP 2 pipeline of ModelDir() (or `model`) as `seam run` starts it (the
// processes of this build, or of $SEAM_CHAOS_BIN_DIR when set), with
// `stage_args` on every stage; `http`: the coordinator serves the HTTP API
// too. Null (with a test failure) when it does not start.
std::unique_ptr<LocalPipeline> StartPipeline(std::vector<std::string> stage_args = {},
                                             const std::string& model = ModelDir(),
                                             const std::string& stage_timeout = "10s", bool http = false,
                                             std::vector<std::string> coordinator_args = {});
// Stage k's status (a test failure when it does not answer).
v1::StageStatus StageStatusOf(const LocalPipeline& p, int k);
// Every data-plane message stage status `s` counts as dropped.
int64_t Drops(const v1::StageStatus& s);
// A process's resident memory now (VmRSS) and at its peak (VmHWM), in KiB; -1 if unreadable.
int64_t RssKiB(pid_t pid);
int64_t PeakRssKiB(pid_t pid);
// Resets VmHWM to the current resident size (/proc/PID/clear_refs "5").
void ResetPeakRss(pid_t pid);
// A UCX worker of an endpoint nobody named, connected to stage k's worker.
struct Forger {
  std::unique_ptr<handoff::UcxWorker> worker;
  handoff::UcxEndpoint endpoint;
};
absl::StatusOr<Forger> ConnectForger(const LocalPipeline& p, int k);

// Starts again a process that was killed, with the command line it had
// (read from /proc before the kill: `cmdline`), listening on `listen` and
// writing a fresh port file. Its log goes to <work_dir>/<name>.log.
std::vector<std::string> CommandLine(pid_t pid);
absl::StatusOr<std::unique_ptr<ChildProcess>> Respawn(const LocalPipeline& p, std::vector<std::string> cmdline,
                                                      const std::string& listen, const std::string& name);


}  // namespace seam::cli::chaos
