#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "ctl/doctor/doctor_facts.hpp"
#include "ctl/doctor/doctor_log.hpp"
#include "ctl/doctor/doctor_rules.hpp"

namespace gpurun {

// The report for people: a header naming the target, one row per finding, the fix under it,
// and the worst level.
std::string format_findings(const std::string& target, const std::vector<Finding>& findings);

// The same for programs: {"target", "worst", "exit_code", "facts", "findings": [...]}.
nlohmann::json doctor_json(const DoctorFacts& facts, const std::vector<Finding>& findings);

// A crash's report for programs: the same shape, with the log's evidence as the facts.
nlohmann::json crash_json(const CrashFacts& crash, const std::vector<Finding>& findings);

}  // namespace gpurun
