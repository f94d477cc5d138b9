#pragma once

#include <signal.h>

namespace gpurun {

// While alive, SIGINT and SIGTERM end a long-running command (watch, guard) instead of the
// process: stop_requested() turns true and a sleep returns at once (no SA_RESTART).
class StopOnSignal {
 public:
  StopOnSignal();
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;
  ~StopOnSignal();

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};
bool stop_requested();

}  // namespace gpurun
