// farm's TVM RPC server for Linux boards, built for AArch64 (see farm/virtual/qemu/build.py).
//
// The command line is apps/cpp_rpc's (apache/tvm apps/cpp_rpc/main.cc):
//   tvm_rpc server --tracker=HOST:PORT --key=KEY [--host=ADDR] [--port=9090]
//                  [--port-end=9199] [--custom-addr=ADDR]
// and the serving loop is tvm.rpc.server._listen_loop's (apache/tvm
// python/tvm/rpc/server.py): report to the tracker (UPDATE_INFO, then PUT with a
// match key), accept the client presenting "client:<match key>", answer
// RPC_CODE_SUCCESS and "server:<key>", fork a session that runs TVM's own
// tvm::runtime::RPCServerLoop on the socket (libtvm_runtime.so), kill it past the
// client's -timeout=, repeat. While idle it asks GET_PENDING_MATCHKEYS every 2 s
// and takes a new match key when a client took the old one but never came.
//
// Why not apps/cpp_rpc itself: it includes TVM's source tree (src/support,
// src/runtime), which the apache-tvm wheel does not ship; this file needs only
// the wheel's public headers and libtvm_runtime.so / libtvm_ffi.so.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>

namespace tvm {
namespace runtime {
void RPCServerLoop(int sockfd);  // src/runtime/rpc/rpc_socket_impl.cc (exported)
}  // namespace runtime
}  // namespace tvm

namespace {

constexpr int32_t kRpcMagic = 0xff271;
constexpr int32_t kTrackerMagic = 0x2f271;
constexpr int32_t kCodeMismatch = kRpcMagic + 2;
constexpr int kPut = 3, kUpdateInfo = 5, kGetPendingMatchkeys = 7;
constexpr int kPingPeriodS = 2, kUnmatchTimeoutS = 4, kRetryPeriodS = 2;

struct Options {
  std::string tracker_host, key, host = "0.0.0.0", custom_addr;
  int tracker_port = 0, port = 9090, port_end = 9199;
};

void Log(const std::string& text) {
  std::fprintf(stderr, "tvm_rpc: %s\n", text.c_str());
  std::fflush(stderr);
}

bool SendAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool RecvAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = recv(fd, p, size, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool SendInt(int fd, int32_t value) { return SendAll(fd, &value, 4); }  // AArch64 is little-endian

bool SendString(int fd, const std::string& text) {
  return SendInt(fd, static_cast<int32_t>(text.size())) && SendAll(fd, text.data(), text.size());
}

bool RecvString(int fd, std::string* text, int32_t limit) {
  int32_t size = 0;
  if (!RecvAll(fd, &size, 4) || size < 0 || size > limit) return false;
  text->assign(static_cast<size_t>(size), '\0');
  return RecvAll(fd, text->data(), text->size());
}

std::string Quote(const std::string& text) {  // a JSON string; keys and addresses are plain ASCII
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// One tracker request; true when the reply is the integer 0 (TrackerCode.SUCCESS).
bool TrackerCall(int fd, const std::string& json, std::string* reply) {
  return SendString(fd, json) && RecvString(fd, reply, 1 << 20);
}

bool TrackerOk(int fd, const std::string& json) {
  std::string reply;
  return TrackerCall(fd, json, &reply) && reply == "0";
}

int ConnectTracker(const Options& opts) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(opts.tracker_port));
  int32_t magic = 0;
  if (fd < 0 || inet_pton(AF_INET, opts.tracker_host.c_str(), &addr.sin_addr) != 1 ||
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      !SendInt(fd, kTrackerMagic) || !RecvAll(fd, &magic, 4) || magic != kTrackerMagic) {
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

std::string NewMatchKey(const std::string& key) {
  static std::mt19937_64 rng(std::random_device{}());
  return key + ":" + std::to_string(std::uniform_real_distribution<double>(0, 1)(rng));
}

std::string PutMessage(const Options& opts, int port, const std::string& matchkey) {
  std::string addr = opts.custom_addr.empty() ? "null" : Quote(opts.custom_addr);
  return "[" + std::to_string(kPut) + ", " + Quote(opts.key) + ", [" + std::to_string(port) +
         ", " + Quote(matchkey) + "], " + addr + "]";
}

int Listen(const Options& opts, int* port) {
  for (int p = opts.port; p < opts.port_end; ++p) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(p));
    inet_pton(AF_INET, opts.host.c_str(), &addr.sin_addr);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 && listen(fd, 8) == 0) {
      *port = p;
      return fd;
    }
    close(fd);
  }
  return -1;
}

