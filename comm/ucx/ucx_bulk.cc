// UCX puts into peers' registered windows, with notes (comm/ucx/ucx_bulk.h).
#include "comm/ucx/ucx_bulk.h"

#include <dlfcn.h>
#include <signal.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <thread>
#include <type_traits>

#include "comm/agree.h"
#include "core/crc32c.h"

namespace loom {
namespace {

// UCX is loaded when a transport is first made, not when the process starts: its libraries
// install signal handlers as they load (UCX_DEBUG_SIGNO=HUP, the error signals), which would
// take SIGHUP away from a `loom train` started under nohup, and from every process that never
// uses UCX. The process's own handlers are put back around the load and ucp_init.
struct Api {
  decltype(&ucp_config_read) config_read;
  decltype(&ucp_config_release) config_release;
  decltype(&ucp_init_version) init_version;
  decltype(&ucp_cleanup) cleanup;
  decltype(&ucp_worker_create) worker_create;
  decltype(&ucp_worker_destroy) worker_destroy;
  decltype(&ucp_worker_get_address) worker_get_address;
  decltype(&ucp_worker_release_address) worker_release_address;
  decltype(&ucp_worker_progress) worker_progress;
  decltype(&ucp_mem_map) mem_map;
  decltype(&ucp_mem_unmap) mem_unmap;
  decltype(&ucp_rkey_pack) rkey_pack;
  decltype(&ucp_rkey_buffer_release) rkey_buffer_release;
  decltype(&ucp_ep_create) ep_create;
  decltype(&ucp_ep_close_nbx) ep_close_nbx;
  decltype(&ucp_ep_rkey_unpack) ep_rkey_unpack;
  decltype(&ucp_rkey_destroy) rkey_destroy;
  decltype(&ucp_put_nbx) put_nbx;
  decltype(&ucp_ep_flush_nbx) ep_flush_nbx;
  decltype(&ucp_request_check_status) request_check_status;
  decltype(&ucp_request_free) request_free;
  decltype(&ucs_status_string) status_string;
};
const Api* U = nullptr;

// Keeps the dispositions of every signal UCX may touch while it lives, and puts them back.
class KeepSignals {
 public:
  KeepSignals() {
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], nullptr, &saved_[i]);
  }
  ~KeepSignals() {
    for (size_t i = 0; i < std::size(kSignals); ++i) ::sigaction(kSignals[i], &saved_[i], nullptr);
  }

 private:
  static constexpr int kSignals[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGILL,  SIGABRT, SIGBUS, SIGFPE,
                                     SIGSEGV, SIGALRM, SIGTERM, SIGUSR1, SIGUSR2, SIGPIPE};
  struct sigaction saved_[std::size(kSignals)];
};

Status LoadUcx() {
  static std::once_flag once;
  static Status status;
  static Api api;
  std::call_once(once, [] {
    void* h = nullptr;
    {
      const KeepSignals keep;
      h = ::dlopen("libucp.so.0", RTLD_NOW | RTLD_LOCAL);
    }
    if (h == nullptr) {
      status = FailedPrecondition(std::string("UCX: cannot load libucp.so.0: ") + ::dlerror());
      return;
    }
    bool ok = true;
    auto get = [&](auto* fn, const char* name) {
      *fn = reinterpret_cast<std::remove_pointer_t<decltype(fn)>>(::dlsym(h, name));
      if (*fn == nullptr && ok) {
        ok = false;
        status = FailedPrecondition(std::string("UCX: libucp.so.0 has no ") + name);
      }
    };
    get(&api.config_read, "ucp_config_read");
    get(&api.config_release, "ucp_config_release");
    get(&api.init_version, "ucp_init_version");
    get(&api.cleanup, "ucp_cleanup");
    get(&api.worker_create, "ucp_worker_create");
    get(&api.worker_destroy, "ucp_worker_destroy");
    get(&api.worker_get_address, "ucp_worker_get_address");
    get(&api.worker_release_address, "ucp_worker_release_address");
    get(&api.worker_progress, "ucp_worker_progress");
    get(&api.mem_map, "ucp_mem_map");
    get(&api.mem_unmap, "ucp_mem_unmap");
    get(&api.rkey_pack, "ucp_rkey_pack");
    get(&api.rkey_buffer_release, "ucp_rkey_buffer_release");
    get(&api.ep_create, "ucp_ep_create");
    get(&api.ep_close_nbx, "ucp_ep_close_nbx");
    get(&api.ep_rkey_unpack, "ucp_ep_rkey_unpack");
    get(&api.rkey_destroy, "ucp_rkey_destroy");
    get(&api.put_nbx, "ucp_put_nbx");
    get(&api.ep_flush_nbx, "ucp_ep_flush_nbx");
    get(&api.request_check_status, "ucp_request_check_status");
    get(&api.request_free, "ucp_request_free");
    get(&api.status_string, "ucs_status_string");
    if (ok) U = &api;
  });
  return status;
}

