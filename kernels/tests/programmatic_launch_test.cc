// The process-wide switch of seam/kernels/programmatic_launch.h: off by
// default, and what was set is what is read (the CUDA launchers read it at
// each launch; cuda_pdl_test checks what it changes on a GPU).
#include "seam/kernels/programmatic_launch.h"

#include <gtest/gtest.h>

namespace seam::kernels {
namespace {

TEST(ProgrammaticLaunchSwitch, IsOffByDefaultAndReadsBackWhatWasSet) {
  EXPECT_FALSE(ProgrammaticLaunch());
  SetProgrammaticLaunch(true);
  EXPECT_TRUE(ProgrammaticLaunch());
  SetProgrammaticLaunch(false);
  EXPECT_FALSE(ProgrammaticLaunch());
}

}  // namespace
}  // namespace seam::kernels
