// Fork-and-collect: the child writes a tagged result to a pipe, the parent reads it and waits.
#include "common/child.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

}  // namespace

std::string run_in_child(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) throw Failure(fmt::format("pipe failed: {}", std::strerror(errno)));
  std::fflush(nullptr);  // do not duplicate buffered output into the child
  const pid_t pid = ::fork();
  if (pid < 0) throw Failure(fmt::format("fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
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
  std::string data;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    throw Failure(fmt::format("simulation child process died with signal {} ({})", WTERMSIG(status),
                              strsignal(WTERMSIG(status))));
  if (data.empty()) throw Failure("simulation child process exited without a result");
  const char tag = data[0];
  std::string body = data.substr(1);
  if (tag == 'I') throw InputError(body);
  if (tag == 'F') throw Failure(body);
  return body;
}

}  // namespace dtsim
