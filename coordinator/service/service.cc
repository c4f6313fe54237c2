// Boost.Asio sessions with a deadline on every read and write.
#include "coordinator/service/service.h"

#include <boost/asio.hpp>
#include <mutex>
#include <vector>

#include "control/wire.h"
#include "core/logging.h"
#include "core/threads.h"

namespace loom {

namespace asio = boost::asio;
using asio::ip::tcp;

// Largest message accepted before a connection has registered (a Register is well under 1 KiB).
constexpr uint32_t kMaxUnregisteredBytes = 64 << 10;

struct CoordinatorService::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<JobState*> job{nullptr};  // swapped by SetJob when the job restarts
  ServiceOptions options;
  const CoordinatorService* owner = nullptr;
  mutable std::mutex mu;
  ServiceStats stats;  // GUARDED_BY(mu)

  asio::steady_timer retry{io};
  std::atomic<int> open{0};  // sessions alive
  int MaxConnections() const { return 4 * job.load()->spec().layout.world() + 16; }

  void Count(int64_t ServiceStats::*field) {
    std::lock_guard<std::mutex> lock(mu);
    ++(stats.*field);
  }
  void Accept();
};

namespace {

// One worker connection: read a frame, answer it, repeat, each step under a deadline.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, CoordinatorService::Impl* impl, const CoordinatorService* owner)
      : socket_(std::move(socket)), timer_(socket_.get_executor()), impl_(impl), owner_(owner) {
    ++impl_->open;
    boost::system::error_code ec;
    const tcp::endpoint ep = socket_.remote_endpoint(ec);
    peer_ = ec ? std::string("unknown peer")
               : ep.address().to_string() + ":" + std::to_string(ep.port());
  }

  ~Session() { --impl_->open; }

  void Start() { ReadHeader(); }

 private:
  // A registered worker may be quiet for a few heartbeats; an unregistered connection must say
  // something within one message deadline.
  int IdleMs() const {
    const ServiceOptions& o = impl_->options;
    if (rank_ < 0) return o.message_timeout_ms;
    return o.idle_timeout_ms > 0 ? o.idle_timeout_ms
                                 : std::max(10000, 5 * impl_->job.load()->spec().heartbeat_ms);
  }

  // Closes the connection if `ms` pass before the current operation finishes.
  // Disarm() (on completion) makes a timer that already fired harmless: its handler may be
  // queued behind the completion and must not close a connection that has moved on.
  void Arm(int ms, const char* what) {
    const uint64_t armed = ++generation_;
    timer_.expires_after(std::chrono::milliseconds(ms));
    auto self = shared_from_this();
    timer_.async_wait([self, what, ms, armed](const boost::system::error_code& ec) {
      if (ec || armed != self->generation_) return;  // the operation finished in time
      LOOM_LOG(WARN, COORD) << self->who() << ": " << what << " did not complete within " << ms
                            << " ms; closing the connection";
      self->impl_->Count(&ServiceStats::timed_out);
      self->Close();
    });
  }

  std::string who() const {
    return rank_ >= 0 ? "rank " + std::to_string(rank_) + " (" + peer_ + ")" : peer_;
  }

  void Disarm() {
    ++generation_;
    timer_.cancel();
  }

  void Close() {
    boost::system::error_code ec;
    Disarm();
    socket_.shutdown(tcp::socket::shutdown_both, ec);
    socket_.close(ec);
  }

