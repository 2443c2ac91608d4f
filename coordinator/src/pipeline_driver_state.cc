// The driver's decisions: how calls become scheduler requests, microbatches
// become descriptors, and stage answers become tokens, failures and ends.
#include "pipeline_driver_state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "seam/core/logging.h"
#include "sequence_sampling.h"

namespace seam::coordinator {
namespace {

absl::Status FromStageError(const v1::StageError& e, const std::string& where) {
  const auto code = e.code() == 0 ? absl::StatusCode::kInternal : static_cast<absl::StatusCode>(e.code());
  return absl::Status(code, absl::StrCat(where, " (pipeline rank ", e.pipeline_rank(), ", tp rank ", e.tp_rank(),
                                         "): ", e.message()));
}

}  // namespace

PipelineDriver::State::State(const PipelineDriverOptions& options, std::unique_ptr<Scheduler> scheduler,
                             std::vector<StageLink*> links, CallDelivery* delivery,
                             std::function<void(int)> on_stage_down)
    : options(options), scheduler(std::move(scheduler)), links(std::move(links)), delivery(delivery),
      on_stage_down(std::move(on_stage_down)) {}

template <typename F>
void PipelineDriver::State::Notify(const Call& call, F&& callback) {
  CallObserver* observer = call.call.observer;
  if (observer == nullptr) return;
  delivery->Queue(&call, [observer, callback = std::forward<F>(callback)]() mutable { callback(*observer); });
}

void PipelineDriver::State::Admit(DriverCall call) {
  auto c = std::make_shared<Call>();
  c->call = std::move(call);
  if (down) {
    Notify(*c, [status = down_status](CallObserver& o) { o.OnDone(status); });
    return;
  }
  const RequestIdentity& identity = c->call.identity;
  v1::SamplingParams& sampling = c->call.sampling;
  if (!c->call.score && !sampling.has_seed()) {
    sampling.set_seed(FreshSeed());
    ScopedLogFields scope({{"request_id", identity.server_id}, {"client_request_id", identity.client_id}});
    SEAM_LOG_INFO("request {} brought no seed: it samples with seed {}", identity.server_id, sampling.seed());
  }
  for (size_t i = 0; i < c->call.prompts.size(); ++i) {
    const int index = static_cast<int>(i);
    Request r;
    r.id = SequenceName(identity, index);
    r.prompt_tokens = static_cast<int>(c->call.prompts[i].size());
    r.max_new_tokens = c->call.score ? 1 : static_cast<int>(sampling.max_new_tokens());
    if (!c->call.score) {
      r.stop_token_ids.assign(sampling.stop_token_ids().begin(), sampling.stop_token_ids().end());
      r.min_tokens = static_cast<int>(sampling.min_tokens());
    }
    r.sequence_tag = next_sequence_id;
    if (UsesPrefixCache(c->call)) {
      r.cache_tokens = c->call.prompts[i];
      r.cache_salt = c->call.cache_salt;
    }
    const absl::Status st = scheduler->Submit(r);
    if (!st.ok()) {
      for (const std::string& id : c->sequence_ids) {
        (void)scheduler->Cancel(id);  // queued only: ends at once, nothing reached a stage
        sequences.erase(id);
      }
      Notify(*c, [status = absl::Status(st.code(), absl::StrCat("request '", identity.server_id, "' prompt ", i, ": ",
                                                                 st.message()))](CallObserver& o) { o.OnDone(status); });
      return;
    }
    Sequence& s = sequences[r.id];
    s.call = c;
    s.index = index;
    s.tokens = c->call.prompts[i];
    s.sequence_id = next_sequence_id++;
    s.sampling = SamplingOfSequence(sampling, index, r.prompt_tokens);
    if (!c->call.score) {
      std::vector<std::string> stops(sampling.stop().begin(), sampling.stop().end());
      s.output = std::make_unique<SequenceOutput>(c->call.text ? c->call.text() : nullptr, std::move(stops),
                                                  r.min_tokens);
    }
    c->sequence_ids.push_back(r.id);
  }
  c->remaining = static_cast<int>(c->sequence_ids.size());
  calls.push_back(std::move(c));
}

// Scoring needs the log-probs of every prompt position, and a repetition
// penalty the prompt's tokens on the last stage: both compute the whole prompt.
bool PipelineDriver::State::UsesPrefixCache(const DriverCall& call) const {
  const float repetition = call.sampling.repetition_penalty();
  return scheduler->options().prefix_caching && call.prefix_cache && !call.score &&
         (repetition == 0.0f || repetition == 1.0f);
}

PipelineDriver::State::Described PipelineDriver::State::Describe(const Microbatch& mb) {
  Described out;
  v1::MicrobatchDescriptor& d = out.common;
  d.set_microbatch_id(mb.id);
  d.set_sequence_number(mb.sequence_number);
  d.set_epoch(mb.epoch);
  for (const std::string& id : mb.preempted) {
    // Its blocks are free in the scheduler from this microbatch on: the
    // stages free its KV before running it (its id stays: its recomputation
    // starts it again under the same id, freed first once more).
    auto it = sequences.find(id);
    if (it == sequences.end() || !it->second.sent) continue;
    to_free.push_back(it->second.sequence_id);
    it->second.sent = false;
  }
  std::vector<std::pair<int, const v1::SequenceSampling*>> starting;  // entry index, its sampling
  std::vector<uint64_t> restarted;
  for (const auto& group : mb.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      Sequence& s = sequences.at(e.request_id);
      // Its first entry: at position 0, or after the cached blocks it maps.
      const bool starts = e.is_prefill && (e.start_position == 0 || !e.shared_blocks.empty());
      // Recomputed after a preemption: the stages free the old KV first
      // (whose free may still wait in to_free).
      if (starts && (s.sent || std::find(to_free.begin(), to_free.end(), s.sequence_id) != to_free.end())) {
        restarted.push_back(s.sequence_id);
      }
      s.sent = true;
      if (starts) starting.emplace_back(d.sequences_size(), &s.sampling);
      v1::SequenceEntry* entry = d.add_sequences();
      entry->set_server_request_id(s.call->call.identity.server_id);
      entry->set_sequence_id(s.sequence_id);
      if (e.is_prefill) {
        entry->mutable_token_ids()->Add(s.tokens.begin() + e.start_position,
                                        s.tokens.begin() + e.start_position + e.num_tokens);
      } else if (e.feeds_previous) {
        entry->set_feed_previous_token(true);
      } else {
        entry->add_token_ids(e.input_token);
      }
      entry->set_position_start(e.start_position);
      entry->set_is_prefill(e.is_prefill);
      entry->set_dp_group(static_cast<uint32_t>(e.dp_group));
      entry->set_return_token_logprobs(s.call->call.score);
      entry->mutable_shared_block_ids()->Add(e.shared_blocks.begin(), e.shared_blocks.end());
    }
  }
  DescribeCachedBlocks(mb, d);
  if (mb.decode_steps > 1) d.set_decode_steps(static_cast<uint32_t>(mb.decode_steps));
  // A sequence that starts again under its id is freed in this very
  // descriptor, ahead of every other free (there are at most as many as
  // entries), and no older free of it may follow its new start.
  for (uint64_t id : restarted) to_free.erase(std::remove(to_free.begin(), to_free.end(), id), to_free.end());
  to_free.insert(to_free.begin(), restarted.begin(), restarted.end());
  // At most as many frees as a microbatch has sequences, so that the
  // descriptor stays within its bound; the rest go with the next one.
  const size_t frees = std::min<size_t>(to_free.size(), scheduler->options().max_sequences_per_microbatch);
  for (size_t i = 0; i < frees; ++i) d.add_finished_sequence_ids(to_free[i]);
  to_free.erase(to_free.begin(), to_free.begin() + static_cast<std::ptrdiff_t>(frees));
  out.last = d;
  for (const auto& [index, sampling] : starting) *out.last.mutable_sequences(index)->mutable_sampling() = *sampling;
  return out;
}