// Accepts the client that presents the match key; -1 when the tracker connection fails.
int AcceptClient(int listen_fd, int tracker, const Options& opts, int port, int* timeout_s) {
  std::string matchkey = NewMatchKey(opts.key);
  if (!TrackerOk(tracker, PutMessage(opts, port, matchkey))) return -1;
  int unmatched_periods = 0;
  while (true) {
    fd_set readable;
    FD_ZERO(&readable);
    FD_SET(listen_fd, &readable);
    timeval wait{kPingPeriodS, 0};
    int ready = select(listen_fd + 1, &readable, nullptr, nullptr, &wait);
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      std::string pending;
      if (!TrackerCall(tracker, "[" + std::to_string(kGetPendingMatchkeys) + "]", &pending)) {
        return -1;
      }
      unmatched_periods = pending.find(Quote(matchkey)) == std::string::npos
                              ? unmatched_periods + 1 : 0;
      if (unmatched_periods * kPingPeriodS > kUnmatchTimeoutS + kPingPeriodS) {
        matchkey = NewMatchKey(opts.key);
        if (!TrackerOk(tracker, PutMessage(opts, port, matchkey))) return -1;
        unmatched_periods = 0;
      }
      continue;
    }
    int conn = accept(listen_fd, nullptr, nullptr);
    if (conn < 0) continue;
    int32_t magic = 0;
    std::string client_key;
    if (!RecvAll(conn, &magic, 4) || magic != kRpcMagic || !RecvString(conn, &client_key, 4096)) {
      close(conn);
      continue;
    }
    std::string head = client_key.substr(0, client_key.find(' '));
    if (head != "client:" + matchkey) {
      SendInt(conn, kCodeMismatch);
      close(conn);
      continue;
    }
    size_t at = client_key.find(" -timeout=");
    *timeout_s = at == std::string::npos ? 0 : std::atoi(client_key.c_str() + at + 10);
    if (!SendInt(conn, kRpcMagic) || !SendString(conn, "server:" + opts.key)) {
      close(conn);
      continue;
    }
    return conn;
  }
}

std::string g_session_dir;  // NOLINT: the forked session's work folder

// As tvm.contrib.random.random_fill_for_measure (apache/tvm src/runtime/contrib/random):
// MetaSchedule's RPC runner fills each candidate's arguments with it before timing them.
// The wheel's libtvm_runtime.so is built without USE_RANDOM, so the server brings its own:
// a CPU tensor of floats gets uniform values in [1, 10), of integers in [1, 10].
void RandomFillForMeasure(DLTensor* out) {
  static std::mt19937 rng(std::random_device{}());
  int64_t size = 1;
  for (int i = 0; i < out->ndim; ++i) size *= out->shape[i];
  char* data = static_cast<char*>(out->data) + out->byte_offset;
  const DLDataType dtype = out->dtype;
  const int64_t count = size * dtype.lanes;
  std::uniform_real_distribution<double> real(1.0, 10.0);
  std::uniform_int_distribution<int> whole(1, 10);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype.code == kDLFloat && dtype.bits == 32) {
      reinterpret_cast<float*>(data)[i] = static_cast<float>(real(rng));
    } else if (dtype.code == kDLFloat && dtype.bits == 64) {
      reinterpret_cast<double*>(data)[i] = real(rng);
    } else if (dtype.bits == 8) {
      reinterpret_cast<int8_t*>(data)[i] = static_cast<int8_t>(whole(rng));
    } else if (dtype.bits == 16 && dtype.code != kDLFloat) {
      reinterpret_cast<int16_t*>(data)[i] = static_cast<int16_t>(whole(rng));
    } else if (dtype.bits == 32) {
      reinterpret_cast<int32_t*>(data)[i] = whole(rng);
    } else if (dtype.bits == 64) {
      reinterpret_cast<int64_t*>(data)[i] = whole(rng);
    } else {
      std::memset(data, 0, static_cast<size_t>(count * ((dtype.bits + 7) / 8)));
      return;  // float16 and others: zeros, a valid input for timing
    }
  }
}

