// The detector under mpirun: rank 0's coordinator for evidence only.
#include "cli/train_watch.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "comm/buffer.h"
#include "coordinator/supervisor/anomaly_watch.h"
#include "core/threads.h"

namespace loom {
namespace {

constexpr int kAddressBytes = 256;

std::string Host() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return host;
}

}  // namespace

Result<std::unique_ptr<TrainWatch>> TrainWatch::Start(const JobConfig& job, const Layout& layout,
                                                      Backend* backend) {
  std::unique_ptr<TrainWatch> w(new TrainWatch());
  w->backend_ = backend;
  w->config_ = job.detect;
  const int rank = backend->world_rank();
  uint8_t raw_address[kAddressBytes] = {};
  char* address = reinterpret_cast<char*>(raw_address);
  std::string token;
  if (rank == 0) {
    JobSpec spec;
    spec.token = NewJobToken();
    spec.layout = layout;
    spec.steps = job.steps;
    spec.heartbeat_ms = static_cast<int>(job.detect.beat_ms);
    spec.detect = true;
    w->state_ = std::make_unique<JobState>(spec);
    ServiceOptions so;
    so.address = backend->local_size() == backend->world_size() ? "127.0.0.1" : "0.0.0.0";
    LOOM_ASSIGN_OR_RETURN(w->service_, CoordinatorService::Start(w->state_.get(), so));
    const std::string host = so.address == "127.0.0.1" ? so.address : Host();
    std::snprintf(address, kAddressBytes, "%s:%d %s", host.c_str(), w->service_->port(),
                  spec.token.c_str());
  }
  LOOM_ASSIGN_OR_RETURN(w->world_, backend->World());
  LOOM_RETURN_IF_ERROR(w->world_->Broadcast(CommBuffer::Host(raw_address, kAddressBytes), 0)
                           .WithContext("sending the detector's address"));
  address[kAddressBytes - 1] = '\0';
  const std::string a(address);
  const size_t space = a.find(' ');
  if (space == std::string::npos)
    return Internal("the detector's address from rank 0: '" + a + "'");
  proto::RegisterRequest req;
  req.set_rank(rank);
  req.set_world_size(backend->world_size());
  req.set_host(Host());
  req.set_pid(static_cast<int>(::getpid()));
  req.set_device("cpu");
  LOOM_ASSIGN_OR_RETURN(
      w->client_, CoordinatorClient::Register(a.substr(0, space), a.substr(space + 1), req, 30000));
  w->client_->AttachTrace(&backend->trace());
  w->client_->OnStop([backend](const std::string& why) { backend->Cancel(why); });
  w->reporter_ = std::make_unique<CoordinatorReporter>(w->client_.get(), rank, backend);
  if (rank == 0) {
    TrainWatch* raw = w.get();
    w->thread_ = std::thread([raw] { raw->Watch(); });
  }
  return w;
}

void TrainWatch::Watch() {
  SetThreadName("loom-watch");
  std::optional<AnomalyWatch> watch;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, std::chrono::milliseconds(250), [&] { return stop_; })) {
    lock.unlock();
    const double now = service_->Now();
    if (!watch) {  // once every rank registered: their hosts are the nodes
      const std::vector<RankStatus> ranks = state_->Ranks();
      if (std::all_of(ranks.begin(), ranks.end(),
                      [](const RankStatus& r) { return r.registered; })) {
        std::vector<std::string> hosts;
        std::vector<int> node;
        for (const RankStatus& r : ranks) {
          auto it = std::find(hosts.begin(), hosts.end(), r.host);
          node.push_back(static_cast<int>(it - hosts.begin()));
          if (it == hosts.end()) hosts.push_back(r.host);
        }
        detect::DetectorConfig c = DetectorConfigFor(state_->spec().layout, node, hosts);
        c.slow_rank_score = config_.slow_rank_score;
        c.slow_link_factor = config_.slow_link_factor;
        c.persist = static_cast<int>(config_.persist);
        c.hang_min_s = config_.hang_s;
        c.stale_s = config_.stale_s;
        watch.emplace(std::move(c));
      }
    }
    if (watch) {
      for (const detect::Verdict& v : watch->Observe(*state_, now)) {
        const std::string line = std::string(detect::AnomalyKindName(v.kind)) + ": " + v.line;
        std::printf("loom train: %s (step %lld)\n", line.c_str(), static_cast<long long>(v.step));
        std::fflush(stdout);
        if (v.kind == detect::AnomalyKind::kHang) {
          const std::string who =
              v.rank >= 0 ? "rank " + std::to_string(v.rank) + " hung" : "a call hung";
          state_->RequestStop("stopped because " + who + " (named by the detector on rank 0)");
        }
      }
    }
    lock.lock();
  }
}

Status TrainWatch::Finish(int64_t step) {
  proto::Done done;
  done.set_rank(backend_->world_rank());
  done.set_ok(true);
  done.set_step(step);
  LOOM_RETURN_IF_ERROR(client_->Finish(done));
  return world_->Barrier();
}

TrainWatch::~TrainWatch() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  reporter_.reset();
  client_.reset();
  if (state_ && !state_->stop_requested().empty()) {
    // The others hear the stop with their next beats' answers: give them a few beats.
    std::this_thread::sleep_for(std::chrono::milliseconds(4 * config_.beat_ms + 200));
  }
  service_.reset();
  world_.reset();
}

}  // namespace loom