void PipelineDriver::State::DescribeCachedBlocks(const Microbatch& mb, v1::MicrobatchDescriptor& d) {
  for (const v1::CachedBlock& b : unsent_published) *d.add_published_blocks() = b;
  for (const v1::CachedBlock& b : unsent_evicted) *d.add_evicted_blocks() = b;
  unsent_published.clear();
  unsent_evicted.clear();
  for (const CachedBlockChange& c : mb.published) {
    v1::CachedBlock* b = d.add_published_blocks();
    b->set_block_id(c.block_id);
    b->set_dp_group(static_cast<uint32_t>(c.dp_group));
    b->set_sequence_id(c.sequence_tag);
    b->set_block_index(static_cast<uint32_t>(c.block_index));
  }
  for (const CachedBlockChange& c : mb.evicted) {
    v1::CachedBlock* b = d.add_evicted_blocks();
    b->set_block_id(c.block_id);
    b->set_dp_group(static_cast<uint32_t>(c.dp_group));
  }
}

std::string PipelineDriver::State::RequestsOf(const Microbatch& mb) const {
  std::vector<std::string> ids;
  for (const auto& group : mb.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      auto it = sequences.find(e.request_id);
      const std::string id = it == sequences.end() ? e.request_id : it->second.call->call.identity.server_id;
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
  }
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) absl::StrAppend(&out, i ? ", '" : "'", ids[i], "'");
  return out + "]";
}

