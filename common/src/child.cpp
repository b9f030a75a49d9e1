// Fork-and-collect: the child writes a tagged result to a pipe, the parent reads it and waits.
// The child's stderr goes to an anonymous file, never to the user: SimGrid prints critical logs and
// Boost backtraces ("->  16# main at apps/main.cpp:63") there when it fails. The parent keeps only
// the cause line of a crashed child for its one-line message.
#include "common/child.hpp"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/errors.hpp"
#include "common/text.hpp"

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

std::string read_file(std::FILE* f) {
  std::string text;
  if (f == nullptr) return text;
  std::rewind(f);
  char buf[4096];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  return text;
}

}  // namespace

std::string run_in_child(const std::function<std::string()>& work) {
  int fds[2];
  if (::pipe(fds) != 0) throw Failure(fmt::format("pipe failed: {}", std::strerror(errno)));
  std::FILE* child_err = std::tmpfile();  // anonymous: gone when closed
  std::fflush(nullptr);                   // do not duplicate buffered output into the child
  const pid_t pid = ::fork();
  if (pid < 0) {
    if (child_err != nullptr) std::fclose(child_err);
    throw Failure(fmt::format("fork failed: {}", std::strerror(errno)));
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (child_err != nullptr) ::dup2(::fileno(child_err), STDERR_FILENO);
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
  const std::string err_text = read_file(child_err);
  if (child_err != nullptr) std::fclose(child_err);
  if (WIFSIGNALED(status)) {
    const std::string cause = cause_line(err_text);
    throw Failure(fmt::format("simulation child process died with signal {} ({}){}", WTERMSIG(status),
                              strsignal(WTERMSIG(status)),
                              cause.empty() ? "" : ": " + printable(cause, 300)));
  }
  if (data.empty()) throw Failure("simulation child process exited without a result");
  const char tag = data[0];
  std::string body = data.substr(1);
  if (tag == 'I') throw InputError(body);
  if (tag == 'F') throw Failure(body);
  return body;
}

}  // namespace dtsim
