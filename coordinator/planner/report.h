// Human and machine views of a search result: the top-k table, the explanation of the winner
// (where its step time goes, what each parallel dimension costs, peak memory per pipeline stage,
// why it beats the runners-up) and JSON with everything, including the rank -> (node, device)
// map. Pure string building.
#pragma once

#include <string>

#include "coordinator/cluster.h"
#include "coordinator/plan_job.h"
#include "coordinator/planner/search.h"

namespace loom {

std::string PlanTable(const SearchResult& r, const PlanJob& job, const Cluster& c);
std::string PlanExplain(const SearchResult& r, const PlanJob& job, const Cluster& c);
std::string PlanJson(const SearchResult& r, const PlanJob& job, const Cluster& c);
// "ranks 0-7 -> dgx-000 devices 0-7" lines, at most `max_lines` (the middle elided).
std::string RankMap(const RankPlacement& p, const Cluster& c, int max_lines);

}  // namespace loom
