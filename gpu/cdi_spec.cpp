#include "gpu/cdi_spec.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "common/unique_fd.hpp"

namespace gpubox::cdi {
namespace {

using nlohmann::json;

constexpr std::size_t kMaxSpecBytes = 4 << 20;

// YAML as JSON: a plain scalar that reads as a number, a boolean or null is one, as the
// library's YAML decoder gives it to its JSON-tagged structs; a quoted one stays a string.
// Read by libyaml, the reference C parser (PyYAML's): a C++ YAML library brought iostreams
// into the static binary, whose set-up every gpubox process paid (~0.5 ms) for the few runs
// that read a CDI spec. Its document keeps an alias as a second reference to one node; each is
// converted again here, so the conversions are counted (an alias "billion laughs" stops).
class YamlToJson {
public:
    explicit YamlToJson(yaml_document_t& doc) : doc_(doc) {}

    json convert(int id, int depth = 0) {
        if (depth > 64) throw std::runtime_error("nested too deeply");
        if (++converted_ > kMaxNodes)
            throw std::runtime_error(cat("its aliases expand past ", kMaxNodes, " nodes"));
        const yaml_node_t* n = yaml_document_get_node(&doc_, id);
        if (!n) throw std::runtime_error("a node the document does not hold");
        switch (n->type) {
            case YAML_SEQUENCE_NODE: {
                json a = json::array();
                for (const yaml_node_item_t* i = n->data.sequence.items.start;
                     i < n->data.sequence.items.top; ++i)
                    a.push_back(convert(*i, depth + 1));
                return a;
            }
            case YAML_MAPPING_NODE: {
                json o = json::object();
                for (const yaml_node_pair_t* p = n->data.mapping.pairs.start;
                     p < n->data.mapping.pairs.top; ++p) {
                    const yaml_node_t* key = yaml_document_get_node(&doc_, p->key);
                    if (!key || key->type != YAML_SCALAR_NODE)
                        throw std::runtime_error("a mapping key that is not a scalar");
                    o[text_of(key)] = convert(p->value, depth + 1);
                }
                return o;
            }
            case YAML_SCALAR_NODE: return scalar(n);
            case YAML_NO_NODE: break;
        }
        return nullptr;
    }

private:
    static constexpr long kMaxNodes = 1 << 20;

    static std::string text_of(const yaml_node_t* n) {
        return {reinterpret_cast<const char*>(n->data.scalar.value), n->data.scalar.length};
    }

    static json scalar(const yaml_node_t* n) {
        const std::string s = text_of(n);
        if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return s;  // quoted or a block
        if (s == "true" || s == "false") return s == "true";
        if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return nullptr;
        if (s.size() < 19 &&
            std::all_of(s.begin() + (s[0] == '-' ? 1 : 0), s.end(),
                        [](char c) { return c >= '0' && c <= '9'; }) &&
            s != "-")
            return std::stoll(s);
        return s;
    }

    yaml_document_t& doc_;
    long converted_ = 0;
};

// The first document of `text` (an empty stream: null), or why libyaml refused it.
json from_yaml(const std::string& text) {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) throw std::runtime_error("libyaml: out of memory");
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(text.data()),
                                 text.size());
    yaml_document_t doc;
    if (!yaml_parser_load(&parser, &doc)) {
        const std::string why =
            cat("line ", parser.problem_mark.line + 1, ", column ", parser.problem_mark.column + 1,
                ": ", parser.problem ? parser.problem : "not YAML",
                parser.context ? cat(" ", parser.context) : "");
        yaml_parser_delete(&parser);
        throw std::runtime_error(why);
    }
    yaml_parser_delete(&parser);
    try {
        json j = yaml_document_get_root_node(&doc) ? YamlToJson(doc).convert(1) : json(nullptr);
        yaml_document_delete(&doc);
        return j;
    } catch (...) {
        yaml_document_delete(&doc);
        throw;
    }
}

json load(const std::string& text) {
    const auto first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') return json::parse(text);
    return from_yaml(text);
}

struct Reader {
    const std::string& path;

