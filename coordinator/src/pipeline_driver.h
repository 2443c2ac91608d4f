// PipelineDriver: the coordinator's actor. One thread owns the Scheduler and
// the stage links: it admits client calls, sends each microbatch to every
// stage in order, collects their results and reports tokens, scores and the
// end of each call to the call's observer. Client threads only post messages.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "call_delivery.h"
#include "seam/coordinator/scheduler.h"
#include "request_identity.h"
#include "seam/v1/sampling.pb.h"
#include "sequence_output.h"
#include "stage_link.h"

namespace seam::coordinator {

// What one token of a sequence gives the call's observer.
struct TokenOutput {
  int32_t token = -1;
  // The text this token completes, as SequenceOutput releases it (stop
  // strings left out, a tail that may begin one held back); "" without a
  // tokenizer.
  std::string text;
  // With SamplingParams.logprobs: the token's log-probs (null otherwise);
  // valid during the callback only.
  const v1::ChosenTokenLogprobs* logprobs = nullptr;
};

// Receives the outcome of one call. Its methods run on one of the driver's
// delivery threads (CallDelivery), every method of one call on the same
// thread in order, never on the driver thread: Cancelled alone is polled by
// the driver thread. OnDone comes exactly once and last, after which the
// driver forgets the observer (it must stay valid until then).
class CallObserver {
 public:
  virtual ~CallObserver() = default;
  virtual void OnToken(int sequence_index, const TokenOutput& token) = 0;
  // `text`: the sequence's last text (what its tokenizer held back until the end).
  virtual void OnSequenceFinished(int sequence_index, FinishReason reason, const std::string& text) = 0;
  // Scoring calls: log p(token i+1 | tokens 0..i) of the sequence.
  virtual void OnScore(int sequence_index, std::vector<float> token_logprobs) = 0;
  // OK once every sequence finished; otherwise why the call failed.
  virtual void OnDone(const absl::Status& status) = 0;
  // True when the client went away; polled by the driver thread (thread-safe).
  virtual bool Cancelled() const { return false; }
  // Sequence `sequence_index` went to the stages for the first time (its
  // first prefill chunk was sent): the end of its wait for admission.
  virtual void OnScheduled(int /*sequence_index*/) {}
};

// One client call: a batch of prompts sampled alike, or sequences to score.
// Sequence i of the call is prompts[i]; it draws with its own seed
// (seam::SequenceSeed of the call's seed and i) and is sent to the last
// stage with its own SequenceSampling.
struct DriverCall {
  RequestIdentity identity;
  std::vector<std::vector<int32_t>> prompts;
  // max_new_tokens already resolved (>= 1); without a seed the driver draws
  // a fresh one for the call and logs it with the call's id.
  v1::SamplingParams sampling;
  bool score = false;             // one prefill with return_token_logprobs, nothing generated
  // Prefix caching (SchedulerOptions::prefix_caching): false keeps this call
  // out of the cache; blocks are shared only between calls of equal salts.
  bool prefix_cache = true;
  std::string cache_salt;
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Each sequence's detokenizer (the model's tokenizer); empty: no text and
  // no stop strings.
  std::function<std::unique_ptr<TokenText>()> text;
  CallObserver* observer = nullptr;
};

// How much longer than a microbatch's budget the driver waits for a stage's
// answer before it takes the stage as hung: half the stage_timeout floor,
// within [2 s, 5 s] (a stage's own DEADLINE_EXCEEDED answer comes first).
std::chrono::milliseconds AnswerGrace(std::chrono::milliseconds stage_timeout);

