// How in-memory snapshots are striped with RS(k, m) over a group of n >= k + m ranks, each on a
// different failure domain (a node, or a rack when the manifest names racks), and how groups are
// formed from the nodes of a job. Pure code: no memory, no transport.
//
// The stripe (RAID-6 style, parity rotating). Every member's snapshot image is cut into k pieces
// of `piece_bytes` (zero-padded). There are n rows; row r holds k data pieces and m parity
// fragments, each on a different member:
//   data piece t (t = 0..k-1) of row r is piece t of member (r + m + t) mod n,
//   parity p    (p = 0..m-1) of row r is held by member (r + p) mod n.
// So every member contributes each of its k pieces to exactly one row and holds m parity
// fragments (one each of m rows): the protection costs m/k of the image (RS(4,2): 1.5x memory
// in all, against 2x for a full copy on another node), and any m lost members lose at most m
// fragments of any row, which RS(k, m) rebuilds. Member r gathers row r (its first parity
// holder): it receives the k data pieces, encodes the m parities, keeps parity 0 and sends
// parity p to member (r + p) mod n.
//
// Worked example, n = 4, RS(2, 1): row 0 = pieces (m1.0, m2.1) + parity at m0; row 1 = (m2.0,
// m3.1) + m1; row 2 = (m3.0, m0.1) + m2; row 3 = (m0.0, m1.1) + m3. Losing m2 loses m2.1 of row
// 0 (rebuilt from m1.0 and m0's parity), m2.0 of row 1, and the parity of row 2 (recomputed).
//
// Groups: a job's nodes are ordered so that failure domains alternate, cut into groups of at
// least k + m nodes, and each group is split into lanes: lane l is the l-th rank of every node
// of the group, so that the members of a stripe group sit on distinct nodes. Every row must
// place its k + m fragments in k + m distinct domains (CheckStripePlacement).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace loom {

// Which RS(k, m) protects the snapshots.
struct ErasureCode {
  int k = 0, m = 0;              // m = 0: no erasure coding (local snapshots only)
  std::string ToString() const;  // "RS(4,2)" or "none"
};

// The default code for a job whose nodes span `domains` failure domains: RS(4,2) from 6 on,
// RS(2,1) for 3 to 5, RS(1,1) (a mirror) for 2, none for 1.
ErasureCode DefaultErasureCode(int domains);

class StripeLayout {
 public:
  // n members, RS(k, m); InvalidArgument unless 1 <= k, 1 <= m and n >= k + m.
  static Result<StripeLayout> Create(int n, int k, int m);

  int n() const { return n_; }
  int k() const { return k_; }
  int m() const { return m_; }

  // Row r's data piece t: its member (whose piece t it is).
  int DataMember(int row, int t) const { return Mod(row + m_ + t); }
  // Row r's parity p: the member that holds it.
  int ParityMember(int row, int p) const { return Mod(row + p); }
  // The row member j's piece t belongs to, and the row whose parity p member j holds.
  int RowOfPiece(int member, int t) const { return Mod(member - m_ - t); }
  int RowOfParity(int member, int p) const { return Mod(member - p); }
  // Row r's k + m fragments in RS order (data pieces 0..k-1, then parities 0..m-1): the member
  // holding each.
  std::vector<int> RowHolders(int row) const;

 private:
  StripeLayout(int n, int k, int m) : n_(n), k_(k), m_(m) {}
  int Mod(int x) const { return ((x % n_) + n_) % n_; }
  int n_, k_, m_;
};

// Bytes of one piece for images of at most `max_image_bytes`: ceil(max / k), rounded up to
// `align` (a power of two).
uint64_t PieceBytes(uint64_t max_image_bytes, int k, uint64_t align = 64);

// A node of the job as the grouping sees it.
struct StripeNode {
  std::string name;
  std::string domain;      // its failure domain: the rack, else the node's own name
  std::vector<int> ranks;  // world ranks placed on it, in rank order
};

// One stripe group: world ranks in member order, and the node of each.
struct StripeGroup {
  std::vector<int> ranks;
  std::vector<std::string> nodes, domains;
};

// Groups for `nodes` under `code` (code.m > 0): domains alternate, each group has at least
// k + m nodes and equal ranks per node, one stripe group per lane. Errors say what is missing:
// too few nodes or domains, unequal ranks per node in a group, a row that would put two
// fragments in one domain.
Result<std::vector<StripeGroup>> FormStripeGroups(const std::vector<StripeNode>& nodes,
                                                  const ErasureCode& code);

// Refuses a group any of whose rows puts two of its fragments on one node or in one domain,
// naming the group, the row, the two fragments and the domain.
Status CheckStripePlacement(const StripeGroup& group, const ErasureCode& code, int index);

}  // namespace loom