void PipelineDriver::State::Pump() {
  // Everything the scheduler offers now, so that consecutive multi-step
  // microbatches of as many steps go out as one wave.
  std::vector<std::pair<Microbatch, Described>> ready;
  while (!down) {
    std::optional<Microbatch> mb = scheduler->Next();
    if (!mb) break;
    Described d = Describe(*mb);
    // The last stage's is the larger (it carries the sampling); Send adds
    // the budget: a uint64 field of at most 11 bytes.
    const size_t bytes = d.last.ByteSizeLong() + 11;
    if (options.max_descriptor_bytes > 0 && bytes > options.max_descriptor_bytes) {
      // Never sent: a stage would refuse it and lose its Run stream.
      to_free.insert(to_free.begin(), d.common.finished_sequence_ids().begin(), d.common.finished_sequence_ids().end());
      unsent_published.assign(d.common.published_blocks().begin(), d.common.published_blocks().end());
      unsent_evicted.assign(d.common.evicted_blocks().begin(), d.common.evicted_blocks().end());
      Handle(scheduler
                 ->Fail(mb->id, absl::ResourceExhaustedError(absl::StrCat(
                                    "microbatch ", mb->id, " of requests ", RequestsOf(*mb), " would be ", bytes,
                                    " bytes, more than the ", options.max_descriptor_bytes, " the stages take")))
                 .value_or(std::vector<SchedulerEvent>{}));
      continue;
    }
    ready.emplace_back(std::move(*mb), std::move(d));
  }
  for (size_t i = 0; i < ready.size();) {
    size_t end = i + 1;
    const int steps = ready[i].first.decode_steps;
    while (steps > 1 && end < ready.size() && ready[end].first.decode_steps == steps) ++end;
    for (size_t k = i; steps > 1 && k < end; ++k) {
      for (v1::MicrobatchDescriptor* d : {&ready[k].second.common, &ready[k].second.last}) {
        d->set_wave_size(static_cast<uint32_t>(end - i));
        d->set_wave_index(static_cast<uint32_t>(k - i));
      }
    }
    for (; i < end; ++i) {
      if (!Send(ready[i].first, ready[i].second)) return;
    }
  }
}

bool PipelineDriver::State::Send(const Microbatch& mb, Described& d) {
  if (down) return false;
  // The work the stages owe before answering it: its tokens (each step's)
  // and those of the microbatches ahead of it.
  int64_t tokens = static_cast<int64_t>(mb.num_tokens) * mb.decode_steps;
  for (const auto& [id, ahead] : in_flight) {
    tokens += static_cast<int64_t>(ahead.microbatch.num_tokens) * ahead.microbatch.decode_steps;
  }
  InFlight& f = in_flight[mb.id];
  f.microbatch = mb;
  f.bound = options.stage_timeout + options.stage_timeout_per_token * tokens;
  f.deadline = Clock::now() + f.bound + AnswerGrace(options.stage_timeout);
  d.common.set_budget_ms(static_cast<uint64_t>(f.bound.count()));
  d.last.set_budget_ms(static_cast<uint64_t>(f.bound.count()));
  f.answered.assign(links.size(), false);
  const Clock::time_point writing = Clock::now();
  f.sent = writing;
  for (size_t k = 0; k < links.size(); ++k) {
    // Only the last stage samples: only it gets the sequences' sampling.
    if (absl::Status st = links[k]->Send(k + 1 == links.size() ? d.last : d.common); !st.ok()) {
      StageDown(static_cast<int>(k), st);
      return false;
    }
  }
  NoteSent(mb);
  if (last_ended != 0) {
    const auto us = [](Clock::duration d) { return std::chrono::duration_cast<std::chrono::microseconds>(d).count(); };
    SEAM_LOG_DEBUG("microbatch {} ({} steps) sent {} us after microbatch {} ended ({} us from its last result "
                   "read to its end; {} us completing it, {} us building, {} us writing)",
                   mb.id, mb.decode_steps, us(Clock::now() - last_end), last_ended, last_hop_us,
                   us(handled - last_end), us(writing - handled), us(Clock::now() - writing));
    last_ended = 0;
  }
  return true;
}

