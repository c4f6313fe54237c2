#include "parallel/state_kind.h"

namespace loom {

const char* StateName(StateKind s) {
  switch (s) {
    case StateKind::kParam:
      return "param";
    case StateKind::kExpAvg:
      return "exp_avg";
    case StateKind::kExpAvgSq:
      return "exp_avg_sq";
  }
  return "?";
}

}  // namespace loom
