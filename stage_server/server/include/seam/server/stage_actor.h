// StageActor: the one thread that owns a stage server's state, its UCX worker
// and its model. Control calls and microbatch descriptors arrive as messages
// in a mailbox and run strictly in arrival order; answers go back through the
// callbacks given with each message, called on the actor thread. Callers
// never block on the actor (except WaitStopped, meant for main()).
// Shutdown works like a gate: Drain stops taking new descriptors, the
// mailbox empties, then the state is STOPPED.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "seam/core/device.h"
#include "seam/handoff/handoff.h"
#include "seam/handoff/ucx_worker.h"
#include "seam/runtime/stage_group.h"
#include "seam/v1/stage_service.pb.h"

namespace seam::server {

class MicrobatchRunner;
class StageMetrics;

struct StageActorOptions {
  handoff::UcxWorkerOptions ucx;                        // the data-plane worker
  std::string host;                                     // reported in the worker address, for diagnostics
  absl::Duration handoff_timeout = absl::Seconds(10);  // longest wait for a neighbour per microbatch
  bool run_ahead = true;  // MicrobatchRunner::set_run_ahead
  runtime::StageGroupOptions group;                    // where and how the stage's ranks compute
  boundary::ReductionPolicy policy = boundary::ReductionPolicy::kAuto;  // the boundaries' (resolved at load)
  // Called (on the actor thread, or the caller's for Drain) when the stage
  // starts or stops accepting microbatches: the health status to publish.
  std::function<void(bool serving)> on_serving;
  StageMetrics* metrics = nullptr;  // times steps and handoffs when set; outlives the actor
};

class StageActor {
 public:
  // Starts the actor thread and creates the UCX worker on it.
  static absl::StatusOr<std::unique_ptr<StageActor>> Start(StageActorOptions options);
  ~StageActor();  // abandons what is queued and joins the thread

  // Thread-safe snapshot.
  v1::StageStatus Status() const;

  using StatusCallback = std::function<void(absl::Status, v1::StageStatus)>;
  // INVALID_ARGUMENT (state unchanged) for a config that fails its checks,
  // FAILED_PRECONDITION for a second Configure with a different config or
  // after Drain; otherwise loads it (LOADING) and answers once READY or
  // FAILED (an OK call whose status carries the error).
  void Configure(const v1::StageConfig& config, StatusCallback done);

  // Queues a descriptor; `done` gets its answers: one, or for a multi-step
  // decode descriptor on the last stage one per step, all but the last with
  // `more` set. After Drain it is answered at once with FAILED_PRECONDITION.
  void Submit(v1::MicrobatchDescriptor descriptor, std::function<void(v1::MicrobatchResult)> done);

  // Stops taking descriptors (DRAINING), finishes those queued, then STOPPED.
  // With `abandon`, queued descriptors are answered CANCELLED instead of run.
  void Drain(bool abandon, std::function<void(v1::StageStatus)> done);

  // Blocks until STOPPED or `deadline`; true when stopped.
  bool WaitStopped(absl::Time deadline) const;

 private:
  explicit StageActor(StageActorOptions options);
  void Post(std::function<void()> task);
  void Loop(std::promise<absl::Status>* started);
  // `previous_key`: the handoff key of the epoch this load replaces ("" for the first).
  void Load(v1::StageConfig config, StatusCallback done, const std::string& previous_key = "");
  // A later epoch of the same layout: ends the running one (its waits, its
  // data plane, its sequences), then loads `config`. `asked`: when its
  // Configure came (the reload logs how long the work ahead of it held it).
  void Reload(const v1::StageConfig& config, StatusCallback done, const std::string& previous_key, absl::Time asked);
  // Load's parts: the stage group of `config`'s layers, and the runner
  // around it with the neighbours' endpoints.
  absl::StatusOr<std::unique_ptr<runtime::StageGroup>> LoadGroup(const v1::StageConfig& config,
                                                                 const weights::ModelConfig& model);
  absl::StatusOr<std::unique_ptr<MicrobatchRunner>> MakeRunner(const v1::StageConfig& config,
                                                               const weights::ModelConfig& model,
                                                               std::unique_ptr<runtime::StageGroup> group,
                                                               const std::string& previous_key);
  void SetServing(bool serving);
  v1::StageStatus StatusLocked() const;

  StageActorOptions options_;
  std::thread thread_;

  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  std::deque<std::function<void()>> mailbox_;
  bool quit_ = false;
  bool accepting_ = true;   // false once Drain was called
  bool abandon_ = false;
  // Set when a reload (a new epoch) or a drain waits behind the microbatch
  // running: its handoff waits end at once (UNAVAILABLE) instead of at
  // their deadline. Cleared when the reload starts.
  std::atomic<bool> interrupt_{false};
  v1::StageState state_ = v1::STAGE_STATE_UNCONFIGURED;
  std::optional<v1::StageConfig> config_;
  std::string error_;
  std::string worker_address_;
  uint32_t in_flight_ = 0;
  uint64_t last_sequence_number_ = 0;  // of the current epoch; 0 before its first microbatch
  handoff::HandoffDrops drops_;         // by the current epoch's runner
  handoff::HandoffDrops drops_before_;  // by the runners of earlier epochs
  // How the current runner's handoffs travel, after its last microbatch.
  v1::HandoffTransport handoff_in_ = v1::HANDOFF_TRANSPORT_UNSPECIFIED;
  v1::HandoffTransport handoff_out_ = v1::HANDOFF_TRANSPORT_UNSPECIFIED;
  v1::StageLimits limits_;  // of the loaded stage (unset until READY)
  std::vector<uint64_t> kv_free_blocks_;  // per DP group, after the last microbatch

  // Actor thread only.
  std::unique_ptr<handoff::UcxWorker> worker_;
  std::unique_ptr<MicrobatchRunner> runner_;
  // Descriptors taken and not yet answered for good (members of a
  // multi-step wave that is not whole or still runs), by microbatch id.
  std::map<uint64_t, std::function<void(v1::MicrobatchResult)>> unanswered_;
  // Gives `result` to its descriptor's callback; a final answer (no `more`)
  // ends the descriptor. Actor thread.
  void Deliver(v1::MicrobatchResult result);
  // Ends every descriptor still unanswered with `why` (a wave that will
  // never run: the stage drains or reloads). Actor thread.
  void AnswerUnanswered(const absl::Status& why);
};

}  // namespace seam::server