void PipelineDriver::State::NoteSent(const Microbatch& mb) {
  for (const auto& group : mb.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      if (!e.is_prefill || e.start_position != 0) continue;
      auto it = sequences.find(e.request_id);
      if (it == sequences.end() || it->second.scheduled) continue;
      it->second.scheduled = true;
      const Call& call = *it->second.call;
      if (!call.done) Notify(call, [index = it->second.index](CallObserver& o) { o.OnScheduled(index); });
    }
  }
  if (microbatch_sent) microbatch_sent(static_cast<int64_t>(mb.num_tokens) * mb.decode_steps);
}

void PipelineDriver::State::RecordStep(InFlight& f, const v1::MicrobatchResult& result) {
  std::unordered_map<uint64_t, std::string>& names = f.step_names;
  if (names.empty()) {
    for (const auto& group : f.microbatch.entries_by_group) {
      for (const MicrobatchEntry& e : group) {
        if (auto it = sequences.find(e.request_id); it != sequences.end()) names[it->second.sequence_id] = e.request_id;
      }
    }
  }
  for (const v1::SequenceResult& r : result.sequences()) {
    if (r.has_error()) {
      f.step_errors.emplace(r.sequence_id(),
                            FromStageError(r.error(), absl::StrCat("decode step ", result.decode_step())));
      continue;
    }
    if (f.step_errors.count(r.sequence_id()) != 0) continue;
    f.step_tokens[r.sequence_id()].push_back(r.sampled_token());
    auto id = names.find(r.sequence_id());
    if (id == names.end()) continue;
    auto it = sequences.find(id->second);
    if (it == sequences.end()) continue;
    Sequence& s = it->second;
    if (s.stream_stopped || s.call->done || s.call->call.score) continue;
    const v1::SamplingParams& sampling = s.call->call.sampling;
    // Tokens made before this one: those the scheduler recorded and those streamed ahead of it.
    const int made = static_cast<int>(s.tokens.size() - s.call->call.prompts[s.index].size()) + s.streamed;
    if (made >= static_cast<int>(sampling.max_new_tokens())) {
      s.stream_stopped = true;  // it ran past its last token (the scheduler drops these steps' tokens)
      continue;
    }
    const bool stop_string = Deliver(s, r.sampled_token(), r.has_sampled_logprobs() ? &r.sampled_logprobs() : nullptr);
    ++s.streamed;
    const auto& stops = sampling.stop_token_ids();
    const int generated = made + 1;
    s.stream_stopped = stop_string || (generated >= static_cast<int>(sampling.min_tokens()) &&
                                       std::find(stops.begin(), stops.end(), r.sampled_token()) != stops.end());
    // In flight: it ends when its microbatch completes; the tokens its later steps chose are dropped.
    if (stop_string) EndAtStopString(id->second);
  }
}

bool PipelineDriver::State::Deliver(Sequence& s, int32_t token, const v1::ChosenTokenLogprobs* logprobs) {
  if (s.call->done || s.call->call.score || s.output == nullptr || s.output->stopped()) return false;
  SequenceOutput::Piece piece = s.output->Push(token);
  std::optional<v1::ChosenTokenLogprobs> owned;
  if (logprobs != nullptr) owned = *logprobs;
  Notify(*s.call, [index = s.index, token, text = std::move(piece.text), owned = std::move(owned)](CallObserver& o) {
    o.OnToken(index, TokenOutput{token, text, owned ? &*owned : nullptr});
  });
  return piece.stopped;
}

