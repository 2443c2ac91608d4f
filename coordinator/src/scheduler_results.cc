// How in-flight microbatches end: Complete (per-sequence results), Fail (the
// whole microbatch) and FailAll (every live request).
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "scheduler_impl.h"
#include "seam/core/status.h"

namespace seam::coordinator {
namespace {

absl::Status NotInFlight(uint64_t microbatch_id) {
  return absl::NotFoundError(
      absl::StrCat("microbatch ", microbatch_id, " is not in flight"));
}

// Checks that `results` holds exactly one well-formed result per entry of
// `mb` whose request is live (an entry whose request ended while `mb` ran,
// with overlap_steps, may have one or none); returns request id -> index
// into results.
absl::StatusOr<std::unordered_map<std::string, size_t>> MatchResults(
    const Microbatch& mb, const std::vector<SequenceResult>& results,
    const std::unordered_map<std::string, RequestState>& live) {
  std::unordered_map<std::string, const MicrobatchEntry*> entries;
  size_t live_entries = 0;
  for (const auto& group : mb.entries_by_group) {
    for (const auto& entry : group) {
      entries.emplace(entry.request_id, &entry);
      live_entries += live.count(entry.request_id);
    }
  }
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < results.size(); ++i) {
    const SequenceResult& r = results[i];
    auto entry = entries.find(r.request_id);
    if (entry != entries.end() && live.count(r.request_id) == 0) continue;  // ended while `mb` ran: dropped
    if (entry == entries.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "microbatch ", mb.id, ": result for request '", r.request_id,
          "', which is not in it"));
    }
    if (!index.emplace(r.request_id, i).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "microbatch ", mb.id, ": two results for request '", r.request_id, "'"));
    }
    if (r.status.ok() && mb.decode_steps > 1) {
      if (static_cast<int>(r.tokens.size()) != mb.decode_steps) {
        return absl::InvalidArgumentError(absl::StrCat(
            "microbatch ", mb.id, " runs ", mb.decode_steps, " decode steps but the result of request '",
            r.request_id, "' has ", r.tokens.size(), " tokens"));
      }
      for (int32_t t : r.tokens) {
        if (t < 0) {
          return absl::InvalidArgumentError(absl::StrCat(
              "microbatch ", mb.id, ": request '", r.request_id, "' has token ", t));
        }
      }
    } else if (r.status.ok() && entry->second->is_last_chunk && r.token < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "microbatch ", mb.id, ": request '", r.request_id, "' samples in this step but its ",
          "result has token ", r.token));
    }
  }
  if (index.size() != live_entries) {
    for (const auto& [id, entry] : entries) {
      if (index.count(id) == 0 && live.count(id) != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "microbatch ", mb.id, ": no result for request '", id, "' (", results.size(),
            " results for ", live_entries, " entries)"));
      }
    }
  }
  return index;
}

}  // namespace

void SchedulerImpl::Landed(RequestState& state, const MicrobatchEntry& entry) {
  state.in_flight -= 1;
  state.ahead_tokens -= entry.num_tokens;
  state.ahead_samples -= entry.is_last_chunk ? 1 : 0;
  if (state.in_flight == 0) state.feedable = false;
}