    [[noreturn]] void bad(const std::string& where, const std::string& what) const {
        throw PlanError(cat("CDI spec ", quote(path), ": ", where, ": ", what));
    }
    std::string str(const json& o, const char* key, const std::string& where) const {
        if (!o.contains(key) || o[key].is_null()) return "";
        if (!o[key].is_string()) bad(cat(where, key), "expected a string");
        return o[key].get<std::string>();
    }
    std::vector<std::string> strs(const json& o, const char* key, const std::string& where) const {
        std::vector<std::string> out;
        if (!o.contains(key) || o[key].is_null()) return out;
        if (!o[key].is_array()) bad(cat(where, key), "expected a list");
        for (const json& x : o[key]) {
            if (!x.is_string()) bad(cat(where, key), "expected a list of strings");
            out.push_back(x.get<std::string>());
        }
        return out;
    }
    template <typename T>
    std::optional<T> num(const json& o, const char* key, const std::string& where) const {
        if (!o.contains(key) || o[key].is_null()) return std::nullopt;
        if (!o[key].is_number_integer()) bad(cat(where, key), "expected an integer");
        const auto v = o[key].get<std::int64_t>();
        if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
            v > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
            bad(cat(where, key), "out of range");
        return static_cast<T>(v);
    }
    const json& list(const json& o, const char* key, const std::string& where) const {
        static const json none = json::array();
        if (!o.contains(key) || o[key].is_null()) return none;
        if (!o[key].is_array()) bad(cat(where, key), "expected a list");
        return o[key];
    }
    void object(const json& o, const std::string& where) const {
        if (!o.is_object()) bad(where, "expected a mapping");
    }

    Edits edits(const json& parent, const std::string& where) const {
        Edits e;
        if (!parent.contains("containerEdits") || parent["containerEdits"].is_null()) return e;
        const json& o = parent["containerEdits"];
        const std::string at = where + "containerEdits.";
        object(o, at);
        e.env = strs(o, "env", at);
        for (const json& d : list(o, "deviceNodes", at)) {
            object(d, at + "deviceNodes");
            const std::string w = at + "deviceNodes[].";
            e.device_nodes.push_back(
                {str(d, "path", w), str(d, "hostPath", w), str(d, "type", w),
                 str(d, "permissions", w), num<std::int64_t>(d, "major", w),
                 num<std::int64_t>(d, "minor", w), num<std::uint32_t>(d, "fileMode", w),
                 num<std::uint32_t>(d, "uid", w), num<std::uint32_t>(d, "gid", w)});
        }
        for (const json& m : list(o, "mounts", at)) {
            object(m, at + "mounts");
            const std::string w = at + "mounts[].";
            e.mounts.push_back({str(m, "hostPath", w), str(m, "containerPath", w),
                                str(m, "type", w), strs(m, "options", w)});
        }
        for (const json& h : list(o, "hooks", at)) {
            object(h, at + "hooks");
            const std::string w = at + "hooks[].";
            e.hooks.push_back({str(h, "hookName", w), str(h, "path", w), strs(h, "args", w),
                               strs(h, "env", w), num<int>(h, "timeout", w)});
        }
        for (const json& g : list(o, "additionalGids", at)) {
            if (!g.is_number_integer() || g.get<std::int64_t>() < 0 ||
                g.get<std::int64_t>() > std::numeric_limits<std::uint32_t>::max())
                bad(at + "additionalGids", "expected a list of gids");
            e.additional_gids.push_back(g.get<std::uint32_t>());
        }
        if (o.contains("intelRdt") && !o["intelRdt"].is_null()) {
            e.intel_rdt = true;
            const json& r = o["intelRdt"];
            e.intel_rdt_v110 =
                r.is_object() && ((r.contains("schemata") && !r["schemata"].is_null()) ||
                                  r.value("enableMonitoring", false));
        }
        e.net_devices = !list(o, "netDevices", at).empty();
        return e;
    }
};

bool has_annotations(const json& o) {
    return o.contains("annotations") && o["annotations"].is_object() && !o["annotations"].empty();
}

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_alnum(char c) { return is_letter(c) || (c >= '0' && c <= '9'); }

