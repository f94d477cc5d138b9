#include "shm/remount_job.hpp"

#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <thread>

#include "shm/shm_remount.hpp"
#include "support/test_files.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST(RemountArgsTest, RoundTripAndClearErrors) {
  const RemountRequest r{42, 512ull << 20, true, dev_t{77}};
  const auto args = remount_args(r);
  EXPECT_EQ(args, (std::vector<std::string>{"42", "536870912", "--allow-shrink", "--host-dev", "77"}));
  const RemountRequest back = parse_remount_args(args);
  EXPECT_EQ(back.pid, 42);
  EXPECT_EQ(back.size, 512ull << 20);
  EXPECT_TRUE(back.allow_shrink);
  EXPECT_EQ(back.host_dev, dev_t{77});
  EXPECT_FALSE(parse_remount_args({"1", "2"}).host_dev);
  EXPECT_CONTAINS(error_of([] { parse_remount_args({"1"}); }), "expected PID and BYTES");
  EXPECT_CONTAINS(error_of([] { parse_remount_args({"0", "5"}); }), "PID 0 is no process");
  EXPECT_CONTAINS(error_of([] { parse_remount_args({"x", "5"}); }), "--remount PID");
  EXPECT_CONTAINS(error_of([] { parse_remount_args({"1", "2", "--host-dev"}); }), "--host-dev needs");
  EXPECT_CONTAINS(error_of([] { parse_remount_args({"1", "2", "--shrink"}); }), "unknown option --shrink");
  EXPECT_EQ(expect_error([] { parse_remount_args({"1"}); }).exit_code(), kExitUsage);
}

TEST(RemountReportTest, AResultAndAnErrorComeBackAsTheHelperWroteThem) {
  const RemountOutcome ok = parse_remount_report(remount_report(ShmResult{ShmOutcome::kResized, 64, 128}), "", 0, "h");
  ASSERT_TRUE(ok.result);
  EXPECT_EQ(ok.result->outcome, ShmOutcome::kResized);
  EXPECT_EQ(ok.get().after, 128u);
  const RemountOutcome failed =
      parse_remount_report(remount_report(Error("open /proc/9/ns/mnt: No such process", ESRCH)), "", 1, "h");
  EXPECT_FALSE(failed.result);
  const Error e = expect_error([&] { failed.get(); });
  EXPECT_STREQ(e.what(), "open /proc/9/ns/mnt: No such process");
  EXPECT_EQ(e.errno_value(), ESRCH);
  const RemountOutcome garbage = parse_remount_report("hello\n", "boom\nmore", 139, "/x/helper");
  EXPECT_EQ(garbage.error, "remount /dev/shm: /x/helper ended without a report (exit 139): boom");
  const RemountOutcome unknown = parse_remount_report(R"({"outcome":"grown","before":1,"after":2})", "", 0, "h");
  EXPECT_FALSE(unknown.result) << "an outcome it does not know is no result";
}

TEST(RemountJobTest, CollectsTheHelpersReportAndPassesItTheRequest) {
  test::TempDir dir;
  const fs::path args = dir.path() / "args";
  const fs::path helper = dir.write_script(
      "helper", "echo \"$@\" > " + args.string() + "\necho '{\"outcome\":\"resized\",\"before\":1,\"after\":2}'");
  RemountJob job(helper, RemountRequest{7, 4096, false, std::nullopt}, milliseconds(5000));
  const RemountOutcome o = job.wait();
  ASSERT_TRUE(o.result) << o.error;
  EXPECT_EQ(o.result->after, 2u);
  EXPECT_EQ(test::read_text(args), "--remount 7 4096\n");
  EXPECT_FALSE(job.poll()->result) << "a finished job reports no second result";
}

TEST(RemountJobTest, AnErrorReportKeepsItsExitCodeAndErrno) {
  test::TempDir dir;
  const fs::path helper =
      dir.write_script("helper", R"(echo '{"error":"setns: EPERM","errno":1,"exit_code":1}'; exit 1)");
  const Error e = expect_error([&] {
    remount_shm(RemountRequest{7, 4096, false, std::nullopt}, helper, milliseconds(5000));
  });
  EXPECT_STREQ(e.what(), "setns: EPERM");
  EXPECT_EQ(e.errno_value(), 1);
}

TEST(RemountJobTest, AMissingHelperIsAClearError) {
  const Error e = expect_error([] {
    RemountJob(fs::path("/nonexistent/gpu-run-hook"), RemountRequest{7, 4096, false, std::nullopt});
  });
  EXPECT_CONTAINS(e.what(), "remount /dev/shm of pid 7: cannot run /nonexistent/gpu-run-hook: No such file");
}

// The guard polls a job with every sample: a helper that hangs never makes a poll wait, and is
// killed once its deadline has passed.
TEST(RemountJobTest, AHangingHelperNeverBlocksAPollAndIsKilledAtItsDeadline) {
  test::TempDir dir;
  const fs::path pid_file = dir.path() / "pid";
  const fs::path helper = dir.write_script("helper", "echo $$ > " + pid_file.string() + "\nexec sleep 600");
  const auto start = Clock::now();
  // 2 s: a CI-like run's loaded asan phase once let only 4 polls of 5 ms sleeps through in 300 ms.
  RemountJob job(helper, RemountRequest{7, 4096, false, std::nullopt}, milliseconds(2000));
  std::optional<RemountOutcome> done;
  auto slowest = Clock::duration::zero();
  int polls = 0;
  while (!done) {
    const auto before = Clock::now();
    done = job.poll();
    slowest = std::max(slowest, Clock::now() - before);
    ++polls;
    std::this_thread::sleep_for(milliseconds(5));
  }
  const auto took = Clock::now() - start;
  EXPECT_GT(polls, 10);
  EXPECT_LT(slowest, milliseconds(500)) << "a poll waited for the helper (it would take the whole 2 s)";
  EXPECT_GE(took, milliseconds(2000));
  EXPECT_LT(took, milliseconds(6000));
  EXPECT_FALSE(done->result);
  EXPECT_CONTAINS(done->error, "did not finish within 2000 ms: killed");
  const int pid = std::stoi(test::read_text(pid_file));
  // Reaped within 20 ms of the kill, or by a later step (a loaded machine: ctest -j2 beside a
  // fuzz run left it a zombie past those 20 ms).
  for (int i = 0; i < 100 && ::kill(pid, 0) == 0; ++i) {
    RemountJob::reap_killed();
    std::this_thread::sleep_for(milliseconds(10));
  }
  EXPECT_NE(::kill(pid, 0), 0) << "the helper was killed and reaped";
  EXPECT_EQ(RemountJob::reap_killed(), 0u);
}

TEST(RemountJobTest, WaitEndsAtTheDeadlineToo) {
  test::TempDir dir;
  const fs::path helper = dir.write_script("helper", "exec sleep 600");
  const auto start = Clock::now();
  const Error e = expect_error([&] {
    remount_shm(RemountRequest{7, 4096, false, std::nullopt}, helper, milliseconds(200));
  });
  EXPECT_CONTAINS(e.what(), "did not finish within 200 ms");
  EXPECT_LT(Clock::now() - start, milliseconds(3000));
}

}  // namespace
}  // namespace gpurun
