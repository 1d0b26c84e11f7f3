#include "image/pull.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/oci.hpp"
#include "image/reference.hpp"
#include "image/squashfs.hpp"
#include "image/store.hpp"
#include "image/store_dir.hpp"
#include "image/tool.hpp"
#include "image/tool_error.hpp"
#include "image/tree.hpp"

namespace gpubox::image {
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

// The temp directory of one pull, removed whatever happens (a SIGKILLed pull's is removed by
// the next pull: its name carries the pid).
class TempTree {
public:
    explicit TempTree(fs::path p) : path_(std::move(p)) {}
    ~TempTree() {
        try {
            remove_tree(path_);
        } catch (...) {}
    }
    const fs::path& path() const { return path_; }

private:
    fs::path path_;
};

std::string base64(const std::string& in) {
    static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    std::size_t i = 0;
    for (; i + 2 < in.size(); i += 3) {
        const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                           (static_cast<unsigned char>(in[i + 1]) << 8) |
                           static_cast<unsigned char>(in[i + 2]);
        out += t[v >> 18], out += t[(v >> 12) & 63], out += t[(v >> 6) & 63], out += t[v & 63];
    }
    if (i < in.size()) {
        const unsigned v = (static_cast<unsigned char>(in[i]) << 16) |
                           (i + 1 < in.size() ? static_cast<unsigned char>(in[i + 1]) << 8 : 0);
        out += t[v >> 18], out += t[(v >> 12) & 63];
        out += i + 1 < in.size() ? t[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

// --creds go to skopeo in an auth file (mode 0600, in the pull's own temp directory), not on its
// command line, where every user of the host could read them in /proc/PID/cmdline.
std::string write_creds_file(const fs::path& dir, const Source& s, const std::string& creds) {
    const Json j = {{"auths", {{s.host, {{"auth", base64(creds)}}}}}};
    const std::string path = (dir / "auth.json").string();
    UniqueFd f = sys::open_at(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    sys::write_all(f.get(), j.dump(), path);
    return path;
}

// Only what tells skopeo where the user's credentials, certificates and proxies are.
std::vector<std::string> skopeo_env(const std::map<std::string, std::string>& env,
                                    const fs::path& tmp) {
    std::vector<std::string> out = {"PATH=/usr/bin:/bin", "TMPDIR=" + tmp.string()};
    for (const char* k :
         {"HOME", "XDG_RUNTIME_DIR", "XDG_CONFIG_HOME", "REGISTRY_AUTH_FILE", "DOCKER_CONFIG",
          "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"})
        if (const auto it = env.find(k); it != env.end() && !it->second.empty())
            out.push_back(cat(k, "=", it->second));
    return out;
}

void check_request(const PullRequest& r, const Source& s) {
    if (s.kind != Source::Kind::docker &&
        (r.insecure || !r.creds.empty() || !r.authfile.empty() || !r.cert_dir.empty()))
        throw UsageError(
            cat("pull ", r.source,
                ": --insecure, --creds, --authfile and --cert-dir are for docker:// only"));
    if (!r.creds.empty() && (r.creds.find(':') == std::string::npos || r.creds[0] == ':'))
        throw UsageError(cat("pull: --creds expects USER:PASSWORD"));
    if (!r.creds.empty() && !r.authfile.empty())
        throw UsageError("pull: --creds and --authfile contradict each other");
    if (!r.platform.empty()) {
        const auto slash = r.platform.find('/');
        if (slash == std::string::npos || slash == 0 || slash + 1 == r.platform.size())
            throw UsageError(
                cat("pull: --platform expects OS/ARCH[/VARIANT], got ", quote(r.platform)));
    }
}

}  // namespace

std::vector<std::string> plan_skopeo_args(const PullRequest& r, const std::string& source,
                                          const std::string& layout, const std::string& authfile,
                                          bool progress) {
    std::vector<std::string> a = {"skopeo", "copy", "--remove-signatures"};
    if (!progress) a.push_back("--quiet");
    if (starts_with(source, "docker://")) {
        a.push_back(r.insecure ? "--src-tls-verify=false" : "--src-tls-verify=true");
        if (!r.cert_dir.empty()) a.insert(a.end(), {"--src-cert-dir", r.cert_dir});
        if (!authfile.empty()) a.insert(a.end(), {"--src-authfile", authfile});
    }
    if (!r.platform.empty()) {
        const auto s1 = r.platform.find('/'), s2 = r.platform.find('/', s1 + 1);
        a.insert(a.end(), {"--override-os", r.platform.substr(0, s1), "--override-arch",
                           r.platform.substr(
                               s1 + 1, s2 == std::string::npos ? std::string::npos : s2 - s1 - 1)});
        if (s2 != std::string::npos)
            a.insert(a.end(), {"--override-variant", r.platform.substr(s2 + 1)});
    }
    a.push_back(source);
    a.push_back("oci:" + layout + ":gpubox");
    return a;
}

std::vector<std::string> plan_inspect_args(const PullRequest& r, const std::string& source,
                                           const std::string& authfile) {
    std::vector<std::string> a = {"skopeo", "inspect", "--raw",
                                  r.insecure ? "--tls-verify=false" : "--tls-verify=true"};
    if (!r.cert_dir.empty()) a.insert(a.end(), {"--cert-dir", r.cert_dir});
    if (!authfile.empty()) a.insert(a.end(), {"--authfile", authfile});
    a.push_back(source);
    return a;
}

std::string render_summary(const PullResult& r) {
    if (r.reused && r.kept_tree)
        return cat("pull: ", r.name, ": ", r.digest.substr(0, 19),
                   " is stored already, as a tree: reused it, not made a squashfs file (for one: "
                   "gpubox export ",
                   r.name, " FILE.sqsh; or gpubox rmi ", r.name, ", then pull --squashfs again)");
    if (r.reused)
        return cat("pull: ", r.name, ": ", r.digest.substr(0, 19), " is stored already: reused it");
    std::string s = cat("pulled ", r.name, " (", r.digest.substr(0, 19), "): ", r.layers,
                        r.layers == 1 ? " layer, " : " layers, ", r.bytes_read, " bytes read, ",
                        r.size, " bytes unpacked; dropped ", r.devices, " device nodes, ", r.setid,
                        " setuid/setgid bits, ", r.caps, " file capabilities");
    if (r.unsafe) s += cat("; skipped ", r.unsafe, " unsafe entries");
    return s;
}

namespace {

void write_new(const fs::path& path, const std::string& text) {
    UniqueFd f =
        sys::open_at(AT_FDCWD, path.string(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
    sys::write_all(f.get(), text, path.string());
}

[[noreturn]] void fail(const PullRequest& r, const std::string& reason) {
    throw PlanError(cat("pull ", r.source, ": ", reason));
}

std::string authfile_for(const PullRequest& r, const Source& s, const fs::path& tmp) {
    const fs::path written = tmp / "auth.json";
    if (r.creds.empty()) return r.authfile;
    return ::access(written.c_str(), F_OK) == 0 ? written.string()
                                                : write_creds_file(tmp, s, r.creds);
}

// The digest of the manifest a docker:// pull would store, asked of the registry alone (the
// manifest, no blob), so that a re-pull of a stored image downloads nothing again: for an
// index, its entry for the platform (the copy's rule). "" when it cannot be told: then skopeo
// copy runs as before, and says what is wrong, if anything is.
// `manifest`: the image manifest itself, where it could be had (the progress's layers).
std::string registry_digest(const PullRequest& r, const Source& s, const fs::path& tmp,
                            const std::map<std::string, std::string>& env, std::string& manifest) {
    const auto inspect = [&](const std::string& ref) {
        const auto args = plan_inspect_args(r, ref, authfile_for(r, s, tmp));
        ToolResult raw = run_tool({find_skopeo()}, args, skopeo_env(env, tmp), false);
        if (!raw.ok()) log::debug(cat("skopeo inspect ", raw.failure(), ": ", raw.err));
        return raw;
    };
    const ToolResult raw = inspect(s.text);
    if (!raw.ok()) return "";
    if (is_index(raw.out)) {
        const auto s1 = r.platform.find('/'), s2 = r.platform.find('/', s1 + 1);
        const std::string picked =
            r.platform.empty()
                ? pick_platform(raw.out, "linux", host_architecture(), "")
                : pick_platform(
                      raw.out, r.platform.substr(0, s1),
                      r.platform.substr(s1 + 1, s2 == std::string::npos ? s2 : s2 - s1 - 1),
                      s2 == std::string::npos ? "" : r.platform.substr(s2 + 1));
        if (!picked.empty())
            if (const ToolResult m = inspect(cat("docker://", s.host, "/", s.repo, "@", picked));
                m.ok())
                manifest = m.out;
        return picked;
    }
    manifest = raw.out;
    // The digest of these very bytes; gpubox itself has no sha256, skopeo has.
    write_new(tmp / "manifest.json", raw.out);
    const ToolResult d =
        run_tool({find_skopeo()}, {"skopeo", "manifest-digest", (tmp / "manifest.json").string()},
                 skopeo_env(env, tmp), false);
    const std::string digest = d.out.substr(0, d.out.find_last_not_of(" \n") + 1);
    return d.ok() && valid_digest(digest) ? digest : "";
}

// The stored digest for what the registry names: the same digest, or one a name records the
// registry's digest for (skopeo converts a Docker-format manifest to OCI: a digest of its own).
std::string stored_for(const fs::path& store, const std::string& remote) {
    struct stat st {};
    if (remote.empty()) return "";
    if (::lstat((store / "blobs/sha256" / remote.substr(7)).c_str(), &st) == 0) return remote;
    for (const Stored& n : list(store))
        if (n.remote == remote && fs::exists(n.rootfs)) return n.digest;
    return "";
}

// `pinned`: the registry's digest asked for before, copied by digest, so that what is stored
// is what was asked about even if the tag moves meanwhile.
// skopeo runs --quiet: the progress is gpubox's own, from the layout it fills (`manifest`: the
// image's, where the registry gave it; none is shown without).
void fetch(const PullRequest& r, const Source& s, const fs::path& tmp,
           const std::map<std::string, std::string>& env, Progress progress,
           const std::string& pinned, const std::string& manifest, const fs::path& store) {
    const std::string skopeo = find_skopeo();
    const std::string authfile = authfile_for(r, s, tmp);
    const std::string source = pinned.empty() ? skopeo_source(s, fs::current_path().string())
                                              : cat("docker://", s.host, "/", s.repo, "@", pinned);
    const auto args = plan_skopeo_args(r, source, (tmp / "layout").string(), authfile, false);
    std::optional<DownloadProgress> shown;
    try {
        if (!manifest.empty() && progress != Progress::none) {
            const Manifest m = parse_manifest(manifest);
            shown.emplace(m, tmp / "layout", progress, 2);
            for (const Descriptor& d : m.layers)
                if (has_layers(store, {d.digest.substr(7)})) shown->stored(d.digest);
        }
    } catch (const std::exception& e) {
        log::debug(cat("no download progress: ", e.what()));
    }
    const ToolResult res = run_tool({skopeo}, args, skopeo_env(env, tmp), false, false, [&] {
        if (shown) shown->tick();
    });
    if (res.ok() && shown) shown->finish();
    if (!res.ok()) {
        log::debug(cat("skopeo ", res.failure(), ": ", res.err));
        fail(r, explain_pull_failure(s, res.err.empty() ? res.failure() : res.err));
    }
}

// Layers are stored once, each a tree of its own that runs stack with overlayfs in their user
// namespace: where the kernel lets an ordinary user mount one there (5.11), unless --flat. A
// tar: is one tree. How many layers a run can stack: 6.5 takes them one by one (overlayfs's
// own limit is 500; images have at most 127, docker's); before, one lowerdir string of
// "/proc/self/fd/N" paths, which fsconfig caps at 255 bytes. An image of more is one tree.
bool stack_layers(const PullRequest& r, const Source& s) {
    return !r.flat && !r.squashfs && s.kind != Source::Kind::tar && sys::kernel_at_least(5, 11);
}
std::size_t max_stacked() { return sys::kernel_at_least(6, 5) ? 128 : 12; }

// A layered image's info.json, and each new layer's (the helper's sizes): the image's size is
// all its layers', the new and those stored already.
Json layered_info(const fs::path& store, const fs::path& stage, const Json& j, std::uint64_t n) {
    const Json sizes = j.value("layer_sizes", Json::object());
    std::uint64_t total = 0;
    for (const std::string& hex : j.value("layer_digests", std::vector<std::string>{})) {
        if (sizes.contains(hex)) {
            const std::uint64_t size = sizes[hex].get<std::uint64_t>();
            write_new(stage / hex / "info.json", Json{{"size_bytes", size}}.dump() + "\n");
            total += size;
        } else {
            total += layer_size(store, hex);
        }
    }
    return {{"size_bytes", total}, {"layers", n}, {"layer_digests", j["layer_digests"]}};
}

// --squashfs: the unpacked tree becomes DIR/rootfs.sqsh (mksquashfs), rootfs stays, empty.
Json to_squashfs(const fs::path& dir, const PullRequest& r) {
    const fs::path tree = dir / "rootfs";
    try {
        const UniqueFd fd = sys::open_at(AT_FDCWD, tree.string(), O_PATH | O_DIRECTORY);
        make_squashfs(fd.get(), "the pulled image", (dir / "rootfs.sqsh").string());
    } catch (const PlanError& e) {
        fail(r, e.what());
    }
    remove_tree(tree);
    sys::mkdir_at(AT_FDCWD, tree.string(), 0755);
    struct stat st {};
    if (::stat((dir / "rootfs.sqsh").c_str(), &st) != 0)
        sys::fail(cat("stat(", quote((dir / "rootfs.sqsh").string()), ")"), errno);
    return {
        {"size_bytes", static_cast<std::uint64_t>(st.st_size)}, {"layers", 1}, {"squashfs", true}};
}

void unpack(const fs::path& store, const PullRequest& r, const Source& s, const fs::path& tmp,
            const fs::path& dir, bool progress, PullResult& out) {  // progress: on a terminal
    sys::mkdir_at(AT_FDCWD, dir.string(), 0755);
    sys::mkdir_at(AT_FDCWD, (dir / "rootfs").string(), 0755);
    std::vector<std::string> args = {"gpubox-unpack", "--max-size", std::to_string(r.max_size)};
    if (progress) args.push_back("--progress");
    if (s.kind == Source::Kind::tar) {
        args.insert(args.end(),
                    {"--tar", s.path[0] == '/' ? s.path : (fs::current_path() / s.path).string()});
    } else {
        args.insert(args.end(), {"--layout", (tmp / "layout").string()});
    }
    if (stack_layers(r, s)) {
        sys::mkdir_at(AT_FDCWD, (tmp / "layers").string(), 0700);
        args.insert(args.end(), {"--layers", (tmp / "layers").string(), "--stored",
                                 (store / "layers/sha256").string(), "--max-stacked",
                                 std::to_string(max_stacked())});
    }
    args.push_back((dir / "rootfs").string());
    const Program helper = find_unpack_helper();
    const ToolResult res = run_tool(helper, args, {}, false, progress);
    if (!res.ok())
        fail(r,
             explain_pull_failure(s, res.err.empty() ? "gpubox-unpack " + res.failure() : res.err));
    const Json j = Json::parse(res.out, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !valid_digest(j.value("digest", "")))
        fail(r, "gpubox-unpack gave no summary");
    out.digest = j["digest"];
    const std::string config = j.value("config", "");
    const std::pair<const char*, std::uint64_t*> fields[] = {
        {"layers", &out.layers},   {"bytes_read", &out.bytes_read}, {"size", &out.size},
        {"devices", &out.devices}, {"setid", &out.setid},           {"caps", &out.caps},
        {"unsafe", &out.unsafe}};
    for (const auto& [key, field] : fields) *field = j.value(key, std::uint64_t{0});
    write_new(dir / "config.json", config);
    Json info = {{"size_bytes", out.size}, {"layers", out.layers}};
    if (j.value("layered", false)) {
        info = layered_info(store, tmp / "layers", j, out.layers);
        out.layer_digests = j["layer_digests"].get<std::vector<std::string>>();
        out.layers = out.layer_digests.size();
    }
    if (r.squashfs) info = to_squashfs(dir, r);
    write_new(dir / "info.json", info.dump(2) + "\n");
}

// The digest of the manifest skopeo wrote, to reuse a stored image without unpacking it again.
std::string layout_digest(const fs::path& tmp) {
    try {
        return parse_index(sys::read_file((tmp / "layout/index.json").string())).digest;
    } catch (...) {
        return "";  // gpubox-unpack reports what is wrong with it
    }
}

}  // namespace

namespace {

PullResult pull_into(const fs::path& store, const PullRequest& r,
                     const std::map<std::string, std::string>& env, Progress progress) {
    const Source s = parse_source(r.source);
    check_request(r, s);
    PullResult out;
    out.name = r.name.empty() ? default_name(s) : r.name;
    validate_name(out.name);
    if (s.kind == Source::Kind::tar && ::access(s.path.c_str(), R_OK) != 0)
        fail(r, cat("cannot read ", quote(s.path), ": ", std::strerror(errno)));
    remove_stale_temps(store, false);
    TempTree tmp(make_temp_dir(store, cat("pull-", ::getpid())));
    const auto stored = [&](const std::string& d) {
        struct stat st {};
        return !d.empty() && ::lstat((store / "blobs/sha256" / d.substr(7)).c_str(), &st) == 0;
    };
    std::string manifest;
    const std::string remote =
        s.kind == Source::Kind::docker ? registry_digest(r, s, tmp.path(), env, manifest) : "";
    std::string known = stored_for(store, remote);
    if (known.empty() && s.kind != Source::Kind::tar) {
        fetch(r, s, tmp.path(), env, progress, remote, manifest, store);
        known = layout_digest(tmp.path());
    }
    const fs::path dir = tmp.path() / "image";
    if (stored(known)) {
        out.digest = known, out.reused = true;
    } else {
        unpack(store, r, s, tmp.path(), dir, progress == Progress::terminal, out);
    }
    StoreLock lock(store);
    if (!out.reused) {
        // The layers it found stored must still be (an rmi may have removed their last image).
        commit_layers(store, tmp.path() / "layers");
        if (!has_layers(store, out.layer_digests))
            fail(r,
                 "a layer it reused was removed while this pull ran (by gpubox rmi); pull "
                 "again");
        out.reused = !commit_image(store, dir, out.digest);
    } else if (!stored(out.digest)) {
        fail(r, "the stored image was removed while this pull ran (by gpubox rmi); pull again");
    }
    write_name(store, out.name, out.digest, r.source, static_cast<std::int64_t>(std::time(nullptr)),
               remote);
    struct stat st {};
    out.kept_tree =
        out.reused && r.squashfs &&
        ::lstat((store / "blobs/sha256" / out.digest.substr(7) / "rootfs.sqsh").c_str(), &st) != 0;
    return out;
}

// A failed first pull leaves no store behind: the directories made for it are removed again
// (rmdir: only while empty, so what a concurrent pull put there stays, and so does its lock).
class MadeDirs {
public:
    explicit MadeDirs(const fs::path& store) : store_(store), kept_(store) {
        std::error_code ec;
        while (kept_.has_relative_path() && !fs::exists(kept_, ec)) kept_ = kept_.parent_path();
    }
    ~MadeDirs() {
        if (done || kept_ == store_) return;
        for (const char* sub : {"tmp", "names", "blobs/sha256", "blobs", "layers/sha256", "layers"})
            ::rmdir((store_ / sub).c_str());
        for (fs::path p = store_; p != kept_ && p.has_relative_path(); p = p.parent_path())
            if (::rmdir(p.c_str()) != 0) break;
    }
    MadeDirs(const MadeDirs&) = delete;
    MadeDirs& operator=(const MadeDirs&) = delete;
    bool done = false;

private:
    fs::path store_, kept_;
};

}  // namespace

PullResult pull(const fs::path& store, const PullRequest& r,
                const std::map<std::string, std::string>& env, Progress progress) {
    MadeDirs made(store);
    try {
        const std::optional<StoreDir> dir = open_store(store, true);  // made where missing
        PullResult out = pull_into(dir.value().path, r, env, progress);
        made.done = true;
        return out;
    } catch (const PlanError&) {
        throw;
    } catch (const UsageError&) {
        throw;
    } catch (...) {
        std::throw_with_nested(
            PlanError(cat("pull ", r.source)));  // "pull SOURCE: open(...): reason"
    }
}

}  // namespace gpubox::image