// One note in a receiver's notice area: slot [sender][round mod kRoundsInFlight].
struct Notice {
  uint64_t round;
  uint32_t bytes;
  uint32_t crc;  // of round, bytes and data[0..bytes)
  char data[kMaxNoteBytes];
};
constexpr uint64_t kNoticeBytes = 1024;
static_assert(sizeof(Notice) <= kNoticeBytes);

uint32_t NoticeCrc(const Notice& n) {
  uint32_t c = Crc32c(&n.round, sizeof(n.round));
  c = Crc32c(&n.bytes, sizeof(n.bytes), c);
  return Crc32c(n.data, std::min<uint64_t>(n.bytes, kMaxNoteBytes), c) ^ 0x9E3779B9u;
}

Status UcsError(const std::string& what, ucs_status_t s) {
  return Internal("UCX " + what + ": " + U->status_string(s));
}

// What every rank publishes to its peers: its worker address and, per window, base and rkey.
struct Published {
  std::vector<uint8_t> worker;
  std::vector<uint64_t> bases, lengths;
  std::vector<std::vector<uint8_t>> rkeys;
};

class UcxBulk : public BulkTransport {
 public:
  UcxBulk(Communicator* group, std::vector<BulkWindow> windows)
      : group_(group), windows_(std::move(windows)) {}
  ~UcxBulk() override { Close(); }
  const char* name() const override { return "ucx"; }

  // Collective: every phase ends with a vote, so that all members succeed or all fail (and all
  // fall back together).
  Status Setup() {
    Published mine;
    LOOM_RETURN_IF_ERROR(Agree(StartLocal(&mine), "start"));
    std::vector<Published> all;
    LOOM_RETURN_IF_ERROR(ExchangePublished(mine, &all));
    return Agree(Connect(all), "connect");
  }

 private:
  // `local` on this rank; an error on every member if any member failed.
  Status Agree(const Status& local, const char* phase) {
    return AgreeStatus(group_, local, "UCX " + std::string(phase), group_->DefaultDeadline());
  }

