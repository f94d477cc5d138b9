#include "base/stop_signal.hpp"

namespace gpurun {

namespace {
volatile sig_atomic_t g_stop = 0;

void on_stop_signal(int) { g_stop = 1; }
}  // namespace

StopOnSignal::StopOnSignal() {
  g_stop = 0;
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // No SA_RESTART: a sleep returns at once.
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

StopOnSignal::~StopOnSignal() {
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
}

bool stop_requested() { return g_stop != 0; }

}  // namespace gpurun
