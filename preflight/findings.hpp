#pragma once
// The preflight's judgement: facts in, one finding per thing the image needs. Pure.
#include <string>
#include <vector>

#include "preflight/compat.hpp"
#include "preflight/facts.hpp"
#include "preflight/require.hpp"

namespace gpubox::preflight {

enum class Verdict {
    fits,   // as needed
    note,   // fits, with something worth knowing (PTX JIT, minor-version compatibility)
    warn,   // fits by gpubox's reading, though NVIDIA's toolkit would refuse it
    fails,  // will not run here
};
const char* to_string(Verdict v);

struct Finding {
    std::string check;  // "require", "cuda", "compat", "arch", "isa", "driver"
    Verdict verdict = Verdict::fits;
    std::string needs;   // what the image needs
    std::string has;     // what the node has
    std::string file;    // which file says what the image needs
    std::string detail;  // why, and what to do
};

struct Report {
    CompatDecision compat;
    std::vector<Finding> findings;
    bool fits() const;  // no finding fails
};

Report plan_findings(const ImageFacts& image, const HostFacts& host,
                     const std::vector<Requirement>& requirements);

// The objects' part (objects.cpp): each scanned CUDA object's fat binary against each GPU's
// compute capability, and the x86-64 level each ELF file declares against the host CPU's.
void add_object_findings(const ImageFacts& image, const HostFacts& host, Report& r);

// One line per finding: "FAIL cuda: needs ... [file]; node: ...; detail".
std::string render_text(const Report& r);
std::string render_json(const Report& r);
// The run-time warning: one line per failing finding, without the verdict word.
std::string render_line(const Finding& f);

}  // namespace gpubox::preflight