// Semantic versions of the form the library knows: "0.5.0" (a leading v is allowed).
std::vector<int> version_parts(std::string v) {
    if (!v.empty() && v[0] == 'v') v.erase(0, 1);
    std::vector<int> out;
    std::size_t at = 0;
    for (int i = 0; i < 3; ++i) {
        const auto dot = v.find('.', at);
        out.push_back(std::atoi(v.substr(at, dot - at).c_str()));
        if (dot == std::string::npos) break;
        at = dot + 1;
    }
    return out;
}

bool uses(const Spec& s, bool (*f)(const Edits&)) {
    return f(s.edits) || std::any_of(s.devices.begin(), s.devices.end(),
                                     [&](const Device& d) { return f(d.edits); });
}

void validate_edits(const Edits& e, const std::string& where, const std::string& path) {
    const auto bad = [&](const std::string& what) {
        throw PlanError(cat("CDI spec ", quote(path), ": ", where, what));
    };
    const auto env_ok = [](const std::string& kv) {
        return kv.find('=') != std::string::npos && kv[0] != '=';
    };
    for (const std::string& kv : e.env)
        if (!env_ok(kv)) bad(cat("invalid environment variable ", quote(kv)));
    for (const DeviceNode& d : e.device_nodes) {
        if (d.path.empty()) bad("a device node without a path");
        if (!d.type.empty() && d.type != "b" && d.type != "c" && d.type != "u" && d.type != "p")
            bad(cat("device node ", quote(d.path), ": invalid type ", quote(d.type)));
        if (d.permissions.find_first_not_of("rwm") != std::string::npos)
            bad(cat("device node ", quote(d.path), ": invalid permissions ", quote(d.permissions)));
    }
    for (const Mount& m : e.mounts)
        if (m.host_path.empty() || m.container_path.empty())
            bad(cat("a mount without ", m.host_path.empty() ? "hostPath" : "containerPath"));
    static const char* const hook_names[] = {"prestart",       "createRuntime", "createContainer",
                                             "startContainer", "poststart",     "poststop"};
    for (const Hook& h : e.hooks) {
        if (std::find(std::begin(hook_names), std::end(hook_names), h.hook_name) ==
            std::end(hook_names))
            bad(cat("invalid hook name ", quote(h.hook_name)));
        if (h.path.empty()) bad(cat(h.hook_name, " hook without a path"));
        for (const std::string& kv : h.env)
            if (!env_ok(kv))
                bad(cat("hook ", quote(h.path), ": invalid environment variable ", quote(kv)));
    }
}

std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    for (const dirent* e; (e = ::readdir(d)) && out.size() < 4096;)
        if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

}  // namespace

bool Edits::empty() const {
    return env.empty() && device_nodes.empty() && mounts.empty() && hooks.empty() &&
           additional_gids.empty() && !intel_rdt && !net_devices;
}

const std::vector<std::string>& known_versions() {
    static const std::vector<std::string> v = {"0.1.0", "0.2.0", "0.3.0", "0.4.0", "0.5.0",
                                               "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0"};
    return v;
}

Spec parse_spec(const std::string& text, const std::string& path) {
    if (text.size() > kMaxSpecBytes)
        throw PlanError(cat("CDI spec ", quote(path), ": larger than 4 MiB"));
    json j;
    try {
        j = load(text);
    } catch (const std::exception& e) {
        throw PlanError(cat("CDI spec ", quote(path), ": not JSON or YAML: ", e.what()));
    }
    const Reader r{path};
    r.object(j, "the top level");
    Spec s;
    s.path = path;
    s.version = r.str(j, "cdiVersion", "");
    s.kind = r.str(j, "kind", "");
    s.annotations = has_annotations(j);
    s.edits = r.edits(j, "");
    for (const json& d : r.list(j, "devices", "")) {
        r.object(d, "devices[]");
        Device dev;
        dev.name = r.str(d, "name", "devices[].");
        const std::string where = cat("device ", quote(dev.name), ": ");
        dev.annotations = has_annotations(d);
        dev.edits = r.edits(d, where);
        s.devices.push_back(std::move(dev));
    }
    return s;
}

