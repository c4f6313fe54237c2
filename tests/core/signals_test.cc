// The signal record: counts and order of arrivals, a set's signals back to their default action
// after the first (or recorded again), ignored signals left ignored, and waiting with a deadline
// from another thread. Signals are raised in this process; each test uses its own.
#include "core/signals.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <thread>

namespace loom {
namespace {

using Clock = std::chrono::steady_clock;

// The handler installed for `sig` now.
void (*Disposition(int sig))(int) {
  struct sigaction sa {};
  ::sigaction(sig, nullptr, &sa);
  return sa.sa_handler;
}

TEST(Signals, RecordedAgainEachTimeAndReturnedOnceByTheWaiter) {
  ASSERT_EQ(RecordSignals({SIGUSR1}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver),
            std::vector<int>{SIGUSR1});
  const int before = SignalCount(SIGUSR1);
  SignalWaiter waiter({SIGUSR1});
  while (waiter.Poll() != 0) {
  }
  ::raise(SIGUSR1);
  ::raise(SIGUSR1);
  EXPECT_EQ(SignalCount(SIGUSR1), before + 2);
  EXPECT_NE(Disposition(SIGUSR1), SIG_DFL);  // still handled
  EXPECT_EQ(waiter.Poll(), SIGUSR1);         // two arrivals since the last call: returned once
  EXPECT_EQ(waiter.Poll(), 0);
  ::raise(SIGUSR1);
  EXPECT_EQ(waiter.Wait(Clock::now()), SIGUSR1);
}

TEST(Signals, AfterTheFirstTheWholeSetHasItsDefaultAction) {
  // (SIGWINCH's default action is to ignore it: the test survives either way.)
  ASSERT_EQ(RecordSignals({SIGUSR2, SIGWINCH}, OnRepeat::kDefaultAction, IfIgnored::kTakeOver),
            (std::vector<int>{SIGUSR2, SIGWINCH}));
  EXPECT_EQ(FirstSignal(std::vector<int>{SIGUSR2, SIGWINCH}), 0);
  ::raise(SIGWINCH);
  EXPECT_EQ(FirstSignal(std::vector<int>{SIGUSR2, SIGWINCH}), SIGWINCH);
  EXPECT_EQ(Disposition(SIGWINCH), SIG_DFL);
  EXPECT_EQ(Disposition(SIGUSR2), SIG_DFL);  // the next SIGUSR2 would end the process
  EXPECT_EQ(SignalCount(SIGUSR2), 0);
}

TEST(Signals, ASignalIgnoredFromTheStartStaysIgnoredUnlessTakenOver) {
  ::signal(SIGPIPE, SIG_IGN);  // as nohup does for SIGHUP
  EXPECT_TRUE(RecordSignals({SIGPIPE}, OnRepeat::kDefaultAction, IfIgnored::kStayIgnored).empty());
  EXPECT_EQ(Disposition(SIGPIPE), SIG_IGN);
  EXPECT_EQ(RecordSignals({SIGPIPE}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver),
            std::vector<int>{SIGPIPE});
  EXPECT_NE(Disposition(SIGPIPE), SIG_IGN);
  // Those that cannot be caught are left out, and numbers out of range ignored.
  EXPECT_TRUE(
      RecordSignals({SIGKILL, 0, 99}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver).empty());
}

TEST(Signals, TheFirstToComeIsReturnedFirst) {
  ASSERT_EQ(RecordSignals({SIGALRM, SIGPROF}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver).size(),
            2u);
  SignalWaiter waiter({SIGALRM, SIGPROF});
  ::raise(SIGPROF);
  ::raise(SIGALRM);
  EXPECT_EQ(FirstSignal(std::vector<int>{SIGALRM, SIGPROF}), SIGPROF);
  EXPECT_EQ(waiter.Poll(), SIGPROF);
  EXPECT_EQ(waiter.Poll(), SIGALRM);
  EXPECT_EQ(waiter.Poll(), 0);
}

TEST(Signals, AWaiterWakesForASignalFromAnotherThreadAndOtherwiseAtItsDeadline) {
  ASSERT_EQ(RecordSignals({SIGVTALRM}, OnRepeat::kRecordAgain, IfIgnored::kTakeOver).size(), 1u);
  SignalWaiter waiter({SIGVTALRM});
  EXPECT_EQ(waiter.Wait(Clock::now() + std::chrono::milliseconds(20)), 0);
  std::thread sender([] { ::kill(::getpid(), SIGVTALRM); });  // to the process: any thread
  EXPECT_EQ(waiter.Wait(Clock::now() + std::chrono::seconds(60)), SIGVTALRM);
  sender.join();
  // A signal before the waiter was made is returned too (none is lost in between).
  SignalWaiter late({SIGVTALRM});
  EXPECT_EQ(late.Poll(), SIGVTALRM);
}

}  // namespace
}  // namespace loom
