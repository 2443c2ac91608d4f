// load_runner.h: one thread per session in flight, blocking calls, a
// progress thread, and the first error kept.
#include "load_runner.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seam::cli {
namespace {

double Since(LoadClock::time_point t0) { return std::chrono::duration<double>(LoadClock::now() - t0).count(); }

// Stand-ins for an answer the transport did not return as ids (HTTP returns
// text): seeded tokens of the answer's length, the same for every run.
std::vector<int32_t> AnswerStandIn(int session, int turn, int64_t n, int64_t vocab) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  uint64_t x = (static_cast<uint64_t>(session) << 20) ^ static_cast<uint64_t>(turn) ^ 0x5eed;
  for (int32_t& t : out) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    t = static_cast<int32_t>(2 + (x >> 33) % static_cast<uint64_t>(vocab - 2));
  }
  return out;
}

class PointRun {
 public:
  PointRun(LoadTransport& transport, const Workload& workload, const LoadRunOptions& options)
      : transport_(transport), workload_(workload), options_(options), t0_(LoadClock::now()) {
    for (const Session& s : workload.sessions) {
      first_record_.push_back(records_.size());
      records_.resize(records_.size() + s.turns.size());
    }
  }

  LoadClock::time_point t0() const { return t0_; }
  bool failed() const { return failed_.load(); }

  // Sends session s's turns in order on `client`.
  void RunSession(int s, LoadClient& client) {
    const Session& session = workload_.sessions[s];
    std::vector<int32_t> history;
    for (size_t t = 0; t < session.turns.size() && !failed(); ++t) {
      const Turn& turn = session.turns[t];
      LoadRequest request;
      request.id = absl::StrCat(options_.id_prefix, "-s", s, "-t", t);
      request.prompt = history;
      const int64_t span = workload_.options.vocab - 2;
      for (int32_t token : turn.user) {
        request.prompt.push_back(options_.token_shift == 0 || span < 1
                                     ? token
                                     : static_cast<int32_t>(2 + (token - 2 + options_.token_shift) % span));
      }
      request.max_tokens = turn.max_tokens;
      request.timeout_s = options_.request_timeout_s;
      RequestRecord& record = records_[first_record_[s] + t];
      record = RequestRecord{s, static_cast<int>(t), static_cast<int64_t>(request.prompt.size()), turn.max_tokens,
                             Since(t0_), {}};
      absl::StatusOr<LoadAnswer> answer = client.Send(request, t0_);
      if (!answer.ok()) return Fail(answer.status());
      if (answer->output_tokens != turn.max_tokens) {
        return Fail(absl::FailedPreconditionError(absl::StrCat(request.id, " made ", answer->output_tokens,
                                                               " tokens of its max_tokens ", turn.max_tokens)));
      }
      history = request.prompt;
      const std::vector<int32_t> said = answer->per_token ? answer->token_ids
                                                          : AnswerStandIn(s, static_cast<int>(t), turn.max_tokens,
                                                                          workload_.options.vocab);
      history.insert(history.end(), said.begin(), said.end());
      record.answer = std::move(*answer);
      done_requests_.fetch_add(1);
      done_tokens_.fetch_add(turn.max_tokens);
    }
  }

  void Fail(const absl::Status& status) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!failed_.load()) error_ = status;
      failed_.store(true);
    }
    transport_.CancelAll();
  }

  // Prints a line every progress_every_s until Stop.
  void Progress(const std::string& label) {
    if (options_.progress == nullptr || options_.progress_every_s <= 0) return;
    const auto every = std::chrono::milliseconds(static_cast<int64_t>(options_.progress_every_s * 1000));
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopped_ && !cv_.wait_for(lock, every, [this] { return stopped_; })) {
      *options_.progress << absl::StrFormat("seam bench load: %s %s: %d/%d requests, %d tokens, %.1f s\n",
                                            transport_.name(), label, done_requests_.load(), records_.size(),
                                            done_tokens_.load(), Since(t0_))
                         << std::flush;
    }
  }
  void Stop() {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    cv_.notify_all();
  }

  absl::StatusOr<std::vector<RequestRecord>> Result() {
    std::lock_guard<std::mutex> lock(mu_);
    if (failed_.load()) return error_;
    return std::move(records_);
  }

 private:
  LoadTransport& transport_;
  const Workload& workload_;
  const LoadRunOptions& options_;
  const LoadClock::time_point t0_;
  std::vector<size_t> first_record_;
  std::vector<RequestRecord> records_;
  std::atomic<bool> failed_{false};
  std::atomic<int64_t> done_requests_{0}, done_tokens_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopped_ = false;
  absl::Status error_;
};

void RunClosed(PointRun& run, LoadTransport& transport, int sessions, int concurrency) {
  std::atomic<int> next{0};
  std::vector<std::thread> workers;
  for (int w = 0; w < std::min(concurrency, sessions); ++w) {
    workers.emplace_back([&] {
      std::unique_ptr<LoadClient> client = transport.NewClient();
      for (int s; !run.failed() && (s = next.fetch_add(1)) < sessions;) run.RunSession(s, *client);
    });
  }
  for (std::thread& w : workers) w.join();
}

void RunOpen(PointRun& run, LoadTransport& transport, const std::vector<double>& arrivals) {
  std::vector<std::thread> sessions;
  for (size_t s = 0; s < arrivals.size() && !run.failed(); ++s) {
    std::this_thread::sleep_until(run.t0() + std::chrono::duration_cast<LoadClock::duration>(
                                                 std::chrono::duration<double>(arrivals[s])));
    if (run.failed()) break;
    sessions.emplace_back([&run, &transport, s] {
      std::unique_ptr<LoadClient> client = transport.NewClient();
      run.RunSession(static_cast<int>(s), *client);
    });
  }
  for (std::thread& t : sessions) t.join();
}

}  // namespace

std::string LoadPoint::Label() const {
  if (mode == Mode::kClosed) return absl::StrCat("concurrency ", concurrency);
  return rate > 0 ? absl::StrFormat("rate %g/s", rate) : "rate inf";
}

std::vector<double> SessionArrivals(const Workload& workload, const LoadPoint& point, uint64_t seed) {
  const int n = static_cast<int>(workload.sessions.size());
  if (point.mode == LoadPoint::Mode::kClosed) return std::vector<double>(static_cast<size_t>(n), 0.0);
  return PoissonArrivals(n, point.rate, seed);
}

absl::StatusOr<std::vector<RequestRecord>> RunLoadPoint(LoadTransport& transport, const Workload& workload,
                                                        const LoadPoint& point, const LoadRunOptions& options) {
  if (point.mode == LoadPoint::Mode::kClosed && point.concurrency < 1) {
    return absl::InvalidArgumentError("a closed loop needs a concurrency of at least 1");
  }
  PointRun run(transport, workload, options);
  std::thread progress([&] { run.Progress(point.Label()); });
  const int sessions = static_cast<int>(workload.sessions.size());
  if (point.mode == LoadPoint::Mode::kClosed) {
    RunClosed(run, transport, sessions, point.concurrency);
  } else {
    RunOpen(run, transport, SessionArrivals(workload, point, options.arrival_seed));
  }
  run.Stop();
  progress.join();
  return run.Result();
}

}  // namespace seam::cli
