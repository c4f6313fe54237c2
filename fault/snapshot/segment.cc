// POSIX shared-memory segments of in-memory snapshots: two slots, checksummed headers.
#include "fault/snapshot/segment.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>

#include "core/crc32c.h"

namespace loom {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'S', 'N', 'A', 'P'};
constexpr uint32_t kVersion = 1;

uint64_t AlignUp(uint64_t x) {
  return (x + kSegmentAlignment - 1) / kSegmentAlignment * kSegmentAlignment;
}

// In shared memory; fixed layout, no pointers.
struct SegmentHeader {
  char magic[8];
  uint32_t version;
  uint32_t header_crc;  // of the bytes after this field
  uint64_t image_bytes, piece_bytes;
  int32_t k, m, epoch, rank;
  char job[64];
  char node[128];
};

}  // namespace

struct SlotHeader {
  uint32_t header_crc;  // of the bytes after this field
  uint32_t state;
  int64_t step;
  uint64_t image_bytes;
  uint64_t meta_bytes;
  uint32_t meta_crc;
  uint32_t pad;
  uint32_t piece_crc[kMaxSnapshotK];
  int32_t parity_row[kMaxSnapshotM];
  uint32_t parity_crcs[kMaxSnapshotM][kMaxSnapshotK + kMaxSnapshotM];
};
static_assert(sizeof(SegmentHeader) <= kSegmentAlignment);
static_assert(sizeof(SlotHeader) <= kSegmentAlignment);

namespace {

template <typename H>
uint32_t HeaderCrc(const H& h) {
  const char* p = reinterpret_cast<const char*>(&h);
  constexpr size_t kAfter = offsetof(H, header_crc) + sizeof(uint32_t);
  const uint32_t before = Crc32c(p, offsetof(H, header_crc));
  return Crc32c(p + kAfter, sizeof(H) - kAfter, before);
}

std::string Sanitize(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_') c = '_';
  }
  return out;
}

void CopyName(char* dst, size_t n, const std::string& s) {
  std::memset(dst, 0, n);
  std::memcpy(dst, s.data(), std::min(n - 1, s.size()));
}

}  // namespace

const char* SlotStateName(SlotState s) {
  switch (s) {
    case SlotState::kEmpty:
      return "empty";
    case SlotState::kWriting:
      return "writing";
    case SlotState::kSealed:
      return "sealed";
    case SlotState::kReplicated:
      return "replicated";
    case SlotState::kCommitted:
      return "committed";
  }
  return "?";
}

uint64_t SegmentGeometry::SlotBytes() const {
  return kSegmentAlignment + AlignUp(ImageArea()) + AlignUp(ParityArea()) + kMetaCapacity;
}
uint64_t SegmentGeometry::TotalBytes() const {
  return kSegmentAlignment + 2 * SlotBytes();
}
uint64_t SegmentGeometry::SlotOffset(int slot) const {
  return kSegmentAlignment + static_cast<uint64_t>(slot) * SlotBytes();
}
uint64_t SegmentGeometry::ParityOffset(int slot, int p) const {
  return ImageOffset(slot) + AlignUp(ImageArea()) + static_cast<uint64_t>(p) * piece_bytes;
}
uint64_t SegmentGeometry::MetaOffset(int slot) const {
  return ImageOffset(slot) + AlignUp(ImageArea()) + AlignUp(ParityArea());
}

Status SegmentGeometry::Check() const {
  if (k < 1 || k > kMaxSnapshotK || m < 0 || m > kMaxSnapshotM) {
    return InvalidArgument("snapshot segment: k = " + std::to_string(k) +
                           ", m = " + std::to_string(m) + " outside k in [1, " +
                           std::to_string(kMaxSnapshotK) + "], m in [0, " +
                           std::to_string(kMaxSnapshotM) + "]");
  }
  if (image_bytes > ImageArea()) {
    return InvalidArgument("snapshot segment: an image of " + std::to_string(image_bytes) +
                           " bytes does not fit in " + std::to_string(k) + " pieces of " +
                           std::to_string(piece_bytes));
  }
  return Status::Ok();
}

std::string SegmentName(const SegmentIdentity& id) {
  return NodeSegmentPrefix(id.job, id.node) + "e" + std::to_string(id.epoch) + "-r" +
         std::to_string(id.rank);
}
std::string JobSegmentPrefix(const std::string& job) {
  return "loom-" + Sanitize(job) + "-";
}
std::string NodeSegmentPrefix(const std::string& job, const std::string& node) {
  return JobSegmentPrefix(job) + Sanitize(node) + "-";
}

Result<int> RemoveSegments(const std::string& prefix) {
  DIR* d = ::opendir("/dev/shm");
  if (d == nullptr) return ErrnoError("list /dev/shm", errno);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n.compare(0, prefix.size(), prefix) == 0) names.push_back(n);
  }
  ::closedir(d);
  int removed = 0;
  for (const std::string& n : names) {
    if (::shm_unlink(("/" + n).c_str()) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      return ErrnoError("remove shared memory /dev/shm/" + n, errno);
    }
  }
  return removed;
}