void PipelineDriver::State::EndAtStopString(const std::string& id) {
  // NOT_FOUND: the scheduler ended it with this very token (stop token or
  // max_new_tokens); its end event follows and reports the stop string.
  absl::StatusOr<std::vector<SchedulerEvent>> events = scheduler->Cancel(id);
  if (events.ok()) Handle(*events);
}

void PipelineDriver::State::OnResult(int stage, const v1::MicrobatchResult& result, Clock::time_point read) {
  received = read;
  auto it = in_flight.find(result.microbatch_id());
  if (it == in_flight.end() || down) return;  // forgotten by GoDown
  InFlight& f = it->second;
  if (f.answered[stage]) return;
  const bool steps_answer = stage == static_cast<int>(links.size()) - 1 && f.microbatch.decode_steps > 1 &&
                            !result.has_error();
  if (result.more()) {  // a step's answer, before the last
    if (steps_answer) RecordStep(f, result);
    return;
  }
  if (steps_answer) RecordStep(f, result);
  f.answered[stage] = true;
  ++f.answers;
  if (result.has_error() && f.error.ok()) {
    f.error = FromStageError(result.error(), absl::StrCat("stage ", stage, " failed microbatch ", result.microbatch_id(),
                                                          " of requests ", RequestsOf(f.microbatch)));
    if (absl::IsFailedPrecondition(f.error)) {
      // The stage refuses the stream itself (another epoch, a sequence
      // number it did not expect, not ready): every later microbatch would
      // fail alike, so the pipeline is reconfigured for a new epoch.
      return StageDown(stage, f.error);
    }
  }
  if (stage == static_cast<int>(links.size()) - 1) f.last = result;
  if (f.answers == static_cast<int>(links.size())) Finalize(result.microbatch_id());
}

void PipelineDriver::State::Finalize(uint64_t microbatch_id) {
  last_end = Clock::now();
  last_ended = microbatch_id;
  last_hop_us = std::chrono::duration_cast<std::chrono::microseconds>(last_end - received).count();
  InFlight f = std::move(in_flight.at(microbatch_id));
  in_flight.erase(microbatch_id);
  if (f.error.ok()) ObserveStepTime(f);
  last_step_end = received;
  if (!f.error.ok()) {
    if (++failed_in_a_row >= kMaxFailedInARow) {
      // Stages that keep failing are not serving: go down and reconfigure.
      return GoDown(absl::UnavailableError(absl::StrCat(kMaxFailedInARow, " microbatches in a row failed, the last: ",
                                                        f.error.message())));
    }
    return Handle(scheduler->Fail(microbatch_id, f.error).value_or(std::vector<SchedulerEvent>{}));
  }
  failed_in_a_row = 0;
  const int last = static_cast<int>(links.size()) - 1;
  std::map<uint64_t, const v1::SequenceResult*> by_id;
  for (const v1::SequenceResult& r : f.last.sequences()) by_id[r.sequence_id()] = &r;
  std::vector<SequenceResult> results;
  for (const auto& group : f.microbatch.entries_by_group) {
    for (const MicrobatchEntry& e : group) {
      auto found = sequences.find(e.request_id);
      // Ended while this microbatch ran (overlap_steps): its result is dropped.
      if (found == sequences.end() || found->second.ended) continue;
      Sequence& s = found->second;
      SequenceResult r;
      r.request_id = e.request_id;
      // Only a failure names it (a string per sequence and microbatch costs).
      const auto where = [&] {
        return absl::StrCat("stage ", last, " microbatch ", microbatch_id, " request '",
                            s.call->call.identity.server_id, "' sequence ", s.sequence_id);
      };
      auto it = by_id.find(s.sequence_id);
      if (it == by_id.end()) {
        if (e.is_last_chunk) r.status = absl::InternalError(absl::StrCat(where(), ": no result from the last stage"));
      } else if (it->second->has_error()) {
        r.status = FromStageError(it->second->error(), where());
      } else if (f.microbatch.decode_steps > 1) {
        if (auto err = f.step_errors.find(s.sequence_id); err != f.step_errors.end()) {
          r.status = absl::Status(err->second.code(), absl::StrCat(where(), ": ", err->second.message()));
        } else {
          r.tokens = std::move(f.step_tokens[s.sequence_id]);
        }
      } else {
        r.token = it->second->sampled_token();
        if (it->second->has_sampled_logprobs()) s.pending_logprobs = it->second->sampled_logprobs();
        if (s.call->call.score && e.is_last_chunk) {
          const auto& lp = it->second->token_logprobs();
          if (lp.size() + 1 != static_cast<int>(s.tokens.size())) {
            r.status = absl::UnimplementedError(absl::StrCat(
                where(), ": scoring needs ", s.tokens.size() - 1, " token log-probs, the last stage returned ",
                lp.size(), " (the stages do not implement return_token_logprobs)"));
          } else {
            s.logprobs.assign(lp.begin(), lp.end());
          }
        }
      }
      results.push_back(std::move(r));
    }
  }
  absl::StatusOr<std::vector<SchedulerEvent>> events = scheduler->Complete(microbatch_id, results);
  if (!events.ok()) {
    events = scheduler->Fail(microbatch_id, absl::InternalError(absl::StrCat(
                                                "stage ", last, " answered microbatch ", microbatch_id, " of requests ",
                                                RequestsOf(f.microbatch), " wrongly: ", events.status().message())));
  }
  Handle(events.value_or(std::vector<SchedulerEvent>{}));
  handled = Clock::now();
}

