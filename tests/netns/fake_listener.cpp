// Another program on a port, for cc-doctor's "what answers there" checks.
//   fake_listener MODE   (MODE: http = answers every connection with an HTTP
//   error; silent = accepts and says nothing). Listens on 127.0.0.1, prints
//   "listening PORT", serves until killed (at most 60 s).
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "http";
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("fake_listener");
    return 1;
  }
  std::printf("listening %d\n", ntohs(a.sin_port));
  std::fflush(stdout);
  std::vector<int> held;
  for (int rounds = 0; rounds < 600; ++rounds) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) continue;
    if (mode == "http") {
      const char reply[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
      (void)!write(c, reply, sizeof reply - 1);
      close(c);
    } else {
      held.push_back(c);
    }
  }
  return 0;
}