Status CreateNodeMarker(const std::string& job, const std::string& node) {
  const std::string name = "/" + NodeSegmentPrefix(job, node) + "alive";
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("create the node marker /dev/shm" + name, errno);
  ::close(fd);
  return Status::Ok();
}

bool NodeMarkerExists(const std::string& job, const std::string& node) {
  const int fd = ::shm_open(("/" + NodeSegmentPrefix(job, node) + "alive").c_str(),
                            O_RDONLY | O_CLOEXEC, 0);
  if (fd < 0) return false;
  ::close(fd);
  return true;
}

Result<Segment> Segment::Create(const SegmentIdentity& id, const SegmentGeometry& geometry) {
  LOOM_RETURN_IF_ERROR(geometry.Check());
  Segment s;
  s.name_ = SegmentName(id);
  s.geo_ = geometry;
  const std::string path = "/" + s.name_;
  ::shm_unlink(path.c_str());  // a stale one of a crashed incarnation with the same epoch
  const int fd = ::shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoError("create shared memory /dev/shm/" + s.name_, errno);
  const uint64_t total = geometry.TotalBytes();
  // posix_fallocate reserves the pages now: a full /dev/shm fails here with ENOSPC rather than
  // with SIGBUS at the first write into a hole.
  int err = ::posix_fallocate(fd, 0, static_cast<off_t>(total));
  void* p = MAP_FAILED;
  if (err == 0) {
    p = ::mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) err = errno;
  }
  ::close(fd);
  if (err != 0) {
    ::shm_unlink(path.c_str());
    return ErrnoError("allocate " + std::to_string(total) + " bytes of shared memory /dev/shm/" +
                          s.name_ + " for snapshots",
                      err);
  }
  s.base_ = static_cast<char*>(p);
  s.mapped_ = total;
  auto* h = reinterpret_cast<SegmentHeader*>(s.base_);
  std::memcpy(h->magic, kMagic, sizeof(kMagic));
  h->version = kVersion;
  h->image_bytes = geometry.image_bytes;
  h->piece_bytes = geometry.piece_bytes;
  h->k = geometry.k;
  h->m = geometry.m;
  h->epoch = id.epoch;
  h->rank = id.rank;
  CopyName(h->job, sizeof(h->job), id.job);
  CopyName(h->node, sizeof(h->node), id.node);
  h->header_crc = HeaderCrc(*h);
  for (int slot = 0; slot < 2; ++slot) {
    SlotHeader* sh = s.slot_header(slot);
    std::memset(sh, 0, sizeof(SlotHeader));
    sh->step = -1;
    s.Reseal(slot);
  }
  return s;
}

Result<Segment> Segment::Open(const SegmentIdentity& id) {
  Segment s;
  s.name_ = SegmentName(id);
  const std::string where = "snapshot segment /dev/shm/" + s.name_;
  const int fd = ::shm_open(("/" + s.name_).c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) return NotFound(where + " does not exist");
    return ErrnoError("open " + where, errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < kSegmentAlignment) {
    ::close(fd);
    return DataLoss(where + ": shorter than its header");
  }
  void* p =
      ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) return ErrnoError("map " + where, err);
  s.base_ = static_cast<char*>(p);
  s.mapped_ = static_cast<uint64_t>(st.st_size);
  const auto* h = reinterpret_cast<const SegmentHeader*>(s.base_);
  if (std::memcmp(h->magic, kMagic, sizeof(kMagic)) != 0 || h->version != kVersion ||
      h->header_crc != HeaderCrc(*h)) {
    return DataLoss(where + ": not a Loom snapshot segment of version " + std::to_string(kVersion) +
                    " (bad magic, version or header checksum)");
  }
  s.geo_.image_bytes = h->image_bytes;
  s.geo_.piece_bytes = h->piece_bytes;
  s.geo_.k = h->k;
  s.geo_.m = h->m;
  LOOM_RETURN_IF_ERROR(s.geo_.Check().WithContext(where));
  if (s.geo_.TotalBytes() != s.mapped_ || h->epoch != id.epoch || h->rank != id.rank) {
    return DataLoss(where + ": its header describes another segment (epoch " +
                    std::to_string(h->epoch) + ", rank " + std::to_string(h->rank) + ", " +
                    std::to_string(s.geo_.TotalBytes()) + " bytes; the file has " +
                    std::to_string(s.mapped_) + ")");
  }
  return s;
}

Segment::Segment(Segment&& o) noexcept
    : name_(std::move(o.name_)), geo_(o.geo_), base_(o.base_), mapped_(o.mapped_) {
  o.base_ = nullptr;
  o.mapped_ = 0;
}

Segment& Segment::operator=(Segment&& o) noexcept {
  if (this != &o) {
    if (base_ != nullptr) ::munmap(base_, mapped_);
    name_ = std::move(o.name_);
    geo_ = o.geo_;
    base_ = o.base_;
    mapped_ = o.mapped_;
    o.base_ = nullptr;
    o.mapped_ = 0;
  }
  return *this;
}