// With one microbatch in flight: from its send to its last answer. With
// several: from when the stages finished the one ahead (or its send, if
// later), so the wait behind the microbatches ahead is not counted.
void PipelineDriver::State::ObserveStepTime(const InFlight& f) {
  const Clock::duration took = received - std::max(f.sent, last_step_end);
  const double ms = std::max(0.0, std::chrono::duration<double, std::milli>(took).count());
  if (absl::Status st = scheduler->ObserveStepTime(f.microbatch.id, ms); !st.ok()) {
    SEAM_LOG_WARN("step time of microbatch {} not recorded: {}", f.microbatch.id, st.ToString());
  }
  const StepBudgetStats s = scheduler->StepBudget();
  if (s.fitted && ++timed_steps % 256 == 1) {
    SEAM_LOG_DEBUG("step time fit: {:.3f} ms (+ {:.3f} ms with prefill) + {:.5f} ms per prefill token + {:.5f} ms "
                   "per decode row + {:.7f} ms per KV position read; last step with decode rows: prefill budget {} "
                   "tokens, {:.3f} ms predicted",
                   s.intercept_ms, s.prefill_step_ms, s.prefill_token_ms, s.decode_row_ms, s.context_token_ms,
                   s.last_prefill_budget, s.last_predicted_ms);
  }
}

void PipelineDriver::State::Release(Sequence& s) {
  if (s.sent) to_free.push_back(s.sequence_id);
  s.ended = true;
}

void PipelineDriver::State::Handle(const std::vector<SchedulerEvent>& events) {
  for (const SchedulerEvent& ev : events) {
    auto it = sequences.find(ev.request_id);
    if (it == sequences.end()) continue;
    Sequence& s = it->second;
    std::shared_ptr<Call> call = s.call;
    if (ev.kind == SchedulerEvent::Kind::kToken) {
      s.tokens.push_back(ev.token);
      if (s.streamed > 0) {
        --s.streamed;  // given to the observer when its step was answered
        continue;
      }
      std::optional<v1::ChosenTokenLogprobs> logprobs = std::move(s.pending_logprobs);
      s.pending_logprobs.reset();
      if (Deliver(s, ev.token, logprobs ? &*logprobs : nullptr)) EndAtStopString(ev.request_id);
      continue;
    }
    const bool stop_string = s.output != nullptr && s.output->stopped();
    const std::string last_text = s.output != nullptr && ev.kind == SchedulerEvent::Kind::kFinished && !call->done
                                      ? s.output->Finish()
                                      : std::string();
    Release(s);
    --call->remaining;
    const int index = s.index;
    std::vector<float> logprobs = std::move(s.logprobs);
    sequences.erase(it);
    if (call->done) continue;
    if (ev.kind == SchedulerEvent::Kind::kFailed) {
      EndCall(call, ev.status);
      continue;
    }
    if (ev.reason == FinishReason::kCancelled && !stop_string) {
      EndCall(call, absl::CancelledError(absl::StrCat("request '", call->call.identity.server_id, "' was cancelled")));
      continue;
    }
    if (call->call.score) {
      Notify(*call, [index, logprobs = std::move(logprobs)](CallObserver& o) mutable {
        o.OnScore(index, std::move(logprobs));
      });
    } else {
      Notify(*call, [index, reason = stop_string ? FinishReason::kStopString : ev.reason,
                     text = last_text](CallObserver& o) { o.OnSequenceFinished(index, reason, text); });
    }
    if (call->remaining == 0) EndCall(call, absl::OkStatus());
  }
}

