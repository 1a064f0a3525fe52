#include <cstdlib>  // std::exit

#include "comm/comm.h"
#include "core/error.h"

namespace dtrain {
namespace {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local (1 process)"; }
  void send(const void*, size_t, int peer, int) override { no_peer(peer); }
  void recv(void*, size_t, int peer, int) override { no_peer(peer); }
  std::unique_ptr<CommRequest> isend(const void*, size_t, int peer, int) override { no_peer(peer); }
  std::unique_ptr<CommRequest> irecv(void*, size_t, int peer, int) override { no_peer(peer); }
  void sendrecv(const void*, size_t, int dst, void*, size_t, int, int) override { no_peer(dst); }
  void allreduce_sum(std::vector<double>&) override {}
  void allreduce_sum(const Tensor&) override {}
  void broadcast(std::string&, int) override {}
  void broadcast(const Tensor&, int) override {}
  std::vector<std::vector<double>> gather(const std::vector<double>& row, int) override {
    return {row};
  }
  void barrier() override {}
  std::unique_ptr<Comm> split(int, int) override { return make_local_comm(); }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }

 private:
  [[noreturn]] static void no_peer(int peer) {
    throw Error("point-to-point with rank " + std::to_string(peer) + " in a one-process run");
  }
};

}  // namespace

// Comms without a server role (one process, NCCL) have nothing to probe for.
std::optional<int> Comm::probe_any(int tag) {
  throw Error("probe for messages with tag " + std::to_string(tag) + " on " + name() +
              ": not supported");
}

namespace {
class DoneRequest final : public CommRequest {
 public:
  void wait() override {}
  bool test() override { return true; }
};
}  // namespace

std::unique_ptr<CommRequest> Comm::iallreduce_max(double*) {
  if (size() != 1) throw Error("iallreduce_max on " + name() + ": not supported");
  return std::make_unique<DoneRequest>();
}

std::unique_ptr<Comm> make_local_comm() {
  return std::make_unique<LocalComm>();
}

}  // namespace dtrain
