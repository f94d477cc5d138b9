#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "base/env.hpp"
#include "ctl/doctor/doctor_facts.hpp"
#include "ctl/doctor/doctor_log.hpp"
#include "ctl/doctor/doctor_rules.hpp"

namespace gpurun {

// Whether the report colours its levels, for --color `mode` (auto, always or never): auto
// colours a terminal (`stdout_is_tty`) whose TERM is set and not "dumb", unless NO_COLOR is
// set and not empty (no-color.org). Throws Error (exit 2) naming --color for another mode.
bool use_color(const std::string& mode, bool stdout_is_tty, const EnvLookup& env);

// The report for people: a header naming the target, one row per finding, the fix under it,
// and the worst level; with `color`, each level word is coloured (FAIL red, WARN yellow, OK
// green) and nothing else changes.
std::string format_findings(const std::string& target, const std::vector<Finding>& findings, bool color = false);

// The same for programs: {"target", "worst", "exit_code", "facts", "findings": [...]}.
nlohmann::json doctor_json(const DoctorFacts& facts, const std::vector<Finding>& findings);

// A crash's report for programs: the same shape, with the log's evidence as the facts.
nlohmann::json crash_json(const CrashFacts& crash, const std::vector<Finding>& findings);

}  // namespace gpurun