  void ReadHeader() {
    Arm(IdleMs(), "waiting for a message");
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(header_),
                     [self](const boost::system::error_code& ec, size_t) {
                       self->Disarm();
                       if (ec) {
                         if (ec != asio::error::eof && ec != asio::error::operation_aborted) {
                           LOOM_LOG(DEBUG, COORD) << self->who() << ": " << ec.message();
                         }
                         return self->Close();
                       }
                       self->OnHeader();
                     });
  }

  void OnHeader() {
    Result<uint32_t> n = FrameSize(header_.data());
    // Until a connection has registered with the job's token it may only send a Register,
    // which is small: nobody gets to make the service allocate large buffers unauthenticated.
    if (n.ok() && rank_ < 0 && *n > kMaxUnregisteredBytes) {
      n = InvalidArgument("message of " + std::to_string(*n) +
                          " bytes before registering (at most " +
                          std::to_string(kMaxUnregisteredBytes) + ")");
    }
    if (!n.ok()) {
      LOOM_LOG(WARN, COORD) << who() << ": rejected: " << ForUser(n.status(), LogSubsys::COORD);
      impl_->Count(&ServiceStats::rejected_oversized);
      return Close();
    }
    body_.assign(*n, '\0');
    Arm(impl_->options.message_timeout_ms, "a message");
    auto self = shared_from_this();
    asio::async_read(socket_, asio::buffer(body_),
                     [self](const boost::system::error_code& ec, size_t) {
                       self->Disarm();
                       if (ec) return self->Close();
                       self->OnBody();
                     });
  }

  void OnBody() {
    Result<proto::Envelope> msg = ParseMessage(body_, who());
    if (!msg.ok()) {
      LOOM_LOG(WARN, COORD) << "rejected: " << ForUser(msg.status(), LogSubsys::COORD);
      impl_->Count(&ServiceStats::rejected_malformed);
      return Close();
    }
    // One incarnation's state for the whole message: SetJob may swap it meanwhile.
    JobState* job = impl_->job.load();
    if (msg->job_token() != job->spec().token) {
      LOOM_LOG(WARN, COORD) << who() << ": rejected a message with a wrong job token (another "
                            << "job's worker, or not a worker)";
      impl_->Count(&ServiceStats::rejected_token);
      return Reply(ErrorReply("wrong job token"), /*close=*/true);
    }
    proto::Envelope reply;
    Status st = Handle(*job, *msg, &reply);
    if (!st.ok()) {
      const std::string why = st.message().substr(0, st.message().find(" [at "));
      LOOM_LOG(WARN, COORD) << who() << ": rejected: " << why;
      impl_->Count(&ServiceStats::rejected_protocol);
      return Reply(ErrorReply(why), /*close=*/true);
    }
    impl_->Count(&ServiceStats::messages);
    Reply(reply, /*close=*/false);
  }

  Status Handle(JobState& job, const proto::Envelope& msg, proto::Envelope* reply) {
    const double now = owner_->Now();
    reply->set_job_token(job.spec().token);
    // After Register a connection speaks for its rank only.
    // A lone report (step_report) or a worker's queued ones (step_reports), oldest first.
    std::vector<const proto::StepReport*> reports;
    if (msg.body_case() == proto::Envelope::kStepReport) reports.push_back(&msg.step_report());
    for (const proto::StepReport& r : msg.step_reports().reports()) reports.push_back(&r);
    int claimed = msg.body_case() == proto::Envelope::kHeartbeat ? msg.heartbeat().rank()
                  : msg.body_case() == proto::Envelope::kDone    ? msg.done().rank()
                                                                 : rank_;
    for (const proto::StepReport* r : reports) {
      if (r->rank() != rank_) claimed = r->rank();
    }
    if (msg.body_case() != proto::Envelope::kRegister && rank_ < 0) {
      return FailedPrecondition("the first message of a connection must be a register");
    }
    if (msg.body_case() == proto::Envelope::kRegister && rank_ >= 0) {
      return FailedPrecondition("this connection already registered rank " + std::to_string(rank_));
    }
    if (claimed != rank_) {
      return InvalidArgument("field 'rank': this connection registered rank " +
                             std::to_string(rank_) + ", not " + std::to_string(claimed));
    }
    if (rank_ >= 0 && msg.sent_ns() > 0) job.Spoke(rank_, static_cast<double>(msg.sent_ns()) / 1e9);
    switch (msg.body_case()) {
      case proto::Envelope::kRegister: {
        LOOM_ASSIGN_OR_RETURN(*reply->mutable_plan(), job.Register(msg.register_(), now));
        reply->mutable_plan()->set_coordinator_ns(static_cast<int64_t>(now * 1e9));
        rank_ = msg.register_().rank();
        LOOM_LOG(DEBUG, COORD) << who() << " registered from " << msg.register_().host() << " pid "
                               << msg.register_().pid();
        return Status::Ok();
      }
      case proto::Envelope::kHeartbeat:
        LOOM_RETURN_IF_ERROR(job.Heartbeat(msg.heartbeat(), now));
        break;
      case proto::Envelope::kStepReport:
      case proto::Envelope::kStepReports:
        for (const proto::StepReport* r : reports) LOOM_RETURN_IF_ERROR(job.Report(*r, now));
        break;
      case proto::Envelope::kDone:
        LOOM_RETURN_IF_ERROR(job.Done(msg.done(), now));
        break;
      default:
        return InvalidArgument(
            "a worker may send register, heartbeat, step_report(s) or done, "
            "not field " +
            std::to_string(msg.body_case()));
    }
    reply->mutable_ack()->set_now_ns(static_cast<int64_t>(now * 1e9));
    reply->mutable_ack()->set_stop(job.stop_requested());
    return Status::Ok();
  }

  proto::Envelope ErrorReply(const std::string& message) const {
    proto::Envelope e;
    e.mutable_error()->set_message(message);
    return e;
  }

  void Reply(const proto::Envelope& reply, bool close) {
    out_ = FrameMessage(reply);
    Arm(impl_->options.message_timeout_ms, "sending a reply");
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_),
                      [self, close](const boost::system::error_code& ec, size_t) {
                        self->Disarm();
                        if (ec || close) return self->Close();
                        self->ReadHeader();
                      });
  }

  tcp::socket socket_;
  asio::steady_timer timer_;
  CoordinatorService::Impl* impl_;
  const CoordinatorService* owner_;
  std::string peer_;
  int rank_ = -1;
  uint64_t generation_ = 0;  // of the armed deadline
  std::array<unsigned char, 4> header_{};
  std::string body_, out_;
};

}  // namespace

