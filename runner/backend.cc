#include "runner/backend.h"

#include <chrono>
#include <thread>

namespace tunepar::runner {

TrialResult Backend::Evaluate(const Layout& layout, const TrialContext& context) {
  std::unique_ptr<RunningTrial> trial = Start(layout, context);
  while (true) {
    if (std::optional<TrialResult> result = trial->Poll()) return *result;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace tunepar::runner