Segment::~Segment() {
  if (base_ != nullptr) ::munmap(base_, mapped_);
}

SlotHeader* Segment::slot_header(int slot) const {
  return reinterpret_cast<SlotHeader*>(base_ + geo_.SlotOffset(slot));
}

void Segment::Reseal(int slot) {
  SlotHeader* h = slot_header(slot);
  h->header_crc = HeaderCrc(*h);
}

Status Segment::Begin(int slot, int64_t step, const std::string& meta) {
  if (meta.size() > kMetaCapacity) {
    return InvalidArgument("snapshot step " + std::to_string(step) + ": its description takes " +
                           std::to_string(meta.size()) + " bytes, more than the " +
                           std::to_string(kMetaCapacity) + " a slot holds");
  }
  SlotHeader* h = slot_header(slot);
  // Invalid first, so that a crash part-way never leaves the old header over new contents.
  h->state = static_cast<uint32_t>(SlotState::kWriting);
  h->step = step;
  h->image_bytes = 0;
  std::fill(std::begin(h->parity_row), std::end(h->parity_row), -1);
  h->meta_bytes = meta.size();
  h->meta_crc = Crc32c(meta.data(), meta.size());
  std::memcpy(base_ + geo_.MetaOffset(slot), meta.data(), meta.size());
  Reseal(slot);
  return Status::Ok();
}

std::vector<uint32_t> Segment::Seal(int slot, uint64_t image_bytes) {
  SlotHeader* h = slot_header(slot);
  char* img = image(slot);
  std::memset(img + image_bytes, 0, geo_.ImageArea() - image_bytes);
  std::vector<uint32_t> crcs(static_cast<size_t>(geo_.k));
  for (int t = 0; t < geo_.k; ++t) {
    crcs[t] = Crc32c(img + static_cast<uint64_t>(t) * geo_.piece_bytes, geo_.piece_bytes);
    h->piece_crc[t] = crcs[t];
  }
  h->image_bytes = image_bytes;
  h->state = static_cast<uint32_t>(SlotState::kSealed);
  Reseal(slot);
  return crcs;
}

void Segment::SetParity(int slot, int p, const RowManifest& manifest) {
  SlotHeader* h = slot_header(slot);
  h->parity_row[p] = manifest.row;
  std::copy(manifest.crcs.begin(), manifest.crcs.end(), h->parity_crcs[p]);
  Reseal(slot);
}

void Segment::MarkReplicated(int slot) {
  slot_header(slot)->state = static_cast<uint32_t>(SlotState::kReplicated);
  Reseal(slot);
}

void Segment::MarkCommitted(int slot) {
  slot_header(slot)->state = static_cast<uint32_t>(SlotState::kCommitted);
  Reseal(slot);
}

SlotInfo Segment::ReadSlot(int slot) const {
  SlotInfo info;
  const SlotHeader h = *slot_header(slot);  // a copy: checked and read as one
  if (h.header_crc != HeaderCrc(h) || h.state > static_cast<uint32_t>(SlotState::kCommitted) ||
      h.image_bytes > geo_.ImageArea() || h.meta_bytes > kMetaCapacity) {
    return info;
  }
  info.valid = true;
  info.state = static_cast<SlotState>(h.state);
  info.step = h.step;
  info.image_bytes = h.image_bytes;
  info.meta_bytes = h.meta_bytes;
  info.piece_crcs.assign(h.piece_crc, h.piece_crc + geo_.k);
  for (int p = 0; p < geo_.m; ++p) {
    RowManifest r;
    r.row = h.parity_row[p];
    if (r.row >= 0) r.crcs.assign(h.parity_crcs[p], h.parity_crcs[p] + geo_.k + geo_.m);
    info.parities.push_back(std::move(r));
  }
  return info;
}

Result<std::string> Segment::ReadMeta(int slot) const {
  const SlotHeader* h = slot_header(slot);
  std::string meta(base_ + geo_.MetaOffset(slot), std::min<uint64_t>(h->meta_bytes, kMetaCapacity));
  if (Crc32c(meta.data(), meta.size()) != h->meta_crc) {
    return DataLoss("snapshot segment /dev/shm/" + name_ + ", slot " + std::to_string(slot) +
                    ": its description fails its checksum");
  }
  return meta;
}

bool Segment::PieceIntact(int slot, const SlotInfo& info, int t) const {
  return info.valid && info.state >= SlotState::kSealed &&
         Crc32c(image(slot) + static_cast<uint64_t>(t) * geo_.piece_bytes, geo_.piece_bytes) ==
             info.piece_crcs[t];
}

bool Segment::ParityIntact(int slot, const SlotInfo& info, int p) const {
  const RowManifest& r = info.parities[p];
  return info.valid && r.row >= 0 &&
         Crc32c(parity(slot, p), geo_.piece_bytes) == r.crcs[geo_.k + p];
}

Status Segment::Unlink() {
  if (::shm_unlink(("/" + name_).c_str()) != 0 && errno != ENOENT) {
    return ErrnoError("remove shared memory /dev/shm/" + name_, errno);
  }
  return Status::Ok();
}

}  // namespace loom
