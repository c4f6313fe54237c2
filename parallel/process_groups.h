// ProcessGroups: where one rank sits in a layout, and the communicators of its groups, owned.
//
// Create builds them in one fixed order (world, tp, cp, dp-cp, pp, dp; a group of one rank is
// left null), which every rank shares, so the collective group creations match. The communicator
// fields share ownership of their communicators (CommPtr), which in turn keep their backend
// alive: whoever holds a ProcessGroups (the trainer holds a copy as its Placement) can never
// outlive the communicators it uses, whatever order the owners are destroyed in. Within an
// object that holds one, declare it before the members that use its communicators (a parameter
// store, a checkpointer), so that they die first.
//
// Default-constructed: one process, no communicators. A copy shares the communicators; fields
// that do not change the groups (layout.vpp, layout.zero, layout.sp) may be changed in a copy.
#pragma once

#include "comm/backend.h"
#include "comm/communicator.h"
#include "core/status.h"
#include "parallel/layout.h"

namespace loom {

struct ProcessGroups {
  Layout layout;
  int world_rank = 0;
  CommPtr tp;     // null when tp = 1
  CommPtr dp;     // null when dp = 1
  CommPtr pp;     // null when pp = 1
  CommPtr cp;     // null when cp = 1
  CommPtr dpcp;   // data x context group (gradient reduction); null when cp = 1
  CommPtr world;  // null for one process

  // This rank's groups of `layout` on `backend` (collective over the world: every rank calls it
  // with the same layout). The layout must cover the backend's world.
  static Result<ProcessGroups> Create(Backend& backend, const Layout& layout);
};

}  // namespace loom
