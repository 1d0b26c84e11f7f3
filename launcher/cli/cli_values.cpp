// The command line's value parsers (launcher/cli/cli.hpp): pure, each table-tested in
// tests/unit/test_cli.cpp. The option tables that call them are in cli.cpp.
#include "launcher/cli/cli_values.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "common/error.hpp"
#include "common/text.hpp"
#include "gpu/gpu_spec.hpp"

namespace gpubox::launcher {

double parse_seconds(const std::string& text, const std::string& what) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || *end || !(v > 0) || v > 1e7)
        throw UsageError(cat(what, ": expected a positive number of seconds, got ", quote(text)));
    return v;
}

std::uint64_t parse_count(const std::string& text, const std::string& what) {
    if (text.empty() || text.size() > 9 ||
        text.find_first_not_of("0123456789") != std::string::npos || std::stoull(text) == 0)
        throw UsageError(cat(what, ": expected a positive integer, got ", quote(text)));
    return std::stoull(text);
}

std::string find_meta_path(const std::vector<std::string>& args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--") break;
        if (args[i] == "--meta" && i + 1 < args.size()) return args[i + 1];
        if (starts_with(args[i], "--meta=")) return args[i].substr(7);
    }
    return {};
}

std::uint64_t parse_size(const std::string& text, const std::string& what) {
    std::size_t i = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) ++i;
    if (i == 0 || i > 15)
        throw UsageError(cat(what, ": invalid size ", quote(text), " (e.g. 4096B, 64K, 256M, 2G)"));
    std::uint64_t n = std::stoull(text.substr(0, i));
    std::string suffix = text.substr(i);
    std::uint64_t mult = 1;
    // A bare number is an error, not bytes: `--memory-limit 256` meant 256M far more often.
    if (suffix.empty())
        throw UsageError(
            cat(what, " ", text, ": no unit; did you mean ", text, "M? (units: B, K, M, G)"));
    if (suffix == "B") mult = 1;
    else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = 1ULL << 10;
    else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = 1ULL << 20;
    else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = 1ULL << 30;
    else
        throw UsageError(cat(what, ": invalid size ", quote(text), " (e.g. 4096B, 64K, 256M, 2G)"));
    if (n == 0) throw UsageError(cat(what, ": size must be positive"));
    return n * mult;
}

std::pair<std::string, std::string> parse_bind_spec(const std::string& spec,
                                                    const std::string& what) {
    auto pos = spec.find(':');
    std::string src = spec.substr(0, pos);
    std::string dst = pos == std::string::npos ? src : spec.substr(pos + 1);
    if (src.empty() || dst.empty() || dst.find(':') != std::string::npos)
        throw UsageError(cat(what, ": expected SRC:DST, got ", quote(spec)));
    if (src.find('\0') != std::string::npos) throw UsageError(cat(what, ": path contains NUL"));
    return {src, dst};
}

std::pair<std::string, std::string> parse_env_assignment(const std::string& text,
                                                         const std::string& what) {
    auto pos = text.find('=');
    if (pos == 0 || pos == std::string::npos)
        throw UsageError(cat(what, ": expected NAME=VALUE, got ", quote(text)));
    std::string name = text.substr(0, pos);
    bool ok = !std::isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!ok) throw UsageError(cat(what, ": invalid variable name ", quote(name)));
    return {name, text.substr(pos + 1)};
}

std::vector<std::pair<std::string, std::string>> parse_env_file(const std::string& content,
                                                                const std::string& path) {
    std::vector<std::pair<std::string, std::string>> out;
    int n = 0;
    for (std::string_view each : split_lines(content)) {
        std::string line(each);
        ++n;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        auto first = line.find_first_not_of(" \t");
        if (first == std::string::npos || line[first] == '#') continue;
        out.push_back(
            parse_env_assignment(line.substr(first), cat("--env-file ", quote(path), " line ", n)));
    }
    return out;
}

gpu::GpuSpec merge_gpu_specs(const gpu::GpuSpec& a, const gpu::GpuSpec& b) {
    using K = gpu::GpuSpec::Kind;
    const std::string before = gpu::to_string(a), added = gpu::to_string(b);
    if (a.kind == K::none || b.kind == K::none)
        throw UsageError(cat("run: --gpu ", a.kind == K::none ? before : added,
                             " contradicts --gpu ", a.kind == K::none ? added : before));
    // slurm, env and auto name GPUs that only exist at run time: nothing to take the union with.
    for (const auto* x : {&a, &b})
        if (x->kind != K::all && x->kind != K::list)
            throw UsageError(
                cat("run: --gpu ", before, " and --gpu ", added, " cannot be combined (give one)"));
    if (a.kind == K::all || b.kind == K::all) return a.kind == K::all ? a : b;
    gpu::GpuSpec merged = a;
    for (const std::string& x : b.items)
        if (std::find(merged.items.begin(), merged.items.end(), x) == merged.items.end())
            merged.items.push_back(x);
    return merged;
}

namespace {

constexpr std::pair<MetaFormat, std::string_view> kMetaFormats[] = {
    {MetaFormat::json, "json"},
    {MetaFormat::isolate, "isolate"},
};

}  // namespace

std::string_view to_string(MetaFormat format) {
    for (const auto& [f, name] : kMetaFormats)
        if (f == format) return name;
    return "?";
}

MetaFormat parse_meta_format(const std::string& text) {
    for (const auto& [f, name] : kMetaFormats)
        if (name == text) return f;
    throw UsageError(cat("--meta-format: expected json or isolate, got ", quote(text)));
}

}  // namespace gpubox::launcher
