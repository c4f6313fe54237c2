// Test helper shared by the checkpoint tests: a Layout from its six sizes in one expression.
#pragma once

#include "parallel/layout.h"

namespace loom {

inline Layout L(int tp, int cp, int pp, int vpp, int dp, int zero) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.pp = pp;
  l.vpp = vpp;
  l.dp = dp;
  l.zero = zero;
  return l;
}

}  // namespace loom
