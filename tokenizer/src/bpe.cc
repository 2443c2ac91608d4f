#include "bpe.h"

#include <queue>
#include <string>

#include "absl/strings/str_cat.h"
#include "byte_level.h"

namespace seam::tokenizer {
namespace {

absl::Status Unsupported(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: BPE model with ", what, " is not supported"));
}

bool IsUnset(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  return it == model.end() || it->is_null() || (it->is_string() && it->get<std::string>().empty()) ||
         (it->is_boolean() && !it->get<bool>());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Bpe>> Bpe::FromJson(const nlohmann::json& model) {
  if (model.value("type", std::string("BPE")) != "BPE") {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer.json: model type '", model.value("type", std::string()), "' is not supported (only BPE)"));
  }
  for (const char* key : {"dropout", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!IsUnset(model, key)) return Unsupported(key);
  }
  auto vocab_it = model.find("vocab");
  auto merges_it = model.find("merges");
  if (vocab_it == model.end() || !vocab_it->is_object() || merges_it == model.end() || !merges_it->is_array()) {
    return absl::InvalidArgumentError("tokenizer.json: BPE model needs a 'vocab' object and a 'merges' array");
  }
  auto bpe = std::unique_ptr<Bpe>(new Bpe());
  bpe->ignore_merges_ = model.value("ignore_merges", false);
  for (auto it = vocab_it->begin(); it != vocab_it->end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
        it.value().get<int64_t>() > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad id for vocabulary entry '", it.key(),
                                                     "' (ids are in [0, ", kMaxTokenId, "])"));
    }
    const int32_t id = it.value().get<int32_t>();
    auto bytes = ByteLevelToBytes(it.key());
    if (!bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: vocabulary entry '", it.key(), "' is not byte-level (only byte-level BPE is supported)"));
    }
    if (static_cast<size_t>(id) >= bpe->id_bytes_.size()) bpe->id_bytes_.resize(id + 1);
    bpe->id_bytes_[id] = *bytes;
    bpe->bytes_to_id_[*bytes] = id;
    bpe->vocab_[it.key()] = id;
  }
  for (int b = 0; b < 256; ++b) {
    auto it = bpe->bytes_to_id_.find(std::string(1, static_cast<char>(b)));
    if (it == bpe->bytes_to_id_.end()) {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: BPE vocabulary has no token for byte ", b));
    }
    bpe->byte_ids_[b] = it->second;
  }
  int32_t rank = 0;
  for (const auto& m : *merges_it) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad merge '", s, "'"));
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: bad merge ", m.dump()));
    }
    auto l = bpe->vocab_.find(left), r = bpe->vocab_.find(right), merged = bpe->vocab_.find(left + right);
    if (l == bpe->vocab_.end() || r == bpe->vocab_.end() || merged == bpe->vocab_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("tokenizer.json: merge '", left, " ", right, "' names a token outside the vocabulary"));
    }
    bpe->merges_.emplace(Key(l->second, r->second), Merge{rank++, merged->second});  // first rank wins
  }
  return bpe;
}

void Bpe::Encode(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    auto it = bytes_to_id_.find(std::string(piece));
    if (it != bytes_to_id_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int prev, next;
    bool alive;
  };
  std::vector<Symbol> symbols(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    symbols[i] = {byte_ids_[static_cast<uint8_t>(piece[i])], static_cast<int>(i) - 1,
                  i + 1 < piece.size() ? static_cast<int>(i) + 1 : -1, true};
  }
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t merged;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto push = [&](int pos) {
    if (pos < 0 || symbols[pos].next < 0) return;
    auto it = merges_.find(Key(symbols[pos].id, symbols[symbols[pos].next].id));
    if (it != merges_.end()) queue.push({it->second.rank, pos, it->second.merged});
  };
  for (size_t i = 0; i + 1 < piece.size(); ++i) push(static_cast<int>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.pos];
    if (!left.alive || left.next < 0) continue;
    auto it = merges_.find(Key(left.id, symbols[left.next].id));
    if (it == merges_.end() || it->second.rank != c.rank) continue;  // stale: a neighbour merged first
    Symbol& right = symbols[left.next];
    left.id = c.merged;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  for (int i = 0; i >= 0; i = symbols[i].next) ids->push_back(symbols[i].id);
}

}  // namespace seam::tokenizer
