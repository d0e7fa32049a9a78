#include "src/agent/child_exit_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace hetpool::agent {

void BlockChildSignals() {
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  pthread_sigmask(SIG_BLOCK, &child, nullptr);
}

ChildExitWatch::ChildExitWatch(std::function<void()> wake) : wake_(std::move(wake)) {
  sigset_t blocked;
  if (pthread_sigmask(SIG_BLOCK, nullptr, &blocked) != 0 || sigismember(&blocked, SIGCHLD) != 1) return;
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  signals_ = signalfd(-1, &child, SFD_CLOEXEC | SFD_NONBLOCK);
  stop_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (signals_ < 0 || stop_ < 0) return;
  thread_ = std::thread([this] { Run(); });
}

ChildExitWatch::~ChildExitWatch() {
  if (thread_.joinable()) {
    const uint64_t one = 1;
    ssize_t written = write(stop_, &one, sizeof(one));
    (void)written;
    thread_.join();
  }
  if (signals_ >= 0) close(signals_);
  if (stop_ >= 0) close(stop_);
}

void ChildExitWatch::Run() {
  pollfd fds[2] = {{signals_, POLLIN, 0}, {stop_, POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    // Several exits may fold into one signal: one wake serves them all (the runner reaps every
    // child that ended).
    signalfd_siginfo info;
    bool any = false;
    while (read(signals_, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) any = true;
    if (any) wake_();
  }
}

}  // namespace hetpool::agent
