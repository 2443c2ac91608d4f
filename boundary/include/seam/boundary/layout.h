// Token layouts, sum groups and the parallel topology of one rank.
// A layout names the token axes that partition a rank's rows; a sum group
// names the ranks whose partial outputs must be added. Keeping rows and sums
// apart lets a contribution say both "what it still owes" and "where the
// completed rows must land". Plain data: copied freely, printed in plans.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace seam::comm {
class Communicator;
}

namespace seam::boundary {

// Axes that can partition a rank's token rows. Size-one axes are omitted.
enum class TokenAxis : uint8_t { kAttnDp, kAttnCp, kAttnTp };
const char* TokenAxisName(TokenAxis axis);

// The row forms the boundary moves between. Each maps to a Layout:
//   kDpRows      this attention-DP group's rows, replicated over attention TP  [ATTN_DP]
//   kAttnTpSlice this rank's attention-TP slice of its DP group's rows         [ATTN_DP, ATTN_TP]
//   kFfnRows     every DP group's rows, held alike by every TP rank            []
//   kCpRows      this rank's context-parallel rows of its DP group (zig-zag
//                chunks of every sequence, context_parallel.h), replicated
//                over attention TP                                            [ATTN_CP]
enum class RowForm : uint8_t { kDpRows, kAttnTpSlice, kFfnRows, kCpRows };
const char* RowFormName(RowForm form);

// Which ranks' partial outputs a contribution must still add.
enum class SumGroup : uint8_t { kNone, kAttnTp, kTp, kMoeOutput };
const char* SumGroupName(SumGroup group);

// The fixed parallel facts of one stage and one rank inside it. Context
// parallelism divides the attention's share of the TP group:
// tp = attn_dp · attn_cp · attn_tp, and
// tp_rank = (dp_rank · attn_cp + cp_rank) · attn_tp + attn_tp_rank.
// Attention weights are split over attn_tp only (replicated over CP ranks);
// FFN weights over all tp ranks. attn_cp > 1 is served without attention DP.
struct Topology {
  int tp = 1;
  int attn_dp = 1;
  int tp_rank = 0;
  int attn_cp = 1;

  // INVALID_ARGUMENT for sizes that do not divide, a rank outside the group,
  // or attn_cp > 1 together with attn_dp > 1.
  static absl::StatusOr<Topology> Make(int tp, int attn_dp, int tp_rank, int attn_cp = 1);
  int attn_tp() const { return tp / (attn_dp * attn_cp); }
  int dp_rank() const { return tp_rank / (attn_cp * attn_tp()); }
  int cp_rank() const { return (tp_rank / attn_tp()) % attn_cp; }
  int attn_tp_rank() const { return tp_rank % attn_tp(); }
  std::string ToString() const;  // "tp=4 attn_dp=2 attn_tp=2 rank=3 (dp 1, attn_tp 1)"
};

// Layout of a row form: the token axes partitioning it, size-one axes omitted.
struct Layout {
  std::vector<TokenAxis> sharded;
  static Layout Of(RowForm form, const Topology& topology);
  std::string ToString() const;  // "[ATTN_DP, ATTN_TP]" or "[]"
};

// The communicators of one rank's groups. Not owned; they outlive the boundary.
// The group that completes a sum: kAttnTp → attn_tp; kTp, kMoeOutput → tp.
// attn_cp: the ranks of one DP group and attention-TP rank (context-parallel
// batches gather their rows over it); may stay null without CP.
struct StageComms {
  comm::Communicator* tp = nullptr;
  comm::Communicator* attn_tp = nullptr;
  comm::Communicator* attn_dp = nullptr;
  comm::Communicator* attn_cp = nullptr;
};

// Size of the group completing `group` (1 for kNone).
int SumGroupSize(SumGroup group, const Topology& topology);

}  // namespace seam::boundary
