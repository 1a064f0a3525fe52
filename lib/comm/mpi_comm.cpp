#include "comm/mpi_comm.h"

#include <mpi.h>  // the MPI C API (Open MPI)

#include <climits>  // INT_MAX
#include <cstdlib>  // getenv, setenv, atexit

#include "comm/tags.h"           // kProgress: probed, never sent
#include "comm/wait_watchdog.h"  // WaitGuard: every blocking call is bounded by cluster.timeout_s
#include "core/error.h"

// Every MPI call is checked; the message names the call and MPI's own explanation.
#define DTRAIN_MPI(call)                                                               \
  do {                                                                                 \
    int rc_ = (call);                                                                  \
    if (rc_ != MPI_SUCCESS) ::dtrain::detail_mpi_fail(#call, rc_, __FILE__, __LINE__); \
  } while (0)

namespace dtrain {

[[noreturn]] void detail_mpi_fail(const char* call, int rc, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw Error(std::string(file) + ":" + std::to_string(line) + ": " + call +
              " failed: " + std::string(text, len));
}

namespace {

// MPI counts are ints: large transfers go in pieces of at most 1 GiB.
constexpr size_t kMaxPiece = size_t{1} << 30;

class MpiRequest final : public CommRequest {
 public:
  // `op` and `peer` (a rank of the job): what a wait for it is, for the watchdog's message.
  MpiRequest(std::vector<MPI_Request> requests, const char* op, int peer)
      : requests_(std::move(requests)), op_(op), peer_(peer) {}
  ~MpiRequest() override {
    if (requests_.empty()) return;
    WaitGuard guard(op_, peer_);
    MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE);
  }
  void wait() override {
    WaitGuard guard(op_, peer_);
    DTRAIN_MPI(
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
    requests_.clear();
  }
  bool test() override {
    int done = 0;
    DTRAIN_MPI(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                           MPI_STATUSES_IGNORE));
    if (done) requests_.clear();
    return done != 0;
  }

 private:
  std::vector<MPI_Request> requests_;
  const char* op_;
  int peer_;
};

class MpiComm final : public Comm {
 public:
  MpiComm(MPI_Comm comm, bool owned) : comm_(comm), owned_(owned) {
    DTRAIN_MPI(MPI_Comm_rank(comm_, &rank_));
    DTRAIN_MPI(MPI_Comm_size(comm_, &size_));
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    // Every constructor call is collective (world, split), so finding the node's ranks is too.
    MPI_Comm node;
    DTRAIN_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
    DTRAIN_MPI(MPI_Comm_rank(node, &local_rank_));
    DTRAIN_MPI(MPI_Comm_size(node, &local_size_));
    MPI_Comm_free(&node);
    // The job's rank of each of this communicator's (a split's differ): the watchdog names them.
    MPI_Group mine, world;
    DTRAIN_MPI(MPI_Comm_group(comm_, &mine));
    DTRAIN_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world));
    std::vector<int> ranks(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) ranks[static_cast<size_t>(r)] = r;
    world_of_.resize(ranks.size());
    DTRAIN_MPI(MPI_Group_translate_ranks(mine, size_, ranks.data(), world, world_of_.data()));
    MPI_Group_free(&mine);
    MPI_Group_free(&world);
  }
  ~MpiComm() override {
    if (owned_) MPI_Comm_free(&comm_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }
  int local_size() const override { return local_size_; }
  std::string name() const override {
    return "mpi (" + std::to_string(size_) + " rank" + (size_ == 1 ? "" : "s") + ")";
  }

  void send(const void* data, size_t bytes, int peer, int tag) override {
    WaitGuard guard("MPI_Send", world(peer));
    for_pieces(bytes, [&](size_t off, int n) {
      DTRAIN_MPI(MPI_Send(static_cast<const char*>(data) + off, n, MPI_BYTE, peer, tag, comm_));
    });
  }
  void recv(void* data, size_t bytes, int peer, int tag) override {
    WaitGuard guard("MPI_Recv", world(peer));
    for_pieces(bytes, [&](size_t off, int n) {
      DTRAIN_MPI(MPI_Recv(static_cast<char*>(data) + off, n, MPI_BYTE, peer, tag, comm_,
                          MPI_STATUS_IGNORE));
    });
  }
  void progress() override {
    int arrived = 0;  // a probe of a tag nobody sends: only its progress matters
    DTRAIN_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tags::kProgress, comm_, &arrived, MPI_STATUS_IGNORE));
  }
  std::optional<int> probe_any(int tag) override {
    int arrived = 0;
    MPI_Status status;
    DTRAIN_MPI(MPI_Iprobe(MPI_ANY_SOURCE, tag, comm_, &arrived, &status));
    if (!arrived) return std::nullopt;
    return status.MPI_SOURCE;
  }
  std::unique_ptr<CommRequest> isend(const void* data, size_t bytes, int peer, int tag) override {
    std::vector<MPI_Request> reqs;
    for_pieces(bytes, [&](size_t off, int n) {
      reqs.emplace_back();
      DTRAIN_MPI(MPI_Isend(static_cast<const char*>(data) + off, n, MPI_BYTE, peer, tag, comm_,
                           &reqs.back()));
    });
    return std::make_unique<MpiRequest>(std::move(reqs), "MPI_Isend", world(peer));
  }
  std::unique_ptr<CommRequest> irecv(void* data, size_t bytes, int peer, int tag) override {
    std::vector<MPI_Request> reqs;
    for_pieces(bytes, [&](size_t off, int n) {
      reqs.emplace_back();
      DTRAIN_MPI(
          MPI_Irecv(static_cast<char*>(data) + off, n, MPI_BYTE, peer, tag, comm_, &reqs.back()));
    });
    return std::make_unique<MpiRequest>(std::move(reqs), "MPI_Irecv", world(peer));
  }
  void sendrecv(const void* send_data, size_t send_bytes, int dst, void* recv_data,
                size_t recv_bytes, int src, int tag) override {
    if (send_bytes <= kMaxPiece && recv_bytes <= kMaxPiece) {
      WaitGuard guard("MPI_Sendrecv", world(src));
      DTRAIN_MPI(MPI_Sendrecv(send_data, static_cast<int>(send_bytes), MPI_BYTE, dst, tag,
                              recv_data, static_cast<int>(recv_bytes), MPI_BYTE, src, tag, comm_,
                              MPI_STATUS_IGNORE));
      return;
    }
    auto r = irecv(recv_data, recv_bytes, src, tag);
    send(send_data, send_bytes, dst, tag);
    r->wait();
  }

  void allreduce_sum(std::vector<double>& values) override {
    WaitGuard guard("MPI_Allreduce", other());
    DTRAIN_MPI(MPI_Allreduce(MPI_IN_PLACE, values.data(), static_cast<int>(values.size()),
                             MPI_DOUBLE, MPI_SUM, comm_));
  }
  std::unique_ptr<CommRequest> iallreduce_max(double* value) override {
    std::vector<MPI_Request> reqs(1);
    DTRAIN_MPI(MPI_Iallreduce(MPI_IN_PLACE, value, 1, MPI_DOUBLE, MPI_MAX, comm_, reqs.data()));
    return std::make_unique<MpiRequest>(std::move(reqs), "MPI_Iallreduce", other());
  }
  void allreduce_sum(const Tensor& buffer) override {
    DTRAIN_CHECK(buffer.dtype() == DType::f32) << "allreduce_sum of a non-f32 tensor";
    float* p = buffer.data<float>();
    WaitGuard guard("MPI_Allreduce", other());
    for (int64_t off = 0, n = buffer.numel(); off < n; off += INT_MAX / 4) {
      const int count = static_cast<int>(std::min<int64_t>(n - off, INT_MAX / 4));
      DTRAIN_MPI(MPI_Allreduce(MPI_IN_PLACE, p + off, count, MPI_FLOAT, MPI_SUM, comm_));
    }
  }
  void broadcast(std::string& bytes, int root) override {
    uint64_t n = bytes.size();
    WaitGuard guard("MPI_Bcast", other());
    DTRAIN_MPI(MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm_));
    bytes.resize(n);
    for_pieces(n, [&](size_t off, int len) {
      DTRAIN_MPI(MPI_Bcast(bytes.data() + off, len, MPI_BYTE, root, comm_));
    });
  }
  void broadcast(const Tensor& buffer, int root) override {
    WaitGuard guard("MPI_Bcast", other());
    for_pieces(buffer.bytes(), [&](size_t off, int len) {
      DTRAIN_MPI(MPI_Bcast(static_cast<char*>(buffer.raw()) + off, len, MPI_BYTE, root, comm_));
    });
  }
  std::vector<std::vector<double>> gather(const std::vector<double>& row, int root) override {
    const int n = static_cast<int>(row.size());
    std::vector<double> all(rank_ == root ? static_cast<size_t>(n) * size_ : 0);
    WaitGuard guard("MPI_Gather", other());
    DTRAIN_MPI(MPI_Gather(row.data(), n, MPI_DOUBLE, all.data(), n, MPI_DOUBLE, root, comm_));
    std::vector<std::vector<double>> rows;
    if (rank_ == root)
      for (int r = 0; r < size_; ++r)
        rows.emplace_back(all.begin() + r * n, all.begin() + (r + 1) * n);
    return rows;
  }
  void barrier() override {
    WaitGuard guard("MPI_Barrier", other());
    DTRAIN_MPI(MPI_Barrier(comm_));
  }
  std::unique_ptr<Comm> split(int color, int key) override {
    WaitGuard guard("MPI_Comm_split", other());
    MPI_Comm sub;
    DTRAIN_MPI(MPI_Comm_split(comm_, color, key, &sub));
    return std::make_unique<MpiComm>(sub, true);
  }
  [[noreturn]] void abort(int exit_code) override {
    MPI_Abort(MPI_COMM_WORLD, exit_code);
    std::exit(exit_code);
  }

 private:
  int world(int peer) const {
    return peer >= 0 && peer < size_ ? world_of_[static_cast<size_t>(peer)] : -1;
  }
  // Whom a collective waits for: of two ranks, the other one; of more, it cannot say.
  int other() const { return size_ == 2 ? world(1 - rank_) : -1; }

  template <typename F>
  static void for_pieces(size_t bytes, F&& f) {
    size_t off = 0;
    do {
      const size_t n = std::min(bytes - off, kMaxPiece);
      f(off, static_cast<int>(n));
      off += n;
    } while (off < bytes);
  }

  MPI_Comm comm_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  int local_rank_ = 0, local_size_ = 1;
  std::vector<int> world_of_;
};

}  // namespace

bool launched_under_mpi() {
  // Open MPI, MPICH/Hydra and PMIx launchers each leave their mark in the environment.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(v)) return true;
  return false;
}

void init_mpi(int* argc, char*** argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) return;
  // dtrain's comm threads share the cores with the compute threads, and their blocking calls
  // overlap computation (Pipe-SGD, HPSGD): Open MPI's default busy polling would take a core
  // from the computation for as long as a peer is late. Yielding while idle gives it back
  // (measured: HPSGD 1.3x faster on 2 ranks of 2 cores; sync unchanged). A user's or mpirun's
  // own setting wins.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", /*overwrite=*/0);
  int provided = 0;
  DTRAIN_MPI(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  DTRAIN_CHECK(provided == MPI_THREAD_MULTIPLE)
      << "the MPI library does not provide MPI_THREAD_MULTIPLE (got level " << provided << ")";
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  });
}

std::unique_ptr<Comm> make_mpi_comm() {
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
}

}  // namespace dtrain
