// One sequence's output as the client sees it: each token the stages chose,
// the text it completes (incremental detokenization: a character split over
// tokens waits for its last byte), and the stop strings of its request
// matched in that text (StopStrings: the stop text left out, a tail that
// may begin one held back until it resolves). Stop strings count only once
// the sequence has min_tokens tokens, as vLLM counts them. Owned by the
// driver's record of the sequence; driver thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "stop_strings.h"

namespace seam::coordinator {

// The model's tokenizer turning a stream of token ids into text
// (service/model_text.h's TextStream is one).
class TokenText {
 public:
  virtual ~TokenText() = default;
  // The text that is whole after `token`.
  virtual std::string Push(int32_t token) = 0;
  // What is left at the end (bytes that never completed a character as U+FFFD).
  virtual std::string Flush() = 0;
};

class SequenceOutput {
 public:
  // `text` null: no tokenizer, so no text and no stop strings (the request
  // was refused if it named any).
  SequenceOutput(std::unique_ptr<TokenText> text, std::vector<std::string> stops, int min_tokens);

  struct Piece {
    std::string text;      // to send now (may be empty)
    bool stopped = false;  // a stop string ended the sequence with this token
  };
  // The next token; nothing after a stop.
  Piece Push(int32_t token);
  // The text left at the end of a sequence that no stop string ended.
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  std::unique_ptr<TokenText> text_;
  StopStrings stops_;
  int min_tokens_;
  int tokens_ = 0;
  bool stopped_ = false;
};

}  // namespace seam::coordinator
