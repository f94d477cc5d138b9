#include "guard/guard_health.hpp"

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <limits>

namespace gpurun {
namespace {

using std::chrono::nanoseconds;

constexpr std::int64_t kNoPass = std::numeric_limits<std::int64_t>::min();
constexpr nanoseconds kStaleFloor = std::chrono::seconds(10);
constexpr int kStalePeriods = 3;

std::string seconds_text(nanoseconds d) {
  char out[32];
  std::snprintf(out, sizeof out, "%.3f", std::chrono::duration<double>(d).count());
  return out;
}

bool is_stale(const LoopAge& loop, nanoseconds uptime) { return loop.age.value_or(uptime) > stale_after(loop.period); }

std::string loop_line(const LoopAge& loop, nanoseconds uptime) {
  const std::string threshold = ", stale after " + seconds_text(stale_after(loop.period)) + " s\n";
  if (!loop.age)
    return std::string(loop.name) + ": no pass yet, " + seconds_text(uptime) + " s after the start" + threshold;
  return std::string(loop.name) + ": last pass " + seconds_text(*loop.age) + " s ago" + threshold;
}

}  // namespace

GuardInstant GuardInstant::now() { return {std::chrono::steady_clock::now(), std::chrono::system_clock::now()}; }

GuardClock GuardClock::system() {
  return {GuardInstant::now, [](nanoseconds d) {
            struct timespec ts {};
            ts.tv_sec = static_cast<time_t>(d.count() / 1000000000);
            ts.tv_nsec = static_cast<long>(d.count() % 1000000000);
            ::nanosleep(&ts, nullptr);  // EINTR (SIGTERM) returns early: the caller checks its stop
          }};
}

nanoseconds stale_after(nanoseconds period) { return std::max(kStaleFloor, kStalePeriods * period); }

HttpAnswer guard_health(const LoopAge& sampler, const LoopAge& discovery, nanoseconds uptime, bool readiness) {
  std::string stale;
  std::string starting;
  const auto add = [](std::string& list, const char* name) { list += (list.empty() ? "" : ", ") + std::string(name); };
  for (const LoopAge* loop : {&sampler, &discovery}) {
    if (is_stale(*loop, uptime))
      add(stale, loop->name);
    else if (readiness && !loop->age)
      add(starting, loop->name);
  }
  HttpAnswer answer;
  if (!stale.empty())
    answer = {503, "stale: " + stale + "\n"};
  else if (!starting.empty())
    answer = {503, "starting: " + starting + "\n"};
  else
    answer = {200, "ok\n"};
  answer.body += loop_line(sampler, uptime) + loop_line(discovery, uptime);
  return answer;
}

void GuardProgress::Loop::passed(GuardInstant at) {
  wall_ns.store(std::chrono::duration_cast<nanoseconds>(at.wall.time_since_epoch()).count());
  steady_ns.store(std::chrono::duration_cast<nanoseconds>(at.steady.time_since_epoch()).count());
}

LoopAge GuardProgress::Loop::age(const char* name, std::chrono::steady_clock::time_point now) const {
  LoopAge out{name, std::nullopt, nanoseconds(period_ns.load())};
  const std::int64_t last = steady_ns.load();
  if (last != kNoPass)
    out.age =
        std::max(nanoseconds(0), std::chrono::duration_cast<nanoseconds>(now.time_since_epoch()) - nanoseconds(last));
  return out;
}

GuardProgress::GuardProgress(GuardInstant start, nanoseconds sample_period, nanoseconds discovery_period)
    : start_(start.steady) {
  for (Loop* loop : {&sampler_, &discovery_}) loop->steady_ns = kNoPass;
  sampler_.period_ns = sample_period.count();
  discovery_.period_ns = discovery_period.count();
}

void GuardProgress::sampled(GuardInstant at) { sampler_.passed(at); }

void GuardProgress::discovered(GuardInstant at, nanoseconds period) {
  discovery_.period_ns = period.count();
  discovery_.passed(at);
}

HttpAnswer GuardProgress::health(std::chrono::steady_clock::time_point now, bool readiness) const {
  return guard_health(sampler_.age("sampler", now), discovery_.age("discovery", now),
                      std::max(nanoseconds(0), std::chrono::duration_cast<nanoseconds>(now - start_)), readiness);
}

double GuardProgress::last_sample_seconds() const {
  return sampler_.steady_ns.load() == kNoPass ? 0 : static_cast<double>(sampler_.wall_ns.load()) / 1e9;
}

double GuardProgress::last_discovery_seconds() const {
  return discovery_.steady_ns.load() == kNoPass ? 0 : static_cast<double>(discovery_.wall_ns.load()) / 1e9;
}

}  // namespace gpurun
