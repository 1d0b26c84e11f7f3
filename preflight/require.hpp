#pragma once
// NVIDIA_REQUIRE_* as libnvidia-container evaluates them (src/cli/dsl.c, configure.c): each
// variable is space-separated alternatives (OR) of comma-separated conditions (AND) on `cuda`
// (the driver's CUDA version), `driver`, `arch` (compute capability) and `brand`; every
// variable must hold, for every selected GPU. Pure.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace gpubox::preflight {

// What one evaluation sees. Empty: unknown, and then the toolkit counts the condition as met
// (a driver it could not query, no GPU selected for arch and brand).
struct RequireFacts {
    std::string cuda, driver, arch, brand;
    bool has_device = false;
};

enum class Outcome { satisfied, unsatisfied, invalid };
struct Evaluation {
    Outcome outcome = Outcome::satisfied;
    // unsatisfied: the first alternative, as nvidia-container-cli prints it ("cuda>=12.8");
    // invalid: the condition it could not evaluate.
    std::string condition;
};

Evaluation evaluate_requirement(const std::string& expr, const RequireFacts& facts);

// Throws UsageError for an expression that can never be evaluated (an unknown property, a
// missing operator or value, a version with letters): --require's check at parse time.
void validate_requirement(const std::string& expr, const std::string& what);

struct Requirement {
    std::string source;  // "NVIDIA_REQUIRE_CUDA", "CUDA_VERSION (legacy image)", "--require"
    std::string expr;
};
// From an image's environment, as the toolkit collects them: every NVIDIA_REQUIRE_* except
// NVIDIA_REQUIRE_JETPACK; none when NVIDIA_DISABLE_REQUIRE is true (Go's ParseBool); for a
// legacy image (CUDA_VERSION set, NVIDIA_REQUIRE_CUDA not) "cuda>=MAJOR.MINOR".
std::vector<Requirement> collect_requirements(const std::map<std::string, std::string>& env);
bool require_disabled(const std::map<std::string, std::string>& env);

}  // namespace gpubox::preflight
