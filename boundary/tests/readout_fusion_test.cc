// A read's own completing fusions: tried ahead of the read and before any
// provider candidate or the built-in all-reduce; one that only completes the
// sum with the residual add leaves the read to run, one that also reads
// writes the input itself. Both equal the plain run bit for bit.
#include <mutex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "rank_threads.h"
#include "seam/comm/communicator.h"
#include "seam/comm/recording_communicator.h"
#include "seam/core/status.h"
#include "seam/kernels/ops.h"
#include "stage_fixture.h"

namespace seam::boundary::testing {
namespace {

struct Log {
  std::mutex mu;
  std::vector<std::string> names;
  void Add(const std::string& n) {
    std::lock_guard<std::mutex> lock(mu);
    names.push_back(n);
  }
};

class Completing final : public ReadoutFusion {
 public:
  Completing(std::string name, bool reads, bool accept, const NormParams* norm, Log* log)
      : name_(std::move(name)), reads_(reads), accept_(accept), norm_(norm), log_(log) {}
  std::string name() const override { return name_; }
  SumGroup completes() const override { return SumGroup::kAttnTp; }
  bool reads() const override { return reads_; }
  absl::StatusOr<bool> TryComplete(const Tensor& c, const Tensor& r, const Tensor& out,
                                   comm::Communicator& group) override {
    log_->Add(name_);
    if (!accept_) return false;
    const Tensor sum = c.is_contiguous() ? c.Clone() : c.Clone();
    SEAM_RETURN_IF_ERROR(group.AllReduce(sum));
    if (reads_) {
      SEAM_RETURN_IF_ERROR(kernels::FusedAddRmsNorm(sum, r, norm_->weight, norm_->eps, out));
    } else {
      SEAM_RETURN_IF_ERROR(kernels::AddInPlace(r, sum));
    }
    return true;
  }

 private:
  std::string name_;
  bool reads_, accept_;
  const NormParams* norm_;
  Log* log_;
};

// The plain add + RMSNorm read with completing fusions of its own.
class ReadWithFusions final : public ResidualReadout {
 public:
  ReadWithFusions(const NormParams* norm, std::vector<std::shared_ptr<ReadoutFusion>> fusions)
      : inner_(norm), fusions_(std::move(fusions)) {}
  std::string name() const override { return "add_rmsnorm_with_completing_fusions"; }
  ReadoutCaps caps() const override { return Caps(); }
  static ReadoutCaps Caps() {
    ReadoutCaps c;
    c.add_norm = false;  // no provider candidate replaces it
    c.completing_fusions = true;
    return c;
  }
  absl::Status Read(const Tensor& r, const Tensor& out) const override { return inner_.Read(r, out); }
  absl::Status UpdateAndRead(const ResidualUpdate& u, const Tensor& c, const Tensor& r,
                             const Tensor& out) const override {
    return inner_.UpdateAndRead(u, c, r, out);
  }
  std::vector<std::shared_ptr<ReadoutFusion>> CompletingFusions() const override { return fusions_; }

 private:
  AddRmsNormRead inner_;
  std::vector<std::shared_ptr<ReadoutFusion>> fusions_;
};

TEST(ReadoutFusion, CompletingFusionsRunAheadOfTheReadInOrderAndMatchThePlainRun) {
  for (bool reads : {false, true}) {
    Log logs[2];
    auto registry = std::make_shared<comm::RecordingRegistry>(comm::CommOptions{absl::Seconds(5)});
    std::vector<Tensor> fused(2), plain(2);
    auto results = RunRanks(2, 1, comm::MakeRecordingGroupFactory(registry),
                            [&](const Topology& t, const StageComms& comms) -> absl::Status {
      for (bool with : {true, false}) {
        auto layer = std::make_unique<OneLayer>();
        std::shared_ptr<const ResidualReadout> read;
        StageDeclaration ffn = DeclareFfn();
        if (with) {
          read = std::make_shared<ReadWithFusions>(
              &layer->ffn_norm, std::vector<std::shared_ptr<ReadoutFusion>>{
                                    std::make_shared<Completing>("declines", reads, false, &layer->ffn_norm, &logs[t.tp_rank]),
                                    std::make_shared<Completing>("accepts", reads, true, &layer->ffn_norm, &logs[t.tp_rank])});
          ffn.readout_caps = ReadWithFusions::Caps();
        }
        LayerStack stack(LayerStackOptions{t, ReductionPolicy::kAr});
        SEAM_ASSIGN_OR_RETURN(auto b, SEAM_APPEND_STAGES(0, StageItem{DeclareAttn(), &layer->attn_norm},
                                                         StageItem{ffn, &layer->ffn_norm, {}, read}));
        SEAM_RETURN_IF_ERROR(stack.Close());
        layer->attn = b[0];
        layer->ffn = b[1];
        ForwardBatch batch(1, BatchVariant::kOrdinary, t, {4});
        batch.comms = comms;
        SEAM_ASSIGN_OR_RETURN((with ? fused : plain)[t.tp_rank], RunLayer(*layer, batch, Rows(6, 4)));
      }
      return absl::OkStatus();
    });
    for (const absl::Status& s : results) ASSERT_TRUE(s.ok()) << s;
    for (int r = 0; r < 2; ++r) EXPECT_TRUE(BitEqual(fused[r], plain[r])) << "reads=" << reads << " rank " << r;
    // Each rank's FFN input tried them in order and stopped at the first that accepted.
    for (int r = 0; r < 2; ++r) EXPECT_THAT(logs[r].names, ::testing::ElementsAre("declines", "accepts")) << reads;
  }
}

}  // namespace
}  // namespace seam::boundary::testing
