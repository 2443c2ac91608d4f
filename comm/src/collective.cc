// Names and printing of collective records (see seam/comm/collective.h).
#include "seam/comm/collective.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace seam::comm {

const char* CollectiveName(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::kAllReduce: return "AllReduce";
    case CollectiveKind::kReduceScatter: return "ReduceScatter";
    case CollectiveKind::kReduceScatterV: return "ReduceScatterV";
    case CollectiveKind::kAllGather: return "AllGather";
    case CollectiveKind::kAllGatherV: return "AllGatherV";
    case CollectiveKind::kBroadcast: return "Broadcast";
    case CollectiveKind::kBarrier: return "Barrier";
  }
  return "UnknownCollective";
}

std::string CollectiveRecord::ToString() const {
  std::string s = absl::StrCat(CollectiveName(kind), "(", group);
  if (kind != CollectiveKind::kBarrier) absl::StrAppend(&s, ", ", DTypeName(dtype), ShapeToString(shape));
  if (!row_counts.empty()) absl::StrAppend(&s, ", rows [", absl::StrJoin(row_counts, ", "), "]");
  if (kind == CollectiveKind::kBroadcast) absl::StrAppend(&s, ", root ", root);
  return s + ")";
}

bool CollectiveRecord::operator==(const CollectiveRecord& o) const {
  return kind == o.kind && group == o.group && shape == o.shape && dtype == o.dtype && row_counts == o.row_counts &&
         root == o.root;
}

}  // namespace seam::comm
