// Fork-and-collect: each child writes a tagged result ('O' ok, 'I' input error, 'F' failure) to a
// pipe; the parent reads it (blocking for one child, polling for a pool), waits, and decodes it.
// The child's stderr goes to an anonymous file, never to the user: SimGrid prints critical logs and
// Boost backtraces ("->  16# main at apps/main.cpp:63") there when it fails. The parent keeps only
// the cause line of a crashed child for its one-line message.
#include "common/child.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/errors.hpp"
#include "common/text.hpp"

namespace dtsim {

void write_all(int fd, const std::string& data) {
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<std::size_t>(n);
  }
}

namespace {

// The last line of `text` that says something: SimGrid's critical message, not a backtrace frame.
std::string cause_line(const std::string& text) {
  std::string best;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    std::string line = text.substr(start, end - start);
    start = end + 1;
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos) continue;
    line.erase(0, first);
    const bool frame =
        line.rfind("->", 0) == 0 || line.rfind("Backtrace", 0) == 0 ||
        (std::isdigit(static_cast<unsigned char>(line[0])) && line.find("# ") != std::string::npos);
    if (!frame) best = line;
  }
  return best;
}

// Reads and closes a child's captured stderr.
std::string take_file(std::FILE* f) {
  std::string text;
  if (f == nullptr) return text;
  std::rewind(f);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  std::fclose(f);
  return text;
}

// A started child: its pid, the read end of its result pipe, and its captured stderr.
struct Child {
  pid_t pid = -1;
  int fd = -1;
  std::FILE* err = nullptr;
};

// Forks a child that runs `work` and writes its tagged result; never returns in the child.
Child spawn(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Failure(fmt::format("pipe failed: {}", std::strerror(errno)));
  const pid_t parent = ::getpid();
  std::FILE* err = std::tmpfile();  // anonymous: gone when closed
  std::fflush(nullptr);             // do not duplicate buffered output into the child
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    if (err != nullptr) std::fclose(err);
    throw Failure(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed parent takes its children with it
    if (::getppid() != parent) ::_exit(3);
    std::signal(SIGINT, SIG_DFL);  // the parent may catch these to stop cleanly; the child just ends
    std::signal(SIGTERM, SIG_DFL);
    ::close(fds[0]);
    if (err != nullptr) ::dup2(::fileno(err), STDERR_FILENO);
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
  return {pid, fds[0], err};
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

enum class Outcome { OK, INPUT_ERROR, FAILURE };

// Decodes what a finished child wrote (and closes its stderr); `who` names the child in crash messages.
std::pair<Outcome, std::string> decode(int status, const std::string& data, std::FILE* err, const char* who) {
  const std::string err_text = take_file(err);
  if (WIFSIGNALED(status)) {
    const std::string cause = cause_line(err_text);
    return {Outcome::FAILURE, fmt::format("{} died with signal {} ({}){}", who, WTERMSIG(status),
                                          strsignal(WTERMSIG(status)), cause.empty() ? "" : ": " + printable(cause, 300))};
  }
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
  auto [outcome, text] = decode(wait_for(child.pid), data, child.err, "simulation child process");
  if (outcome == Outcome::INPUT_ERROR) throw InputError(text);
  if (outcome == Outcome::FAILURE) throw Failure(text);
  return text;
}

std::size_t run_process_pool(std::size_t n, int jobs, const std::function<std::string(std::size_t)>& work,
                             const std::function<void(std::size_t, bool, const std::string&)>& done,
                             const std::function<bool()>& stop, const std::function<bool(std::size_t)>& skip) {
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
        (void)take_file(r.child.err);
      }
      running.clear();
      break;
    }
    while (next < n && running.size() < static_cast<std::size_t>(jobs)) {
      const std::size_t task = next++;
      if (skip && skip(task)) continue;
      running.push_back({spawn([&work, task] { return work(task); }), task, {}});
    }
    if (running.empty()) continue;  // the rest were skipped
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
      std::FILE* err = r.child.err;
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
      if (stop()) {  // killed by the interruption: not a finished task
        (void)take_file(err);
        continue;
      }
      ++finished;
      const auto [outcome, text] = decode(status, data, err, "worker process");
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