std::string check_vendor_or_class(const std::string& name) {
    if (name.empty()) return "empty name";
    if (!is_letter(name[0])) return cat(quote(name), " should start with a letter");
    for (std::size_t i = 1; i + 1 < name.size(); ++i)
        if (!is_alnum(name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.')
            return cat("invalid character '", name[i], "' in ", quote(name));
    if (!is_alnum(name.back())) return cat(quote(name), " should end with a letter or digit");
    return "";
}

std::string check_device_name(const std::string& name) {
    if (name.empty()) return "empty device name";
    if (!is_alnum(name[0])) return cat(quote(name), " should start with a letter or digit");
    for (std::size_t i = 1; i + 1 < name.size(); ++i)
        if (!is_alnum(name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.' &&
            name[i] != ':')
            return cat("invalid character '", name[i], "' in device name ", quote(name));
    if (!is_alnum(name.back())) return cat(quote(name), " should end with a letter or digit");
    return "";
}

std::optional<QualifiedName> parse_qualified(const std::string& text) {
    const auto slash = text.find('/'), eq = text.find('=');
    if (slash == std::string::npos || eq == std::string::npos || slash > eq || slash == 0 ||
        eq == slash + 1 || eq + 1 == text.size())
        return std::nullopt;
    QualifiedName q{text.substr(0, eq), text.substr(eq + 1)};
    if (!check_vendor_or_class(text.substr(0, slash)).empty() ||
        !check_vendor_or_class(text.substr(slash + 1, eq - slash - 1)).empty() ||
        !check_device_name(q.name).empty())
        return std::nullopt;
    return q;
}

std::string minimum_version(const Spec& s) {
    // Newest first: the first whose features the spec uses decides, as the library decides.
    if (uses(s, [](const Edits& e) { return e.intel_rdt_v110 || e.net_devices; })) return "1.1.0";
    if (uses(s, [](const Edits& e) { return e.intel_rdt || !e.additional_gids.empty(); }))
        return "0.7.0";
    const auto slash = s.kind.find('/');
    if (s.annotations ||
        std::any_of(s.devices.begin(), s.devices.end(),
                    [](const Device& d) { return d.annotations; }) ||
        (slash != std::string::npos && s.kind.find('.', slash) != std::string::npos))
        return "0.6.0";
    if (std::any_of(s.devices.begin(), s.devices.end(),
                    [](const Device& d) { return !d.name.empty() && !is_letter(d.name[0]); }) ||
        uses(s, [](const Edits& e) {
            return std::any_of(e.device_nodes.begin(), e.device_nodes.end(),
                               [](const DeviceNode& n) { return !n.host_path.empty(); });
        }))
        return "0.5.0";
    if (uses(s, [](const Edits& e) {
            return std::any_of(e.mounts.begin(), e.mounts.end(),
                               [](const Mount& m) { return !m.type.empty(); });
        }))
        return "0.4.0";
    return "0.3.0";
}

void validate_spec(const Spec& s) {
    const auto bad = [&](const std::string& what, const std::string& hint = "") {
        throw PlanError(cat("CDI spec ", quote(s.path), ": ", what), hint);
    };
    const auto& known = known_versions();
    std::string v = s.version;
    if (!v.empty() && v[0] == 'v') v.erase(0, 1);
    if (std::find(known.begin(), known.end(), v) == known.end())
        bad(cat("invalid cdiVersion ", quote(s.version)),
            cat("gpubox knows CDI ", known.front(), " to ", known.back()));
    const std::string need = minimum_version(s);
    if (version_parts(need) > version_parts(v))
        bad(cat("cdiVersion ", s.version,
                " is too old for the features it uses: it must be at "
                "least ",
                need));
    const auto slash = s.kind.find('/');
    if (slash == std::string::npos)
        bad(cat("invalid kind ", quote(s.kind), ": expected vendor/class"));
    if (const std::string why = check_vendor_or_class(s.kind.substr(0, slash)); !why.empty())
        bad(cat("invalid vendor in kind ", quote(s.kind), ": ", why));
    if (const std::string why = check_vendor_or_class(s.kind.substr(slash + 1)); !why.empty())
        bad(cat("invalid class in kind ", quote(s.kind), ": ", why));
    validate_edits(s.edits, "", s.path);
    if (s.devices.empty()) bad("no devices");
    std::vector<std::string> seen;
    for (const Device& d : s.devices) {
        if (const std::string why = check_device_name(d.name); !why.empty())
            bad(cat("invalid device name: ", why));
        if (std::find(seen.begin(), seen.end(), d.name) != seen.end())
            bad(cat("device ", quote(d.name), " is defined twice"));
        seen.push_back(d.name);
        if (d.edits.empty()) bad(cat("device ", quote(d.name), " has no edits"));
        validate_edits(d.edits, cat("device ", quote(d.name), ": "), s.path);
    }
}

std::string user_spec_dir() {
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x == '/') return cat(x, "/cdi");
    if (const char* h = std::getenv("HOME"); h && *h == '/') return cat(h, "/.config/cdi");
    return "";
}

std::vector<std::string> spec_dirs(const std::vector<std::string>& given) {
    if (!given.empty()) return given;
    std::vector<std::string> out = {"/etc/cdi", "/var/run/cdi"};
    if (const std::string own = user_spec_dir(); !own.empty()) out.push_back(own);
    return out;
}

SpecSet read_spec_dirs(const std::vector<std::string>& dirs) {
    SpecSet set;
    for (std::size_t i = 0; i < dirs.size(); ++i) {
        int fd = ::open(dirs[i].c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) continue;  // a directory that does not exist offers nothing
        UniqueFd dir(fd);
        for (const std::string& name : names_in(dirs[i])) {
            const auto dot = name.rfind('.');
            const std::string ext = dot == std::string::npos ? "" : name.substr(dot);
            if (ext != ".json" && ext != ".yaml" && ext != ".yml") continue;
            const std::string path = dirs[i] + "/" + name;
            try {
                int f = ::openat(dir.get(), name.c_str(),
                                 O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
                if (f < 0) throw SysError(errno, cat("open(", quote(path), ")"));
                UniqueFd file(f);
                const struct stat st = sys::fstat(f, path);
                if (!S_ISREG(st.st_mode))
                    throw PlanError(cat(quote(path), " is not a regular file"));
                if (static_cast<std::size_t>(st.st_size) > kMaxSpecBytes)
                    throw PlanError(cat("CDI spec ", quote(path), ": larger than 4 MiB"));
                Spec s = parse_spec(sys::read_all(f, path), path);
                validate_spec(s);
                s.priority = static_cast<int>(i);
                set.specs.push_back(std::move(s));
            } catch (...) {
                set.problems.push_back(describe(std::current_exception()));
            }
        }
    }
    return set;
}

Resolved resolve_device(const SpecSet& set, const std::string& qualified, const std::string& flag) {
    const std::optional<QualifiedName> q = parse_qualified(qualified);
    if (!q)
        throw UsageError(
            cat(flag, " ", quote(qualified), ": not a CDI device name (VENDOR/CLASS=NAME)"));
    std::vector<Resolved> hits;
    std::vector<std::string> offered;
    for (const Spec& s : set.specs) {
        if (s.kind != q->kind) continue;
        for (const Device& d : s.devices) {
            offered.push_back(d.name);
            if (d.name == q->name) hits.push_back({&s, &d});
        }
    }
    Resolved best;
    bool conflict = false;
    for (const Resolved& r : hits) {
        if (best.spec && r.spec->priority == best.spec->priority) conflict = true;
        if (!best.spec || r.spec->priority > best.spec->priority) best = r, conflict = false;
    }
    if (conflict)
        throw PlanError(cat(flag, " ", qualified, ": defined by two specs of one directory (",
                            best.spec->path, " and another)"),
                        "remove one (gpubox cdi list shows where each comes from)");
    if (!best.spec) {
        std::sort(offered.begin(), offered.end());
        offered.erase(std::unique(offered.begin(), offered.end()), offered.end());
        std::string why = set.problems.empty() ? "" : cat("; unusable: ", join(set.problems, "; "));
        throw PlanError(cat(flag, " ", qualified, ": no such CDI device; ", q->kind, " offers ",
                            offered.empty() ? "none" : join(offered, ", "), why),
                        "'gpubox cdi list' lists every spec directory's devices; 'gpubox cdi "
                        "generate' writes one for this host's GPUs");
    }
    return best;
}

}  // namespace gpubox::cdi
