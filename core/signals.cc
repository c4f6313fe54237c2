// The signal record (see signals.h). Invariant: the handler touches only the lock-free atomics
// below and makes only async-signal-safe calls (sigaction, write), and keeps errno.
#include "core/signals.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <thread>

namespace loom {
namespace {

constexpr int kSlots = 65;  // signal numbers 1-64 on Linux
static_assert(std::atomic<int>::is_always_lock_free, "the handler needs lock-free atomics");

std::atomic<int> g_count[kSlots];   // arrivals per signal
std::atomic<int> g_first[kSlots];   // order of each signal's first arrival (0: none yet)
std::atomic<int> g_arrivals{0};     // arrivals of any signal, for g_first
std::atomic<int> g_set[kSlots];     // the set each signal was installed with last (0: none)
std::atomic<bool> g_reset[kSlots];  // its set gets the default actions back on the first
std::atomic<int> g_wake_read{-1}, g_wake_write{-1};  // wakes a waiter (a self-pipe)
int g_sets = 0;  // sets installed so far (RecordSignals' thread only)

void Record(int sig) {
  const int saved_errno = errno;
  int none = 0;
  g_first[sig].compare_exchange_strong(none, g_arrivals.fetch_add(1) + 1);
  g_count[sig].fetch_add(1);
  if (g_reset[sig].load()) {
    // The kernel has reset this one (SA_RESETHAND); the rest of its set follows.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    const int set = g_set[sig].load();
    for (int s = 1; s < kSlots; ++s) {
      if (s != sig && g_set[s].load() == set) ::sigaction(s, &dfl, nullptr);
    }
  }
  if (const int fd = g_wake_write.load(); fd >= 0) {
    const char byte = 1;
    (void)!::write(fd, &byte, 1);  // a full pipe already wakes the waiter
  }
  errno = saved_errno;
}

// Best effort: without the pipe a waiter looks every 50 ms instead of waking at once.
void MakeWakePipe() {
  if (g_wake_read.load() >= 0) return;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
  g_wake_read.store(fds[0]);
  g_wake_write.store(fds[1]);
}

}  // namespace

std::vector<int> RecordSignals(const std::vector<int>& signals, OnRepeat on_repeat,
                               IfIgnored if_ignored) {
  MakeWakePipe();
  const int set = ++g_sets;
  const bool reset = on_repeat == OnRepeat::kDefaultAction;
  std::vector<int> handled;
  for (const int sig : signals) {
    if (sig < 1 || sig >= kSlots) continue;
    struct sigaction old {};
    if (::sigaction(sig, nullptr, &old) != 0) continue;
    // (A handler installed with SA_SIGINFO is not SIG_IGN, whatever its pointer reads as.)
    const bool ignored = (old.sa_flags & SA_SIGINFO) == 0 && old.sa_handler == SIG_IGN;
    if (ignored && if_ignored == IfIgnored::kStayIgnored) continue;
    g_set[sig].store(set);
    g_reset[sig].store(reset);
    struct sigaction sa {};
    sa.sa_handler = Record;
    sigemptyset(&sa.sa_mask);
    // SA_RESTART: blocking I/O and waits carry on; the record is read between units of work.
    sa.sa_flags = SA_RESTART | (reset ? SA_RESETHAND : 0);
    if (::sigaction(sig, &sa, nullptr) != 0) {  // SIGKILL, SIGSTOP
      g_set[sig].store(0);
      continue;
    }
    handled.push_back(sig);
  }
  return handled;
}

int SignalCount(int sig) {
  return sig >= 1 && sig < kSlots ? g_count[sig].load() : 0;
}

int FirstSignal(std::span<const int> signals) {
  int first = 0, order = 0;
  for (const int sig : signals) {
    if (sig < 1 || sig >= kSlots) continue;
    const int o = g_first[sig].load();
    if (o != 0 && (order == 0 || o < order)) {
      first = sig;
      order = o;
    }
  }
  return first;
}

SignalWaiter::SignalWaiter(std::vector<int> signals) {
  for (const int sig : signals) {
    if (sig >= 1 && sig < kSlots) signals_.push_back(sig);
  }
  seen_.assign(signals_.size(), 0);
}

int SignalWaiter::Take() {
  // Of the signals with arrivals not yet returned, the one that came first.
  size_t pick = signals_.size();
  int order = 0;
  for (size_t i = 0; i < signals_.size(); ++i) {
    const int o = g_first[signals_[i]].load();
    if (SignalCount(signals_[i]) > seen_[i] && (pick == signals_.size() || o < order)) {
      pick = i;
      order = o;
    }
  }
  if (pick == signals_.size()) return 0;
  seen_[pick] = SignalCount(signals_[pick]);
  return signals_[pick];
}

int SignalWaiter::Wait(std::chrono::steady_clock::time_point deadline) {
  using std::chrono::milliseconds;
  for (;;) {
    if (const int sig = Take(); sig != 0) return sig;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return 0;
    // Rounded up, so that the deadline has passed when the slice ends.
    const auto left = std::chrono::ceil<milliseconds>(deadline - now);
    const int ms = static_cast<int>(std::min<milliseconds::rep>(50, left.count()));
    const int fd = g_wake_read.load();
    if (fd < 0) {
      std::this_thread::sleep_for(milliseconds(ms));
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, ms) > 0) {  // EINTR: look again
      char buf[64];
      while (::read(fd, buf, sizeof(buf)) > 0) {
      }
    }
  }
}

}  // namespace loom