struct PipelineDriverOptions {
  SchedulerOptions scheduler;  // pipeline_stages must equal the number of links
  // A microbatch's budget: stage_timeout plus stage_timeout_per_token for
  // each token of it and of the microbatches still in flight ahead of it
  // (the work the stages owe before answering it), so a long prefill is not
  // a failure. It travels in the descriptor (budget_ms): each stage bounds
  // its waits for the microbatch by it and answers DEADLINE_EXCEEDED,
  // naming itself, once it is spent, which fails that microbatch alone. A
  // stage that leaves it unanswered for AnswerGrace longer is taken as
  // down (hung: UNAVAILABLE for everyone), as is one that refuses the
  // stream (FAILED_PRECONDITION: another epoch or sequence number) and a
  // pipeline whose microbatches fail 3 times in a row. A dead or stopped
  // stage is found sooner by its link's liveness probes (grpc_stage_link.h),
  // which end the stream.
  std::chrono::milliseconds stage_timeout{10000};
  std::chrono::milliseconds stage_timeout_per_token{100};
  // Largest serialized descriptor the stages take (the least of their
  // StageStatus.max_descriptor_bytes); a microbatch over it fails
  // RESOURCE_EXHAUSTED without being sent. 0: no bound.
  size_t max_descriptor_bytes = 0;
  // How often the driver checks deadlines and cancellations when idle.
  std::chrono::milliseconds tick{20};
  // Brings a down pipeline back: reaches every stage, configures it for
  // `epoch` (the scheduler's, advanced by the failure) and returns fresh
  // links in rank order. Runs on a thread of its own, again every
  // reconnect_interval until it succeeds; calls meanwhile are refused
  // UNAVAILABLE. Empty: the pipeline stays down.
  std::function<absl::StatusOr<std::vector<std::unique_ptr<StageLink>>>(uint64_t epoch)> reconnect;
  std::chrono::milliseconds reconnect_interval{1000};
  // Called on the driver thread with false when the pipeline goes down (a
  // stage failed) and with true once reconnect brought it back; not for the
  // shutdown. The coordinator's health status follows it.
  std::function<void(bool up)> on_pipeline_up;
  // Threads that run the observers' callbacks (CallDelivery); 0: the
  // driver thread itself, between its rounds; < 0: one per four cores, 1 to 4.
  int delivery_threads = -1;
};

class PipelineDriver {
 public:
  // Takes the links (rank order) and starts them and the driver thread.
  static absl::StatusOr<std::unique_ptr<PipelineDriver>> Create(const PipelineDriverOptions& options,
                                                                std::vector<std::unique_ptr<StageLink>> links);
  ~PipelineDriver();  // Shutdown()

  // Hands a call to the driver; never blocks on the pipeline. A refusal
  // (queue full, pipeline down, ...) arrives as observer->OnDone.
  void Submit(DriverCall call);
  // Ends every live call with UNAVAILABLE, closes the links, joins. Idempotent.
  void Shutdown();

  // Per stage: false once its stream broke or it missed a deadline.
  std::vector<bool> StagesUp() const;
  uint64_t Epoch() const;
  // The scheduler's load after the driver's last round (for metrics).
  struct Load {
    int running = 0;           // sequences admitted, not ended
    int waiting = 0;           // sequences queued for admission
    double kv_usage = 0;       // share of the admission KV blocks held (by sequences), 0..1
    uint64_t preemptions = 0;  // sequences preempted since start
    PrefixCacheStats prefix;   // the prefix cache's counters
    StepBudgetStats step_budget;  // the step time fit behind itl_target_ms
  };
  Load CurrentLoad() const;
  // `sent` is called on the driver thread with each microbatch's token
  // rows (over its decode steps) as it goes to the stages. Set it before
  // calls arrive; it must not block.
  void ObserveMicrobatches(std::function<void(int64_t tokens)> sent);

  struct State;  // driver-thread state (pipeline_driver_state.h)

 private:
  PipelineDriver(const PipelineDriverOptions& options, std::unique_ptr<Scheduler> scheduler,
                 std::vector<std::unique_ptr<StageLink>> links);
  bool Post(std::function<void()> message);  // false once stopping
  void Loop();
  // Driver thread: starts links_ with callbacks of the current generation
  // (messages of closed links are ignored).
  void StartLinks();
  void MaybeRecover();
  void InstallLinks(absl::StatusOr<std::vector<std::unique_ptr<StageLink>>> links);

  const PipelineDriverOptions options_;
  std::vector<std::unique_ptr<StageLink>> links_;
  std::unique_ptr<CallDelivery> delivery_;  // before state_, which queues on it
  std::unique_ptr<State> state_;  // touched only by the driver thread

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> inbox_;
  bool stopping_ = false;
  std::vector<bool> stages_up_;
  uint64_t epoch_ = 0;
  Load load_;
  std::thread thread_;
  // Driver thread only: link generation and the recovery attempt.
  uint64_t generation_ = 0;
  bool recovering_ = false;
  bool reported_down_ = false;  // last value given to on_pipeline_up (inverted)
  std::chrono::steady_clock::time_point next_recovery_{};
  // For the recovery's log lines: when the pipeline went down, the attempts
  // since, and when the one under way began.
  std::chrono::steady_clock::time_point down_since_{};
  int recovery_attempts_ = 0;
  std::chrono::steady_clock::time_point attempt_started_{};
  std::thread recovery_;
};

}  // namespace seam::coordinator
