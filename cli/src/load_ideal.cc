// load_ideal.h: a step-by-step replay of the load in simulated time.
#include "load_ideal.h"

#include <algorithm>
#include <deque>

namespace seam::cli {
namespace {

struct InFlight {
  int session = 0;
  size_t turn = 0;
  int64_t kv_tokens = 0;  // in the cache: the prompt and the tokens fed back so far
  int64_t remaining = 0;  // decode steps still to run
};

class IdealReplay {
 public:
  IdealReplay(const Workload& w, const LoadPoint& point, const std::vector<double>& arrivals,
              const runtime::StepFloor& floor, const IdealRates& rates)
      : w_(w), floor_(floor), rates_(rates), arrivals_(arrivals) {
    slots_ = point.mode == LoadPoint::Mode::kClosed ? point.concurrency : static_cast<int>(w.sessions.size());
    for (size_t s = 0; s < w.sessions.size(); ++s) unstarted_.push_back(static_cast<int>(s));
    std::stable_sort(unstarted_.begin(), unstarted_.end(), [&](int a, int b) { return arrivals_[a] < arrivals_[b]; });
    for (const Session& s : w.sessions) left_ += static_cast<int64_t>(s.turns.size());
  }

  IdealLoad Run() {
    while (left_ > 0) {
      Admit();
      if (!in_flight_.empty()) {
        Step();
      } else if (!unstarted_.empty()) {
        const double next = std::max(out_.seconds, arrivals_[unstarted_.front()]);
        out_.idle_seconds += next - out_.seconds;
        out_.seconds = next;
      } else {
        break;  // nothing in flight, nothing to come: an empty session
      }
    }
    return out_;
  }

 private:
  // Prefills every request that is ready now, one after another.
  void Admit() {
    while (!unstarted_.empty() && busy_sessions_ < slots_ && arrivals_[unstarted_.front()] <= out_.seconds) {
      ready_.push_back({unstarted_.front(), 0});
      unstarted_.pop_front();
      ++busy_sessions_;
    }
    for (size_t i = 0; i < ready_.size(); ++i) {  // Finished may add a session's next turn
      const auto [s, t] = ready_[i];
      const Session& session = w_.sessions[s];
      const int64_t prompt = session.PromptTokens(t);
      const double flops = floor_.Prefill(prompt).total() * rates_.ranks_sharing;
      out_.prefill_flops += flops / rates_.ranks_sharing;
      const double dt = flops / rates_.flops_per_s;
      out_.prefill_seconds += dt;
      out_.seconds += dt;
      InFlight f{s, t, prompt, session.turns[t].max_tokens - 1};
      if (f.remaining > 0) {
        in_flight_.push_back(f);
      } else {
        Finished(f);
      }
    }
    ready_.clear();
  }

  // One decode step of every request in flight.
  void Step() {
    int64_t context = 0;
    for (const InFlight& f : in_flight_) context += f.kv_tokens + 1;
    const double bytes = floor_.DecodeStep(static_cast<int64_t>(in_flight_.size()), context).total();
    const double dt = bytes * rates_.ranks_sharing / rates_.bytes_per_s;
    out_.decode_bytes += bytes;
    out_.decode_seconds += dt;
    out_.seconds += dt;
    ++out_.decode_steps;
    std::vector<InFlight> still;
    for (InFlight& f : in_flight_) {
      ++f.kv_tokens;
      if (--f.remaining > 0) {
        still.push_back(f);
      } else {
        Finished(f);
      }
    }
    in_flight_.swap(still);
  }

  void Finished(const InFlight& f) {
    --left_;
    if (f.turn + 1 < w_.sessions[f.session].turns.size()) {
      ready_.push_back({f.session, f.turn + 1});
    } else {
      --busy_sessions_;
    }
  }

  const Workload& w_;
  const runtime::StepFloor& floor_;
  const IdealRates& rates_;
  const std::vector<double>& arrivals_;
  int slots_ = 1, busy_sessions_ = 0;
  int64_t left_ = 0;
  std::deque<int> unstarted_;
  std::vector<std::pair<int, size_t>> ready_;
  std::vector<InFlight> in_flight_;
  IdealLoad out_;
};

}  // namespace

IdealLoad IdealLoadTime(const Workload& workload, const LoadPoint& point, const std::vector<double>& arrivals,
                        const runtime::StepFloor& floor, const IdealRates& rates) {
  if (rates.flops_per_s <= 0 || rates.bytes_per_s <= 0 || arrivals.size() != workload.sessions.size()) return {};
  return IdealReplay(workload, point, arrivals, floor, rates).Run();
}

}  // namespace seam::cli