absl::StatusOr<std::vector<SchedulerEvent>> SchedulerImpl::Complete(
    uint64_t microbatch_id, const std::vector<SequenceResult>& results) {
  auto mb_it = in_flight_.find(microbatch_id);
  if (mb_it == in_flight_.end()) return NotInFlight(microbatch_id);
  SEAM_ASSIGN_OR_RETURN(auto index, MatchResults(mb_it->second, results, requests_));
  const Microbatch mb = std::move(mb_it->second);
  in_flight_.erase(mb_it);
  wave_steps_ = 0;

  std::vector<SchedulerEvent> events;
  for (const auto& group : mb.entries_by_group) {
    for (const auto& entry : group) {
      auto live = requests_.find(entry.request_id);
      if (live == requests_.end()) continue;  // ended while this microbatch ran: its token is dropped
      const SequenceResult& result = results[index.at(entry.request_id)];
      RequestState& state = live->second;
      Landed(state, entry);
      if (state.cancelled) {
        End(entry.request_id, Finished(entry.request_id, FinishReason::kCancelled), events);
        continue;
      }
      if (!result.status.ok()) {
        End(entry.request_id, Failed(entry.request_id, result.status), events);
        continue;
      }
      state.kv_tokens = entry.start_position + entry.num_tokens;
      if (mb.decode_steps > 1) {
        // Each step's token in turn, up to the one that ends the request
        // (the stages ran the later steps anyway; their tokens are dropped).
        for (size_t k = 0; k < result.tokens.size(); ++k) {
          const int32_t t = result.tokens[k];
          state.kv_tokens = entry.start_position + static_cast<int>(k) + 1;
          const std::optional<FinishReason> reason = RecordSample(state, t);
          RecordCacheToken(state, t);
          SchedulerEvent token;
          token.kind = SchedulerEvent::Kind::kToken;
          token.request_id = entry.request_id;
          token.token = t;
          events.push_back(std::move(token));
          if (reason.has_value()) {
            PublishBlocks(state);  // its blocks outlive it
            End(entry.request_id, Finished(entry.request_id, *reason), events);
            break;
          }
        }
        if (requests_.count(entry.request_id) != 0) PublishBlocks(state);
        continue;
      }
      if (entry.is_prefill) {
        state.prefilled = state.kv_tokens;
        PublishBlocks(state);
        if (!entry.is_last_chunk) continue;
        state.phase = Phase::kDecoding;
      }
      const std::optional<FinishReason> reason = RecordSample(state, result.token);
      RecordCacheToken(state, result.token);
      if (!entry.is_prefill) PublishBlocks(state);
      SchedulerEvent token;
      token.kind = SchedulerEvent::Kind::kToken;
      token.request_id = entry.request_id;
      token.token = result.token;
      events.push_back(std::move(token));
      if (reason.has_value()) End(entry.request_id, Finished(entry.request_id, *reason), events);
    }
  }
  return events;
}

absl::StatusOr<std::vector<SchedulerEvent>> SchedulerImpl::Fail(uint64_t microbatch_id,
                                                                const absl::Status& status) {
  if (status.ok()) return absl::InvalidArgumentError("Fail needs a non-OK status");
  auto mb_it = in_flight_.find(microbatch_id);
  if (mb_it == in_flight_.end()) return NotInFlight(microbatch_id);
  const Microbatch mb = std::move(mb_it->second);
  in_flight_.erase(mb_it);
  wave_steps_ = 0;
  std::vector<SchedulerEvent> events;
  for (const auto& group : mb.entries_by_group) {
    for (const auto& entry : group) {
      auto live = requests_.find(entry.request_id);
      if (live == requests_.end()) continue;  // ended while this microbatch ran
      RequestState& state = live->second;
      Landed(state, entry);
      End(entry.request_id,
          state.cancelled ? Finished(entry.request_id, FinishReason::kCancelled)
                          : Failed(entry.request_id, status),
          events);
    }
  }
  return events;
}

absl::StatusOr<std::vector<SchedulerEvent>> SchedulerImpl::FailAll(const absl::Status& status) {
  if (status.ok()) return absl::InvalidArgumentError("FailAll needs a non-OK status");
  std::vector<std::string> order;
  for (const auto& [admit, id] : running_) order.push_back(id);
  order.insert(order.end(), queue_.begin(), queue_.end());
  std::vector<SchedulerEvent> events;
  for (const std::string& id : order) {
    RequestState& state = requests_.at(id);
    state.in_flight = 0;
    End(id, state.cancelled ? Finished(id, FinishReason::kCancelled) : Failed(id, status),
        events);
  }
  in_flight_.clear();
  DropPrefixCache();  // the stages of the next epoch hold no KV
  wave_steps_ = 0;
  epoch_ += 1;
  next_sequence_number_ = 1;
  return events;
}

}  // namespace seam::coordinator
