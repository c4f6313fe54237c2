// Stripe rows, piece sizes, and stripe groups across failure domains.
#include "fault/snapshot/stripe.h"

#include <algorithm>
#include <map>

namespace loom {

std::string ErasureCode::ToString() const {
  if (m == 0) return "none";
  return "RS(" + std::to_string(k) + "," + std::to_string(m) + ")";
}

ErasureCode DefaultErasureCode(int domains) {
  if (domains >= 6) return {4, 2};
  if (domains >= 3) return {2, 1};
  if (domains == 2) return {1, 1};
  return {0, 0};
}

Result<StripeLayout> StripeLayout::Create(int n, int k, int m) {
  if (k < 1 || m < 1 || n < k + m) {
    return InvalidArgument("stripe of RS(" + std::to_string(k) + "," + std::to_string(m) +
                           ") over " + std::to_string(n) + " members: expected k >= 1, m >= 1 " +
                           "and at least k + m members");
  }
  return StripeLayout(n, k, m);
}

std::vector<int> StripeLayout::RowHolders(int row) const {
  std::vector<int> h;
  for (int t = 0; t < k_; ++t) h.push_back(DataMember(row, t));
  for (int p = 0; p < m_; ++p) h.push_back(ParityMember(row, p));
  return h;
}

uint64_t PieceBytes(uint64_t max_image_bytes, int k, uint64_t align) {
  const uint64_t kk = static_cast<uint64_t>(std::max(k, 1));
  const uint64_t piece = (max_image_bytes + kk - 1) / kk;
  return std::max<uint64_t>(align, (piece + align - 1) / align * align);
}

Status CheckStripePlacement(const StripeGroup& group, const ErasureCode& code, int index) {
  LOOM_ASSIGN_OR_RETURN(const StripeLayout s,
                        StripeLayout::Create(static_cast<int>(group.ranks.size()), code.k, code.m));
  auto name = [&](int f) {
    return f < code.k ? "data piece " + std::to_string(f) : "parity " + std::to_string(f - code.k);
  };
  for (int row = 0; row < s.n(); ++row) {
    const std::vector<int> h = s.RowHolders(row);
    for (size_t a = 0; a < h.size(); ++a) {
      for (size_t b = a + 1; b < h.size(); ++b) {
        const bool same_node = group.nodes[h[a]] == group.nodes[h[b]];
        if (!same_node && group.domains[h[a]] != group.domains[h[b]]) continue;
        return FailedPrecondition(
            "snapshot placement: stripe group " + std::to_string(index) + ", row " +
            std::to_string(row) + ": " + name(static_cast<int>(a)) + " (rank " +
            std::to_string(group.ranks[h[a]]) + ", node " + group.nodes[h[a]] + ") and " +
            name(static_cast<int>(b)) + " (rank " + std::to_string(group.ranks[h[b]]) + ", node " +
            group.nodes[h[b]] + ") are both in " +
            (same_node ? "node " + group.nodes[h[a]] : "failure domain " + group.domains[h[a]]) +
            ": losing it would lose two fragments of one stripe");
      }
    }
  }
  return Status::Ok();
}

namespace {

// The nodes in an order where domains alternate: round robin over the domains, the largest
// first (so that the tail is as mixed as the head).
std::vector<const StripeNode*> Interleave(const std::vector<StripeNode>& nodes) {
  std::map<std::string, std::vector<const StripeNode*>> by_domain;
  std::vector<std::string> order;  // domains in order of first appearance
  for (const StripeNode& n : nodes) {
    auto& v = by_domain[n.domain];
    if (v.empty()) order.push_back(n.domain);
    v.push_back(&n);
  }
  std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
    return by_domain[a].size() > by_domain[b].size();
  });
  std::vector<const StripeNode*> out;
  for (size_t i = 0; out.size() < nodes.size(); ++i) {
    for (const std::string& d : order) {
      if (i < by_domain[d].size()) out.push_back(by_domain[d][i]);
    }
  }
  return out;
}

}  // namespace

Result<std::vector<StripeGroup>> FormStripeGroups(const std::vector<StripeNode>& nodes,
                                                  const ErasureCode& code) {
  const int width = code.k + code.m;
  const int count = static_cast<int>(nodes.size());
  if (code.m < 1 || code.k < 1) {
    return InvalidArgument("snapshot: no erasure code to form stripe groups for");
  }
  if (count < width) {
    return FailedPrecondition("snapshot: " + code.ToString() + " needs at least " +
                              std::to_string(width) + " nodes (one fragment of a stripe per " +
                              "node); the job has " + std::to_string(count) +
                              ": choose a smaller code in the job's snapshot section");
  }
  const std::vector<const StripeNode*> order = Interleave(nodes);
  // As many groups as fit, the remainder spread over them (each keeps at least k + m nodes).
  const int groups = count / width;
  std::vector<StripeGroup> out;
  int at = 0;
  for (int g = 0; g < groups; ++g) {
    const int size = count / groups + (g < count % groups ? 1 : 0);
    const size_t lanes = order[at]->ranks.size();
    for (int i = at; i < at + size; ++i) {
      if (order[i]->ranks.size() != lanes) {
        return FailedPrecondition("snapshot: stripe group " + std::to_string(g) + " mixes node " +
                                  order[at]->name + " (" + std::to_string(lanes) +
                                  " ranks) and node " + order[i]->name + " (" +
                                  std::to_string(order[i]->ranks.size()) +
                                  " ranks): its nodes must run as many ranks each");
      }
    }
    for (size_t lane = 0; lane < lanes; ++lane) {
      StripeGroup sg;
      for (int i = at; i < at + size; ++i) {
        sg.ranks.push_back(order[i]->ranks[lane]);
        sg.nodes.push_back(order[i]->name);
        sg.domains.push_back(order[i]->domain);
      }
      LOOM_RETURN_IF_ERROR(CheckStripePlacement(sg, code, static_cast<int>(out.size())));
      out.push_back(std::move(sg));
    }
    at += size;
  }
  return out;
}

}  // namespace loom