void CoordinatorService::Impl::Accept() {
  acceptor.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (ec) {
      // E.g. out of file descriptors: try again a little later instead of spinning.
      LOOM_LOG(WARN, COORD) << "accept: " << ec.message() << "; retrying in 100 ms";
      retry.expires_after(std::chrono::milliseconds(100));
      retry.async_wait([this](const boost::system::error_code& e) {
        if (!e) Accept();
      });
      return;
    }
    Count(&ServiceStats::connections);
    if (open.load() >= MaxConnections()) {
      LOOM_LOG(WARN, COORD) << "refusing a connection: " << open.load()
                            << " are open already (the job has "
                            << job.load()->spec().layout.world() << " ranks)";
      Count(&ServiceStats::rejected_protocol);
      boost::system::error_code ignored;
      socket.close(ignored);
    } else {
      std::make_shared<Session>(std::move(socket), this, owner)->Start();
    }
    Accept();
  });
}

Result<std::unique_ptr<CoordinatorService>> CoordinatorService::Start(
    JobState* job, const ServiceOptions& options) {
  std::unique_ptr<CoordinatorService> s(new CoordinatorService());
  s->impl_ = std::make_unique<Impl>();
  s->impl_->job.store(job);
  s->impl_->options = options;
  s->impl_->owner = s.get();
  s->start_ = std::chrono::steady_clock::now();
  boost::system::error_code ec;
  const asio::ip::address addr = asio::ip::make_address(options.address, ec);
  if (ec) {
    return InvalidArgument("coordinator address '" + options.address + "': " + ec.message());
  }
  tcp::endpoint ep(addr, static_cast<unsigned short>(options.port));
  tcp::acceptor& a = s->impl_->acceptor;
  a.open(ep.protocol(), ec);
  if (!ec) a.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) a.bind(ep, ec);
  if (!ec) a.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return IoError("coordinator: listen on " + options.address + ":" +
                   std::to_string(options.port) + ": " + ec.message());
  }
  s->address_ = options.address;
  s->port_ = a.local_endpoint().port();
  s->impl_->Accept();
  Impl* impl = s->impl_.get();
  s->impl_->thread = std::thread([impl] {
    SetThreadName("loom-coord");
    try {
      impl->io.run();
    } catch (const std::exception& e) {  // e.g. out of memory: say so rather than terminate
      LOOM_LOG(ERROR, COORD) << "coordinator service stopped: " << e.what();
    }
  });
  return s;
}

CoordinatorService::~CoordinatorService() {
  Stop();
}

void CoordinatorService::Stop() {
  if (!impl_ || !impl_->thread.joinable()) return;
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ec;
    impl->acceptor.close(ec);
    impl->io.stop();
  });
  impl_->thread.join();
}

std::string CoordinatorService::endpoint() const {
  return address_ + ":" + std::to_string(port_);
}

ServiceStats CoordinatorService::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->stats;
}

void CoordinatorService::SetJob(JobState* job) {
  impl_->job.store(job);
}

double CoordinatorService::Now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

}  // namespace loom
