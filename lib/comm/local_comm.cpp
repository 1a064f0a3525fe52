#include <cstdlib>  // std::exit

#include "comm/comm.h"

namespace dtrain {
namespace {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string name() const override { return "local (1 process)"; }
  void allreduce_sum(std::vector<double>&) override {}
  void allreduce_sum(const Tensor&) override {}
  void broadcast(std::string&, int) override {}
  void broadcast(const Tensor&, int) override {}
  std::vector<std::vector<double>> gather(const std::vector<double>& row, int) override {
    return {row};
  }
  void barrier() override {}
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

}  // namespace

std::unique_ptr<Comm> make_local_comm() {
  return std::make_unique<LocalComm>();
}

}  // namespace dtrain
