// fed_tokens.h: the token a stage chose, fed to the step sent before it was known.
#include "fed_tokens.h"

#include "absl/strings/str_cat.h"

namespace seam::server {

absl::StatusOr<const v1::MicrobatchDescriptor*> FedTokens::Fill(const v1::MicrobatchDescriptor& d, bool feeds_here,
                                                                v1::MicrobatchDescriptor& storage,
                                                                std::vector<v1::SequenceResult>& dropped) {
  filled_ = 0;
  for (int i = 0; i < d.sequences_size(); ++i) {
    const v1::SequenceEntry& s = d.sequences(i);
    if (!s.feed_previous_token()) continue;
    const char* why = !feeds_here ? "only a stage that is the whole pipeline feeds the token it chose"
                      : s.is_prefill() || s.token_ids_size() != 0 || d.decode_steps() > 1
                          ? "a fed entry is a one-step decode entry without token_ids"
                          : nullptr;
    if (why != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("sequences[", i, "].feed_previous_token: sequence ",
                                                     s.sequence_id(), " (request '", s.server_request_id(), "'): ", why));
    }
    ++filled_;
  }
  const v1::MicrobatchDescriptor* run = &d;
  if (filled_ > 0) {
    storage = d;
    storage.clear_sequences();
    for (int i = 0; i < d.sequences_size(); ++i) {
      const v1::SequenceEntry& s = d.sequences(i);
      auto it = s.feed_previous_token() ? chosen_.find(s.sequence_id()) : chosen_.end();
      if (s.feed_previous_token() && it == chosen_.end()) {
        v1::SequenceResult r;
        r.set_sequence_id(s.sequence_id());
        r.set_server_request_id(s.server_request_id());
        r.mutable_error()->set_code(static_cast<int>(absl::StatusCode::kAborted));
        r.mutable_error()->set_message(absl::StrCat(
            "sequences[", i, "].feed_previous_token: sequence ", s.sequence_id(),
            " had no token chosen in the microbatch before this one (it was not there, or failed there)"));
        dropped.push_back(std::move(r));
        continue;
      }
      v1::SequenceEntry* copy = storage.add_sequences();
      *copy = s;
      if (s.feed_previous_token()) {
        copy->add_token_ids(it->second);
        copy->set_feed_previous_token(false);
      }
    }
    run = &storage;
  }
  for (const v1::SequenceEntry& s : d.sequences()) chosen_.erase(s.sequence_id());
  return run;
}

void FedTokens::Record(const v1::MicrobatchResult& result) {
  for (const v1::SequenceResult& r : result.sequences()) {
    if (!r.has_error() && r.has_sampled_token()) chosen_[r.sequence_id()] = r.sampled_token();
  }
}

}  // namespace seam::server
