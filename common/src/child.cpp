// Fork-and-collect: each child writes a tagged result ('O' ok, 'I' input error, 'F' failure) to a
// pipe; the parent reads it (blocking for one child, polling for a pool), waits, and decodes it.
#include "common/child.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/errors.hpp"

namespace dtsim {
namespace {

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

// A started child: its pid and the read end of its result pipe.
struct Child {
  pid_t pid = -1;
  int fd = -1;
};

// Forks a child that runs `work` and writes its tagged result; never returns in the child.
Child spawn(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Failure(fmt::format("pipe failed: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // do not duplicate buffered output into the child
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Failure(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed parent takes its children with it
    if (::getppid() != parent) ::_exit(3);
    std::signal(SIGINT, SIG_DFL);  // the parent may catch these to stop cleanly; the child just ends
    std::signal(SIGTERM, SIG_DFL);
    ::close(fds[0]);
    std::string tagged;
    int code = 0;
    try {
      tagged = "O" + work();
    } catch (const InputError& e) {
      tagged = std::string("I") + e.what();
      code = 2;
    } catch (const std::exception& e) {
      tagged = std::string("F") + e.what();
      code = 1;
    }
    write_all(fds[1], tagged);
    ::close(fds[1]);
    std::fflush(nullptr);
    ::_exit(code);
  }
  ::close(fds[1]);
  return {pid, fds[0]};
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

enum class Outcome { OK, INPUT_ERROR, FAILURE };

// Decodes what a finished child wrote; `who` names the child in crash messages.
std::pair<Outcome, std::string> decode(int status, const std::string& data, const char* who) {
  if (WIFSIGNALED(status))
    return {Outcome::FAILURE,
            fmt::format("{} died with signal {} ({})", who, WTERMSIG(status), strsignal(WTERMSIG(status)))};
  if (data.empty()) return {Outcome::FAILURE, fmt::format("{} exited without a result", who)};
  const char tag = data[0];
  return {tag == 'O' ? Outcome::OK : tag == 'I' ? Outcome::INPUT_ERROR : Outcome::FAILURE, data.substr(1)};
}

}  // namespace

std::string run_in_child(const std::function<std::string()>& work) {
  const Child child = spawn(work);
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(child.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(child.fd);
  auto [outcome, text] = decode(wait_for(child.pid), data, "simulation child process");
  if (outcome == Outcome::INPUT_ERROR) throw InputError(text);
  if (outcome == Outcome::FAILURE) throw Failure(text);
  return text;
}

std::size_t run_process_pool(std::size_t n, int jobs, const std::function<std::string(std::size_t)>& work,
                             const std::function<void(std::size_t, bool, const std::string&)>& done,
                             const std::function<bool()>& stop) {
  if (jobs < 1) throw InputError(fmt::format("--jobs must be >= 1, got {}", jobs));
  struct Running {
    Child child;
    std::size_t task;
    std::string data;
  };
  std::vector<Running> running;
  std::size_t next = 0, finished = 0;
  while (next < n || !running.empty()) {
    if (stop()) {
      for (auto& r : running) ::kill(r.child.pid, SIGTERM);
      for (auto& r : running) {
        ::close(r.child.fd);
        (void)wait_for(r.child.pid);
      }
      running.clear();
      break;
    }
    while (next < n && running.size() < static_cast<std::size_t>(jobs)) {
      const std::size_t task = next;
      running.push_back({spawn([&work, task] { return work(task); }), task, {}});
      ++next;
    }
    std::vector<pollfd> pfds;
    for (const auto& r : running) pfds.push_back({r.child.fd, POLLIN, 0});
    const int rc = ::poll(pfds.data(), pfds.size(), 250);
    if (rc < 0) {
      if (errno == EINTR) continue;
      throw Failure(fmt::format("poll failed: {}", std::strerror(errno)));
    }
    for (std::size_t i = pfds.size(); i-- > 0;) {
      if (pfds[i].revents == 0) continue;
      Running& r = running[i];
      char buf[65536];
      const ssize_t got = ::read(r.child.fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got > 0) {
        r.data.append(buf, static_cast<std::size_t>(got));
        continue;
      }
      ::close(r.child.fd);
      const int status = wait_for(r.child.pid);
      const std::size_t task = r.task;
      const std::string data = std::move(r.data);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      if (stop()) continue;  // killed by the interruption: not a finished task
      ++finished;
      const auto [outcome, text] = decode(status, data, "worker process");
      if (outcome == Outcome::OK)
        done(task, true, text);
      else
        done(task, false, WIFSIGNALED(status) || data.empty()
                              ? text
                              : (outcome == Outcome::INPUT_ERROR ? "input error: " : "failed: ") + text);
    }
  }
  return finished;
}

}  // namespace dtsim