void Serve(int conn, int timeout_s, int serial) {
  char cwd[4096];
  std::string root = getcwd(cwd, sizeof(cwd)) ? cwd : ".";
  g_session_dir = root + "/rpc-session-" + std::to_string(getpid()) + "-" + std::to_string(serial);
  pid_t child = fork();
  if (child == 0) {
    mkdir(g_session_dir.c_str(), 0700);
    if (chdir(g_session_dir.c_str()) != 0) _exit(1);
    // As apps/cpp_rpc/rpc_env.cc: a name with a '/' is a path, any other a file in the session folder.
    tvm::ffi::Function::SetGlobal(
        "tvm.rpc.server.workpath", tvm::ffi::Function::FromTyped([](std::string name) {
          return name.find('/') != std::string::npos ? name : g_session_dir + "/" + name;
        }));
    tvm::ffi::Function::SetGlobal(
        "tvm.rpc.server.load_module", tvm::ffi::Function::FromTyped([](std::string name) {
          std::string path = name.find('/') != std::string::npos ? name : g_session_dir + "/" + name;
          return tvm::ffi::Module::LoadFromFile(path);
        }));
    tvm::ffi::Function::SetGlobal("tvm.contrib.random.random_fill_for_measure",
                                  tvm::ffi::Function::FromTyped(RandomFillForMeasure));
    tvm::runtime::RPCServerLoop(conn);
    _exit(0);
  }
  close(conn);
  if (child < 0) {
    Log("fork failed");
    return;
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  int status = 0;
  while (waitpid(child, &status, timeout_s > 0 ? WNOHANG : 0) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      Log("session timeout after " + std::to_string(timeout_s) + " s");
      kill(child, SIGKILL);
      waitpid(child, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::string rm = "rm -rf '" + g_session_dir + "'";
  if (std::system(rm.c_str()) != 0) Log("could not remove " + g_session_dir);
}

bool ParseArgs(int argc, char** argv, Options* opts) {
  if (argc < 2 || std::string(argv[1]) != "server") return false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq), value = eq == std::string::npos ? "" : arg.substr(eq + 1);
    if (name == "--tracker") {
      size_t colon = value.rfind(':');
      if (colon == std::string::npos) return false;
      opts->tracker_host = value.substr(0, colon);
      opts->tracker_port = std::atoi(value.c_str() + colon + 1);
    } else if (name == "--key") {
      opts->key = value;
    } else if (name == "--host") {
      opts->host = value;
    } else if (name == "--port") {
      opts->port = std::atoi(value.c_str());
    } else if (name == "--port-end") {
      opts->port_end = std::atoi(value.c_str());
    } else if (name == "--custom-addr") {
      opts->custom_addr = value;
    } else {
      return false;
    }
  }
  return !opts->tracker_host.empty() && !opts->key.empty() && opts->tracker_port > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options opts;
  if (!ParseArgs(argc, argv, &opts)) {
    std::fprintf(stderr, "usage: tvm_rpc server --tracker=HOST:PORT --key=KEY [--host=ADDR] "
                         "[--port=N] [--port-end=N] [--custom-addr=ADDR]\n");
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  int port = 0;
  int listen_fd = Listen(opts, &port);
  if (listen_fd < 0) {
    Log("no free port in " + std::to_string(opts.port) + ".." + std::to_string(opts.port_end));
    return 1;
  }
  Log("listening on " + opts.host + ":" + std::to_string(port));
  for (int serial = 0;;) {
    int tracker = ConnectTracker(opts);
    std::string info = "[" + std::to_string(kUpdateInfo) + ", {\"key\": " +
                       Quote("server:" + opts.key) + ", \"addr\": [" +
                       (opts.custom_addr.empty() ? "null" : Quote(opts.custom_addr)) + ", " +
                       std::to_string(port) + "]}]";
    if (tracker < 0 || !TrackerOk(tracker, info)) {
      if (tracker >= 0) close(tracker);
      Log("tracker " + opts.tracker_host + ":" + std::to_string(opts.tracker_port) +
          " unreachable; retrying");
      std::this_thread::sleep_for(std::chrono::seconds(kRetryPeriodS));
      continue;
    }
    int timeout_s = 0;
    int conn = AcceptClient(listen_fd, tracker, opts, port, &timeout_s);
    if (conn < 0) {
      close(tracker);
      continue;
    }
    Log("session " + std::to_string(serial) + " started");
    Serve(conn, timeout_s, serial++);
    close(tracker);  // a new tracker connection and match key for the next session
  }
}