  Status StartLocal(Published* mine) {
    LOOM_RETURN_IF_ERROR(LoadUcx());
    ucp_config_t* cfg = nullptr;
    ucs_status_t s = U->config_read(nullptr, nullptr, &cfg);
    if (s != UCS_OK) return UcsError("read configuration", s);
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_RMA;
    {
      const KeepSignals keep;
      s = U->init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, cfg, &ctx_);
    }
    U->config_release(cfg);
    if (s != UCS_OK) return UcsError("init", s);
    ucp_worker_params_t wp{};
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // set up on one thread, used on another
    s = U->worker_create(ctx_, &wp, &worker_);
    if (s != UCS_OK) return UcsError("create worker", s);
    // The notice area is a window of our own, after the caller's.
    const int n = group_->size();
    notices_bytes_ = static_cast<uint64_t>(n) * kRoundsInFlight * kNoticeBytes;
    notices_ = static_cast<char*>(std::aligned_alloc(4096, notices_bytes_));
    if (notices_ == nullptr) return Internal("UCX: out of memory for the notice area");
    std::memset(notices_, 0, notices_bytes_);
    for (Notice* nt = reinterpret_cast<Notice*>(notices_);
         reinterpret_cast<char*>(nt) < notices_ + notices_bytes_;
         nt = reinterpret_cast<Notice*>(reinterpret_cast<char*>(nt) + kNoticeBytes)) {
      nt->round = ~uint64_t{0};
    }
    windows_.push_back({notices_, notices_bytes_});
    return Publish(mine);
  }

 public:
  Status Exchange(uint64_t round, const std::vector<BulkSend>& sends, std::vector<BulkRecv>* recvs,
                  Deadline deadline) override {
    const int user_windows = static_cast<int>(windows_.size()) - 1;
    std::vector<ucs_status_ptr_t> reqs;
    std::vector<int> peers;
    for (const BulkSend& s : sends) {
      if (s.window < 0 || s.window >= user_windows || s.note.size() > kMaxNoteBytes) {
        return InvalidArgument("UCX bulk send: window " + std::to_string(s.window) +
                               " or note size out of range");
      }
      if (s.peer < 0 || s.peer >= group_->size()) {
        return InvalidArgument("UCX bulk send: no peer " + std::to_string(s.peer));
      }
      const Remote& r = remote_[s.peer][s.window];
      if (s.offset > r.bytes || s.bytes > r.bytes - s.offset) {
        return InvalidArgument("UCX bulk send of " + std::to_string(s.bytes) + " bytes at " +
                               std::to_string(s.offset) + " outside rank " +
                               std::to_string(group_->members()[s.peer]) + "'s window " +
                               std::to_string(s.window) + " (" + std::to_string(r.bytes) +
                               " bytes)");
      }
      if (std::find(peers.begin(), peers.end(), s.peer) == peers.end()) peers.push_back(s.peer);
      if (s.bytes == 0) continue;
      LOOM_RETURN_IF_ERROR(Put(s.peer, s.src, s.bytes, r.base + s.offset, r.rkey, &reqs));
    }
    // The bytes are in the peers' windows once the flushes complete; then the notes go.
    LOOM_RETURN_IF_ERROR(Flush(peers, &reqs));
    LOOM_RETURN_IF_ERROR(Wait(&reqs, deadline, "fragments of round " + std::to_string(round)));
    // The notes' buffers outlive a put that a deadline leaves running: one set per round slot.
    std::vector<Notice>& notes = notes_[round % kRoundsInFlight];
    notes.assign(sends.size(), Notice{});
    for (size_t i = 0; i < sends.size(); ++i) {
      Notice& nt = notes[i];
      nt.round = round;
      nt.bytes = static_cast<uint32_t>(sends[i].note.size());
      std::memcpy(nt.data, sends[i].note.data(), sends[i].note.size());
      nt.crc = NoticeCrc(nt);
      const Remote& r = remote_[sends[i].peer].back();
      const uint64_t at = NoticeOffset(group_->rank(), round);
      LOOM_RETURN_IF_ERROR(Put(sends[i].peer, &nt, sizeof(Notice), r.base + at, r.rkey, &reqs));
    }
    // The notes are not flushed: a flush may need the peer to progress its worker (puts that a
    // transport carries as messages, e.g. shared-memory FIFOs or TCP), and a peer that has seen
    // every note it waits for leaves the round and progresses no more, so a flush of the last
    // note could hang until its next snapshot. Each note's bytes are the last of its round to the
    // peer (the fragments before it are flushed, so they are in place when it is seen), the
    // peer polls for it, and its buffer stays ours (notes_): local completion is enough.
    LOOM_RETURN_IF_ERROR(Wait(&reqs, deadline, "notes of round " + std::to_string(round)));
    return AwaitNotes(round, recvs, deadline);
  }

  struct Remote {
    uint64_t base = 0, bytes = 0;
    ucp_rkey_h rkey = nullptr;
  };

  uint64_t NoticeOffset(int sender, uint64_t round) const {
    return (static_cast<uint64_t>(sender) * kRoundsInFlight + round % kRoundsInFlight) *
           kNoticeBytes;
  }

  Status Publish(Published* p) {
    ucp_address_t* addr = nullptr;
    size_t len = 0;
    ucs_status_t s = U->worker_get_address(worker_, &addr, &len);
    if (s != UCS_OK) return UcsError("get worker address", s);
    p->worker.assign(reinterpret_cast<uint8_t*>(addr), reinterpret_cast<uint8_t*>(addr) + len);
    U->worker_release_address(worker_, addr);
    for (const BulkWindow& w : windows_) {
      ucp_mem_map_params_t mp{};
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = w.base;
      mp.length = std::max<uint64_t>(w.bytes, 1);
      ucp_mem_h memh = nullptr;
      s = U->mem_map(ctx_, &mp, &memh);
      if (s != UCS_OK) {
        return UcsError("map a window of " + std::to_string(w.bytes) + " bytes", s);
      }
      memh_.push_back(memh);
      void* rk = nullptr;
      size_t rk_len = 0;
      s = U->rkey_pack(ctx_, memh, &rk, &rk_len);
      if (s != UCS_OK) return UcsError("pack a remote key", s);
      p->rkeys.emplace_back(static_cast<uint8_t*>(rk), static_cast<uint8_t*>(rk) + rk_len);
      U->rkey_buffer_release(rk);
      p->bases.push_back(reinterpret_cast<uint64_t>(w.base));
      p->lengths.push_back(w.bytes);
    }
    return Status::Ok();
  }

  // Flattens `mine` into one blob and gathers every member's.
  Status ExchangePublished(const Published& mine, std::vector<Published>* all) {
    std::string blob;
    auto put64 = [&](uint64_t v) { blob.append(reinterpret_cast<const char*>(&v), 8); };
    put64(mine.worker.size());
    blob.append(mine.worker.begin(), mine.worker.end());
    put64(mine.bases.size());
    for (size_t w = 0; w < mine.bases.size(); ++w) {
      put64(mine.bases[w]);
      put64(mine.lengths[w]);
      put64(mine.rkeys[w].size());
      blob.append(mine.rkeys[w].begin(), mine.rkeys[w].end());
    }
    LOOM_ASSIGN_OR_RETURN(std::vector<std::string> blobs,
                          AllGatherBlobs(group_, blob, group_->DefaultDeadline()));
    all->resize(blobs.size());
    for (size_t r = 0; r < blobs.size(); ++r) {
      const std::string& b = blobs[r];
      size_t at = 0;
      bool ok = true;
      auto get64 = [&] {
        uint64_t v = 0;
        if (at + 8 > b.size()) {
          ok = false;
          return v;
        }
        std::memcpy(&v, b.data() + at, 8);
        at += 8;
        return v;
      };
      auto bytes = [&](uint64_t n) {
        std::vector<uint8_t> v;
        if (n > b.size() - std::min(at, b.size())) {
          ok = false;
          return v;
        }
        v.assign(b.begin() + static_cast<std::ptrdiff_t>(at),
                 b.begin() + static_cast<std::ptrdiff_t>(at + n));
        at += n;
        return v;
      };
      Published& p = (*all)[r];
      p.worker = bytes(get64());
      const uint64_t windows = get64();
      for (uint64_t w = 0; ok && w < windows; ++w) {
        p.bases.push_back(get64());
        p.lengths.push_back(get64());
        p.rkeys.push_back(bytes(get64()));
      }
      if (!ok || p.bases.size() != windows_.size()) {
        return InvalidArgument("UCX bulk transport: rank " + std::to_string(group_->members()[r]) +
                               " published " + std::to_string(p.bases.size()) +
                               " windows, this rank " + std::to_string(windows_.size()));
      }
    }
    return Status::Ok();
  }

  Status Connect(const std::vector<Published>& all) {
    const int n = group_->size();
    eps_.assign(static_cast<size_t>(n), nullptr);
    remote_.resize(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      ucp_ep_params_t ep{};
      ep.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
      ep.address = reinterpret_cast<const ucp_address_t*>(all[r].worker.data());
      ucs_status_t s = U->ep_create(worker_, &ep, &eps_[r]);
      if (s != UCS_OK) {
        return UcsError("connect to rank " + std::to_string(group_->members()[r]), s);
      }
      for (size_t w = 0; w < all[r].bases.size(); ++w) {
        Remote rm;
        rm.base = all[r].bases[w];
        rm.bytes = all[r].lengths[w];
        s = U->ep_rkey_unpack(eps_[r], all[r].rkeys[w].data(), &rm.rkey);
        if (s != UCS_OK) return UcsError("unpack a remote key", s);
        remote_[r].push_back(rm);
      }
    }
    return Status::Ok();
  }

  Status Put(int peer, const void* src, uint64_t bytes, uint64_t addr, ucp_rkey_h rkey,
             std::vector<ucs_status_ptr_t>* reqs) {
    ucp_request_param_t rp{};
    ucs_status_ptr_t r = U->put_nbx(eps_[peer], src, bytes, addr, rkey, &rp);
    if (UCS_PTR_IS_ERR(r)) {
      return UcsError("put to rank " + std::to_string(group_->members()[peer]), UCS_PTR_STATUS(r));
    }
    if (r != nullptr) reqs->push_back(r);
    return Status::Ok();
  }

  Status Flush(const std::vector<int>& peers, std::vector<ucs_status_ptr_t>* reqs) {
    for (int p : peers) {
      ucp_request_param_t rp{};
      ucs_status_ptr_t r = U->ep_flush_nbx(eps_[p], &rp);
      if (UCS_PTR_IS_ERR(r)) {
        return UcsError("flush to rank " + std::to_string(group_->members()[p]), UCS_PTR_STATUS(r));
      }
      if (r != nullptr) reqs->push_back(r);
    }
    return Status::Ok();
  }

  // Progresses the worker, backing off when idle: a polling loop that must not take a core
  // from training for the whole of a transfer.
  void ProgressOrRest(int* idle) {
    if (U->worker_progress(worker_) != 0) {
      *idle = 0;
    } else if (++*idle > 256) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  Status Wait(std::vector<ucs_status_ptr_t>* reqs, Deadline deadline, const std::string& what) {
    int idle = 0;
    Status result;
    for (ucs_status_ptr_t r : *reqs) {
      ucs_status_t s;
      while ((s = U->request_check_status(r)) == UCS_INPROGRESS) {
        if (Clock::now() > deadline) {
          result = DeadlineExceeded("UCX: " + what + " not acknowledged by the deadline");
          break;
        }
        ProgressOrRest(&idle);
      }
      if (result.ok() && s != UCS_OK) result = UcsError(what, s);
      if (!result.ok()) break;
    }
    for (ucs_status_ptr_t r : *reqs) {
      if (U->request_check_status(r) != UCS_INPROGRESS) U->request_free(r);
    }
    reqs->clear();
    return result;
  }

  Status AwaitNotes(uint64_t round, std::vector<BulkRecv>* recvs, Deadline deadline) {
    std::vector<bool> got(recvs->size(), false);
    size_t left = recvs->size();
    int idle = 0;
    while (left > 0) {
      for (size_t i = 0; i < recvs->size(); ++i) {
        if (got[i]) continue;
        const auto* slot =
            reinterpret_cast<const Notice*>(notices_ + NoticeOffset((*recvs)[i].peer, round));
        std::atomic_thread_fence(std::memory_order_acquire);
        Notice copy;
        std::memcpy(&copy, slot, sizeof(Notice));
        if (copy.round != round || copy.bytes > kMaxNoteBytes || copy.crc != NoticeCrc(copy)) {
          continue;
        }
        (*recvs)[i].note.assign(copy.data, copy.bytes);
        got[i] = true;
        --left;
      }
      if (left == 0) break;
      if (Clock::now() > deadline) {
        std::string who;
        int missing = 0;
        for (size_t i = 0; i < recvs->size(); ++i) {
          if (!got[i]) {
            who += (who.empty() ? "" : ", ") + std::to_string(group_->members()[(*recvs)[i].peer]);
            ++missing;
          }
        }
        return DeadlineExceeded("snapshot transfer round " + std::to_string(round) +
                                ": no fragment from " + (missing > 1 ? "ranks " : "rank ") + who +
                                " (group '" + group_->name() + "') by the deadline");
      }
      ProgressOrRest(&idle);
    }
    return Status::Ok();
  }

  void Close() {
    if (worker_ != nullptr && !eps_.empty()) {
      // The last notes were not flushed (Exchange says why): let them complete while the peers
      // may still be there, briefly, so that nothing is left pending when the worker goes.
      std::vector<ucs_status_ptr_t> reqs;
      std::vector<int> all;
      for (int p = 0; p < static_cast<int>(eps_.size()); ++p) {
        if (eps_[p] != nullptr) all.push_back(p);
      }
      if (Flush(all, &reqs).ok()) {
        (void)Wait(&reqs, Clock::now() + std::chrono::milliseconds(500), "the last notes");
      }
    }
    for (auto& per_peer : remote_) {  // remote keys before their endpoints
      for (Remote& r : per_peer) {
        if (r.rkey != nullptr) U->rkey_destroy(r.rkey);
      }
    }
    if (worker_ != nullptr) {
      std::vector<ucs_status_ptr_t> reqs;
      for (ucp_ep_h ep : eps_) {
        if (ep == nullptr) continue;
        ucp_request_param_t rp{};
        rp.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        rp.flags = UCP_EP_CLOSE_FLAG_FORCE;
        ucs_status_ptr_t r = U->ep_close_nbx(ep, &rp);
        if (r != nullptr && !UCS_PTR_IS_ERR(r)) reqs.push_back(r);
      }
      (void)Wait(&reqs, Clock::now() + std::chrono::seconds(5), "closing");
      U->worker_destroy(worker_);
    }
    for (ucp_mem_h m : memh_) U->mem_unmap(ctx_, m);
    if (ctx_ != nullptr) U->cleanup(ctx_);
    std::free(notices_);
  }

  Communicator* group_;
  std::vector<BulkWindow> windows_;  // the caller's, then the notice area
  ucp_context_h ctx_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  std::vector<ucp_mem_h> memh_;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::vector<Remote>> remote_;  // [peer][window]
  char* notices_ = nullptr;
  uint64_t notices_bytes_ = 0;
  std::vector<Notice> notes_[kRoundsInFlight];  // the notes put in each round slot
};

}  // namespace

Result<std::unique_ptr<BulkTransport>> CreateUcxBulk(Communicator* group,
                                                     const std::vector<BulkWindow>& windows) {
  auto t = std::make_unique<UcxBulk>(group, windows);
  LOOM_RETURN_IF_ERROR(t->Setup());
  return std::unique_ptr<BulkTransport>(std::move(t));
}

}  // namespace loom
