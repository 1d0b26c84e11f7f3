#include "preflight/require.hpp"

#include <strings.h>

#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"
#include "preflight/version.hpp"

namespace gpubox::preflight {
namespace {

enum class Cmp { eq, ne, lt, le, gt, ge };
struct Op {
    const char* text;
    Cmp cmp;
};
constexpr Op kOps[] = {{"=", Cmp::eq},  {"!=", Cmp::ne}, {"<", Cmp::lt},
                       {"<=", Cmp::le}, {">", Cmp::gt},  {">=", Cmp::ge}};

struct Condition {
    std::string property, value;
    Cmp cmp = Cmp::eq;
};

// "cuda>=12.4" -> {cuda, >=, 12.4}; nullopt where dsl.c's evaluate_rule returns -1 before
// looking at the property: no name, no operator, an operator run that is none of the six
// ("==", "=>"), no value.
std::optional<Condition> split(const std::string& text) {
    const std::size_t name_end = text.find_first_of("<>=!");
    if (name_end == 0 || name_end == std::string::npos) return std::nullopt;
    std::size_t op_end = text.find_first_not_of("<>=!", name_end);
    if (op_end == std::string::npos) op_end = text.size();
    const std::string op = text.substr(name_end, op_end - name_end);
    for (const Op& o : kOps)
        if (op == o.text && op_end < text.size())
            return Condition{text.substr(0, name_end), text.substr(op_end), o.cmp};
    return std::nullopt;
}

std::optional<bool> holds(int c, Cmp cmp) {
    switch (cmp) {
        case Cmp::eq: return c == 0;
        case Cmp::ne: return c != 0;
        case Cmp::lt: return c < 0;
        case Cmp::le: return c <= 0;
        case Cmp::gt: return c > 0;
        case Cmp::ge: return c >= 0;
    }
    return std::nullopt;
}

std::optional<bool> version_rule(const std::string& have, const Condition& c) {
    if (have.empty()) return true;  // the toolkit: unknown counts as met
    const auto r = compare_versions(have, c.value);
    if (!r) return std::nullopt;
    return holds(*r, c.cmp);
}

// true, false, or nullopt for "invalid expression".
std::optional<bool> evaluate(const Condition& c, const RequireFacts& f) {
    const char* p = c.property.c_str();
    if (!::strcasecmp(p, "cuda")) return version_rule(f.cuda, c);
    if (!::strcasecmp(p, "driver")) return version_rule(f.driver, c);
    if (!::strcasecmp(p, "arch")) return f.has_device ? version_rule(f.arch, c) : true;
    if (!::strcasecmp(p, "brand")) {
        if (!f.has_device || f.brand.empty()) return true;
        if (c.cmp != Cmp::eq && c.cmp != Cmp::ne) return std::nullopt;
        return (::strcasecmp(f.brand.c_str(), c.value.c_str()) == 0) == (c.cmp == Cmp::eq);
    }
    return std::nullopt;
}

std::vector<std::string> split_on(const std::string& s, char sep) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i <= s.size();) {
        std::size_t j = s.find(sep, i);
        if (j == std::string::npos) j = s.size();
        if (j > i) out.push_back(s.substr(i, j - i));  // dsl.c skips empty pieces
        i = j + 1;
    }
    return out;
}

}  // namespace

// dsl_evaluate: alternatives in order; within one, conditions in order, stopping at the first
// false. The first alternative that holds ends it; an invalid condition that is reached fails
// the whole expression, one that is never reached does not.
Evaluation evaluate_requirement(const std::string& expr, const RequireFacts& facts) {
    bool ok = true;
    for (const std::string& alternative : split_on(expr, ' ')) {
        ok = true;
        for (const std::string& text : split_on(alternative, ',')) {
            const auto c = split(text);
            const auto r = c ? evaluate(*c, facts) : std::nullopt;
            if (!r) return {Outcome::invalid, text};
            if (!*r) {
                ok = false;
                break;
            }
        }
        if (ok) return {};
    }
    if (ok) return {};
    const auto alternatives = split_on(expr, ' ');
    return {Outcome::unsatisfied, alternatives.empty() ? expr : alternatives.front()};
}

void validate_requirement(const std::string& expr, const std::string& what) {
    if (split_on(expr, ' ').empty()) throw UsageError(cat(what, ": empty requirement"));
    for (const std::string& alternative : split_on(expr, ' '))
        for (const std::string& text : split_on(alternative, ',')) {
            const auto c = split(text);
            // Every property known, every value comparable: evaluate against facts that make
            // each rule look at its value.
            const RequireFacts probe{"1.0", "1.0", "1.0", "tesla", true};
            if (!c || !evaluate(*c, probe))
                throw UsageError(cat(what, ": invalid condition ", quote(text),
                                     " (PROPERTY OP VALUE: cuda, driver, arch with = != < <= > >= "
                                     "and a version; brand with = or !=)"));
        }
}

bool require_disabled(const std::map<std::string, std::string>& env) {
    const auto it = env.find("NVIDIA_DISABLE_REQUIRE");
    if (it == env.end()) return false;
    static const char* const kTrue[] = {"1", "t", "T", "TRUE", "true", "True"};
    for (const char* t : kTrue)
        if (it->second == t) return true;
    return false;
}

std::vector<Requirement> collect_requirements(const std::map<std::string, std::string>& env) {
    std::vector<Requirement> out;
    if (require_disabled(env)) return out;
    for (const auto& [name, value] : env)
        if (starts_with(name, "NVIDIA_REQUIRE_") && !starts_with(name, "NVIDIA_REQUIRE_JETPACK"))
            out.push_back({name, value});
    const auto legacy = env.find("CUDA_VERSION");
    if (legacy != env.end() && !env.count("NVIDIA_REQUIRE_CUDA"))
        if (const auto mm = major_minor(legacy->second))
            out.push_back({"CUDA_VERSION (a legacy image)", "cuda>=" + *mm});
    return out;
}

}  // namespace gpubox::preflight
