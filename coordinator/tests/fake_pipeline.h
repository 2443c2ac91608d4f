// A PipelineDriver over fake stage links (no processes) and a recording call
// observer, for the driver's tests.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "pipeline_driver.h"

namespace seam::coordinator::testing {

// Answers each descriptor at once (from Send) unless told to stay silent; the
// last stage samples (first input token + position + 1) % 256.
class FakeLink : public StageLink {
 public:
  FakeLink(bool last, std::string address) : last_(last), address_(std::move(address)) {}
  void Start(ResultCallback on_result, BrokenCallback on_broken) override {
    on_result_ = std::move(on_result);
    on_broken_ = std::move(on_broken);
  }
  absl::Status Send(const v1::MicrobatchDescriptor& d) override {
    ++sent;
    last_budget_ms = d.budget_ms();
    {
      std::lock_guard<std::mutex> lock(mu);
      descriptors.push_back(d);
    }
    if (silent) return absl::OkStatus();
    v1::MicrobatchResult r;
    r.set_microbatch_id(d.microbatch_id());
    if (error_code != 0) {
      r.mutable_error()->set_code(error_code);
      r.mutable_error()->set_message("handoff rejected");
    } else if (last_) {
      for (const v1::SequenceEntry& e : d.sequences()) {
        v1::SequenceResult* s = r.add_sequences();
        s->set_sequence_id(e.sequence_id());
        s->set_server_request_id(e.server_request_id());
        s->set_sampled_token((e.token_ids(0) + e.position_start() + e.token_ids_size()) % 256);
      }
    }
    on_result_(r);
    return absl::OkStatus();
  }
  void Close() override {}
  std::string address() const override { return address_; }
  void Break() { on_broken_(absl::UnavailableError("connection reset")); }

  std::atomic<bool> silent{false};
  std::atomic<uint64_t> last_budget_ms{0};  // of the last descriptor sent
  std::atomic<int> error_code{0};
  std::atomic<int> sent{0};
  std::mutex mu;
  std::vector<v1::MicrobatchDescriptor> descriptors;  // every one sent here

 private:
  bool last_;
  std::string address_;
  ResultCallback on_result_;
  BrokenCallback on_broken_;
};

class Recorder : public CallObserver {
 public:
  explicit Recorder(size_t n) : tokens(n), texts(n) {}
  void OnToken(int i, const TokenOutput& t) override {
    tokens[i].push_back(t.token);
    texts[i] += t.text;
  }
  void OnSequenceFinished(int i, FinishReason reason, const std::string& text) override {
    ++finished;
    texts[i] += text;
    reasons.push_back(reason);
  }
  void OnScore(int, std::vector<float>) override {}
  void OnScheduled(int i) override {
    scheduled.push_back(i);
    scheduled_before_token.push_back(tokens[i].empty());
  }
  void OnDone(const absl::Status& s) override { done.set_value(s); }
  absl::Status Wait() {
    auto f = done.get_future();
    if (f.wait_for(std::chrono::seconds(5)) != std::future_status::ready) return absl::UnknownError("no OnDone");
    return f.get();
  }
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> texts;
  std::vector<FinishReason> reasons;
  std::vector<int> scheduled;                // OnScheduled's sequence indices, in order
  std::vector<bool> scheduled_before_token;  // whether each came before that sequence's first token
  int finished = 0;
  std::promise<absl::Status> done;
};

struct Pipeline {
  explicit Pipeline(PipelineDriverOptions o = {}) {
    std::vector<std::unique_ptr<StageLink>> links;
    for (int k = 0; k < 2; ++k) {
      auto l = std::make_unique<FakeLink>(k == 1, "stage" + std::to_string(k));
      fakes.push_back(l.get());
      links.push_back(std::move(l));
    }
    o.scheduler.pipeline_stages = 2;
    if (o.stage_timeout == std::chrono::milliseconds(10000)) o.stage_timeout = std::chrono::milliseconds(300);
    driver = PipelineDriver::Create(o, std::move(links)).value();
  }
  void Submit(Recorder& r, std::vector<std::vector<int32_t>> prompts, int max_new = 3, bool score = false,
              std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
    DriverCall c;
    c.sampling = sampling;
    // Server ids are unique per call: req-...c1, req-...c2, ...
    c.identity = RequestIdentity{absl::StrCat("req-00000000000000c", ++calls), "client-1"};
    c.prompts = std::move(prompts);
    c.sampling.set_max_new_tokens(max_new);
    c.score = score;
    c.deadline = deadline;
    c.text = text;
    c.observer = &r;
    driver->Submit(std::move(c));
  }
  // The entries stage `k` was sent, in order.
  std::vector<v1::SequenceEntry> EntriesOf(int k) {
    std::lock_guard<std::mutex> lock(fakes[k]->mu);
    std::vector<v1::SequenceEntry> out;
    for (const v1::MicrobatchDescriptor& d : fakes[k]->descriptors) out.insert(out.end(), d.sequences().begin(), d.sequences().end());
    return out;
  }
  std::vector<FakeLink*> fakes;
  std::unique_ptr<PipelineDriver> driver;
  int calls = 0;
  v1::SamplingParams sampling;           // of the next calls (max_new_tokens set by Submit)
  std::function<std::unique_ptr<TokenText>()> text;  // of the next calls
};

// Token t reads "<t>,".
class NumberText : public TokenText {
 public:
  std::string Push(int32_t token) override { return absl::StrCat(token, ","); }
  std::string Flush() override { return ""; }
};

}  // namespace seam::coordinator::testing