void PipelineDriver::State::EndCall(std::shared_ptr<Call> call, const absl::Status& status) {
  call->done = true;
  for (const std::string& id : call->sequence_ids) {
    auto it = sequences.find(id);
    if (it == sequences.end() || it->second.ended) continue;
    absl::StatusOr<std::vector<SchedulerEvent>> events = scheduler->Cancel(id);
    if (events.ok()) Handle(*events);  // in flight: it ends when its microbatch does
  }
  calls.erase(std::remove(calls.begin(), calls.end(), call), calls.end());
  Notify(*call, [status](CallObserver& o) { o.OnDone(status); });
}

void PipelineDriver::State::StageDown(int stage, const absl::Status& status) {
  if (down) return;
  on_stage_down(stage);
  GoDown(absl::UnavailableError(
      absl::StrCat("stage ", stage, " (", links[stage]->address(), ") is down: ", status.message())));
}

void PipelineDriver::State::OnBroken(int stage, const absl::Status& status) { StageDown(stage, status); }

void PipelineDriver::State::GoDown(const absl::Status& status) {
  if (down) return;
  down = true;
  down_status = status;
  in_flight.clear();
  absl::StatusOr<std::vector<SchedulerEvent>> events = scheduler->FailAll(status);
  if (events.ok()) Handle(*events);
  for (const std::shared_ptr<Call>& c : std::vector<std::shared_ptr<Call>>(calls)) {
    if (!c->done) EndCall(c, status);
  }
}

void PipelineDriver::State::Recover(std::vector<StageLink*> new_links) {
  links = std::move(new_links);
  failed_in_a_row = 0;
  down = false;
  down_status = absl::OkStatus();
  in_flight.clear();
  to_free.clear();  // the stages were reloaded: they hold no sequence any more
}

void PipelineDriver::State::CheckTimes(Clock::time_point now) {
  for (const auto& [id, f] : in_flight) {
    if (now <= f.deadline) continue;
    const int stage = static_cast<int>(std::find(f.answered.begin(), f.answered.end(), false) - f.answered.begin());
    return StageDown(stage, absl::DeadlineExceededError(absl::StrCat(
                                "no answer to microbatch ", id, " of requests ", RequestsOf(f.microbatch), " within ",
                                f.bound.count(), " ms (", options.stage_timeout.count(), " ms + ",
                                options.stage_timeout_per_token.count(), " ms per token owed) and ",
                                AnswerGrace(options.stage_timeout).count(), " ms of grace")));
  }
  // Runs after every message (each step's answer): the live calls are swept
  // at most once a millisecond, and copied only when one ends.
  if (now - last_call_sweep < std::chrono::milliseconds(1)) return;
  last_call_sweep = now;
  std::vector<std::shared_ptr<Call>> ending;
  for (const std::shared_ptr<Call>& c : calls) {
    if (!c->done && (now > c->call.deadline || c->call.observer->Cancelled())) ending.push_back(c);
  }
  for (const std::shared_ptr<Call>& c : ending) {
    if (c->done) continue;
    if (c->call.observer->Cancelled()) {
      EndCall(c, absl::CancelledError(absl::StrCat("request '", c->call.identity.server_id, "' was cancelled by the client")));
    } else {
      EndCall(c, absl::DeadlineExceededError(absl::StrCat("request '", c->call.identity.server_id, "' passed its deadline with ",
                                                          c->remaining, " of ", c->sequence_ids.size(),
                                                          " sequences unfinished")));
    }
  }
}

}  // namespace seam::coordinator
