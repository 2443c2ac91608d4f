// A sequence's tokens to text and stop strings (see sequence_output.h).
#include "sequence_output.h"

namespace seam::coordinator {

SequenceOutput::SequenceOutput(std::unique_ptr<TokenText> text, std::vector<std::string> stops, int min_tokens)
    : text_(std::move(text)), stops_(std::move(stops)), min_tokens_(min_tokens) {}

SequenceOutput::Piece SequenceOutput::Push(int32_t token) {
  Piece piece;
  if (stopped_ || text_ == nullptr) return piece;
  ++tokens_;
  std::string text = text_->Push(token);
  if (stops_.empty() || tokens_ < min_tokens_) {
    piece.text = std::move(text);
    return piece;
  }
  StopStrings::Step step = stops_.Push(text);
  piece.text = std::move(step.release);
  piece.stopped = stopped_ = step.stopped;
  return piece;
}

std::string SequenceOutput::Finish() {
  if (stopped_ || text_ == nullptr) return "";
  std::string rest = text_->Flush();
  if (stops_.empty() || tokens_ < min_tokens_) return rest;
  StopStrings::Step step = stops_.Push(rest);
  if (step.stopped) {
    stopped_ = true;
    return step.release;
  }
  return step.release + stops_.Flush();
}

}  // namespace seam::coordinator
