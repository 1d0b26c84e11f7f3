#include "image/store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>
#include <map>
#include <set>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/oci.hpp"
#include "image/reference.hpp"

namespace gpubox::image {
namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

std::string hex_of(const std::string& digest) { return digest.substr(7); }

fs::path image_dir(const fs::path& store, const std::string& digest) {
    return store / "blobs" / "sha256" / hex_of(digest);
}

// A file of the store, read without updating its access time: O_NOATIME, which the kernel
// grants the file's owner (the store's files are the caller's), else a plain read.
std::string read_stored(const fs::path& p) {
    int fd = sys::try_open_at(AT_FDCWD, p.string(), O_RDONLY | O_NOATIME | O_NOFOLLOW);
    if (fd == -EPERM) fd = sys::try_open_at(AT_FDCWD, p.string(), O_RDONLY | O_NOFOLLOW);
    if (fd < 0) sys::fail(cat("open(", quote(p.string()), ", O_RDONLY|O_NOATIME)"), -fd);
    const UniqueFd f(fd);
    return sys::read_all(fd, p.string(), 16 << 20);
}

Json read_json(const fs::path& p) {
    Json j = Json::parse(read_stored(p), nullptr, false);
    if (j.is_discarded() || !j.is_object())
        throw std::runtime_error(cat(quote(p.string()), ": not a JSON object"));
    return j;
}

// Writes `text` to DIR/NAME through a temp file and rename(2): all or nothing.
void write_atomic(const fs::path& dir, const std::string& name, const std::string& text) {
    const std::string tmp = cat(".", name, ".", ::getpid(), ".tmp");
    UniqueFd d = sys::open_at(AT_FDCWD, dir.string(), O_PATH | O_DIRECTORY);
    {
        UniqueFd f = sys::open_at(d.get(), tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW, 0644);
        sys::write_all(f.get(), text, (dir / tmp).string());
        if (::fsync(f.get()) < 0) sys::fail(cat("fsync(", quote((dir / tmp).string()), ")"), errno);
    }
    sys::rename_at(d.get(), tmp, name);
}

void make_dirs(const fs::path& store) {
    for (const char* sub : {"blobs/sha256", "layers/sha256", "names", "tmp"}) {
        std::error_code ec;
        fs::create_directories(store / sub, ec);
        if (ec) throw SysError(ec.value(), cat("mkdir(", quote((store / sub).string()), ")"));
    }
}

// A layered image's layers (hex digests, bottom first), from its info.json.
std::vector<std::string> layer_digests(const Json& info) {
    std::vector<std::string> out;
    const auto it = info.find("layer_digests");
    if (it == info.end() || !it->is_array()) return out;
    for (const Json& d : *it) {
        const std::string hex = d.is_string() ? d.get<std::string>() : "";
        if (!valid_digest("sha256:" + hex)) throw std::runtime_error("info.json: bad layer digest");
        out.push_back(hex);
    }
    return out;
}

// Every layer some stored image has.
std::set<std::string> used_layers(const fs::path& store) {
    std::set<std::string> used;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store / "blobs/sha256", ec)) {
        try {
            for (const std::string& hex : layer_digests(read_json(e.path() / "info.json")))
                used.insert(hex);
        } catch (const std::exception&) {
            // unreadable: an image half removed; its layers go when nothing else has them
        }
    }
    return used;
}

// Renamed away first, so that a crash mid-removal leaves a temp dir, not half a tree.
void remove_stored(const fs::path& store, const fs::path& tree) {
    const fs::path doomed = make_temp_dir(store, "rm");
    if (::rename(tree.c_str(), (doomed / "x").c_str()) != 0)
        sys::fail(cat("rename(", quote(tree.string()), ")"), errno);
    remove_tree(doomed);
}

// Removes the layers no image has (hold the lock); how many.
std::uint64_t remove_unused_layers(const fs::path& store) {
    const std::set<std::string> used = used_layers(store);
    std::vector<std::string> unused;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store / "layers/sha256", ec)) {
        const std::string hex = e.path().filename().string();
        if (valid_digest("sha256:" + hex) && !used.count(hex)) unused.push_back(hex);
    }
    for (const std::string& hex : unused) remove_stored(store, store / "layers/sha256" / hex);
    return unused.size();
}

// Removes the trees unpacked for squashfs runs (STORE/squashfs/<key>) that nothing uses (hold
// the lock): a stored image's (key: its digest's hex) once the image is gone, as no run can hold
// it then (a run holds its image, hold_image); with `files`, also a FILE.sqsh's (any other key)
// that no run holds (image::hold_unpacked): a cache the next run of the file unpacks again.
// "mnt" is the mount point FILE.sqsh runs share. How many went; `in_use` counts those held.
std::uint64_t remove_unused_unpacked(const fs::path& store, bool files, std::uint64_t* in_use) {
    std::vector<std::string> doomed;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store / "squashfs", ec)) {
        const std::string key = e.path().filename().string();
        if (key == "mnt" || !e.is_directory(ec) || e.is_symlink(ec)) continue;
        if (valid_digest("sha256:" + key)) {
            if (!fs::exists(store / "blobs/sha256" / key, ec)) doomed.push_back(key);
            continue;
        }
        if (!files) continue;
        const UniqueFd dir =
            sys::open_at(AT_FDCWD, e.path().string(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sys::flock_try(dir.get(), false, e.path().string())) doomed.push_back(key);
        else if (in_use) ++*in_use;  // a run holds it; our lock goes with the fd
    }
    for (const std::string& key : doomed) remove_stored(store, store / "squashfs" / key);
    return doomed.size();
}

// A name's record file: '/' is not a file name's, '%' is no name's.
std::string record_file(std::string name) {
    std::replace(name.begin(), name.end(), '/', '%');
    return name;
}

std::optional<Stored> load(const StoreView& store, const std::string& name) {
    const fs::path record = store.read / "names" / record_file(name);
    struct stat st {};
    if (::lstat(record.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
    const Json r = read_json(record);
    Stored s;
    s.name = name;
    s.digest = r.value("digest", "");
    if (!valid_digest(s.digest))
        throw std::runtime_error(cat(quote(record.string()), ": bad digest"));
    s.source = r.value("source", "");
    s.remote = r.value("remote", "");
    s.pulled_unix = r.value("pulled_unix", std::int64_t{0});
    const fs::path dir = image_dir(store.read, s.digest);
    s.rootfs = image_dir(store.real, s.digest) / "rootfs";
    s.config = parse_config(read_stored(dir / "config.json"));
    const Json info = read_json(dir / "info.json");
    s.size_bytes = info.value("size_bytes", std::uint64_t{0});
    for (const std::string& hex : layer_digests(info)) {
        s.layers.push_back(store.real / "layers/sha256" / hex / "tree");
        s.layer_sizes.push_back(layer_size(store.read, hex));
    }
    if (info.value("squashfs", false)) {
        s.squashfs = image_dir(store.real, s.digest) / "rootfs.sqsh";
        s.squashfs_read = dir / "rootfs.sqsh";
    }
    s.site = store.site;
    return s;
}

}  // namespace

fs::path store_root(const std::map<std::string, std::string>& env) {
    const auto get = [&](const char* k) {
        const auto it = env.find(k);
        return it == env.end() ? std::string() : it->second;
    };
    if (const std::string s = get("GPUBOX_IMAGES"); !s.empty()) return s;
    // XDG: a relative XDG_DATA_HOME is invalid and ignored.
    if (const std::string x = get("XDG_DATA_HOME"); !x.empty() && x[0] == '/')
        return fs::path(x) / "gpubox/images";
    const std::string home = get("HOME");
    if (home.empty() || home[0] != '/')
        throw UsageError(
            "image store: neither GPUBOX_IMAGES, XDG_DATA_HOME nor HOME is set to an absolute "
            "path");
    return fs::path(home) / ".local/share/gpubox/images";
}

std::vector<fs::path> site_roots(const std::map<std::string, std::string>& env) {
    std::vector<fs::path> out;
    const auto it = env.find("GPUBOX_IMAGES_RO");
    if (it == env.end()) return out;
    const std::string& v = it->second;
    for (std::size_t at = 0; at <= v.size();) {
        const std::size_t colon = std::min(v.find(':', at), v.size());
        if (colon > at && v[at] == '/') out.emplace_back(v.substr(at, colon - at));
        at = colon + 1;
    }
    return out;
}

std::optional<Stored> find(const fs::path& store, std::string_view name) {
    return find(StoreView{store, store, false}, name);
}

std::optional<Stored> find(const StoreView& store, std::string_view name) {
    const std::string n(name);
    if (!valid_name(n)) return std::nullopt;
    return load(store, n);
}

std::vector<Stored> list(const fs::path& store) { return list(StoreView{store, store, false}); }

std::vector<Stored> list(const StoreView& store) {
    std::vector<Stored> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store.read / "names", ec)) {
        std::string n = e.path().filename().string();
        std::replace(n.begin(), n.end(), '%', '/');
        if (!valid_name(n)) continue;  // our own temp files start with '.'
        // A record whose tree is unreadable (a crash mid-rmi, a hand edit) is left out, so that
        // `images` still lists the rest; `run` and `rmi` of that name say what is wrong.
        try {
            if (auto s = load(store, n)) out.push_back(std::move(*s));
        } catch (const std::exception&) {}
    }
    std::sort(out.begin(), out.end(),
              [](const Stored& a, const Stored& b) { return a.name < b.name; });
    return out;
}

StoreLock::StoreLock(const fs::path& store) {
    make_dirs(store);
    UniqueFd fd =
        sys::open_at(AT_FDCWD, (store / "lock").string(), O_RDWR | O_CREAT | O_NOFOLLOW, 0600);
    sys::flock_exclusive(fd.get(), true, (store / "lock").string());
    fd_ = fd.release();
}

StoreLock::~StoreLock() { ::close(fd_); }

fs::path make_temp_dir(const fs::path& store, const std::string& prefix) {
    make_dirs(store);
    std::string templ = (store / "tmp" / (prefix + "-XXXXXX")).string();
    if (!::mkdtemp(templ.data())) sys::fail(cat("mkdtemp(", quote(templ), ")"), errno);
    return templ;
}

bool commit_image(const fs::path& store, const fs::path& dir, const std::string& digest) {
    const fs::path target = image_dir(store, digest);
    struct stat st {};
    if (::lstat(target.c_str(), &st) == 0) return false;
    if (::rename(dir.c_str(), target.c_str()) != 0)
        sys::fail(cat("rename(", quote(dir.string()), " -> ", quote(target.string()), ")"), errno);
    return true;
}

void write_name(const fs::path& store, const std::string& name, const std::string& digest,
                const std::string& source, std::int64_t pulled_unix, const std::string& remote) {
    validate_name(name);
    Json r = {{"digest", digest}, {"source", source}, {"pulled_unix", pulled_unix}};
    if (!remote.empty() && remote != digest) r["remote"] = remote;
    write_atomic(store / "names", record_file(name), r.dump(2) + "\n");
}

bool remove_name(const fs::path& store, const std::string& name) {
    StoreLock lock(store);
    std::optional<Stored> gone;
    try {
        gone = find(store, name);
    } catch (const std::exception&) {
        // A broken record: it goes; a tree it may have named stays for the next pull to reuse.
    }
    struct stat st {};
    const fs::path record = store / "names" / record_file(name);
    if (!gone && (!valid_name(name) || ::lstat(record.c_str(), &st) != 0)) return false;
    bool last = gone.has_value();
    if (gone)
        for (const Stored& other : list(store))
            if (other.digest == gone->digest && other.name != name) last = false;
    // Held until the tree is gone: a run starting meanwhile waits, then finds it gone.
    UniqueFd tree;
    if (last) {
        tree = sys::open_at(AT_FDCWD, image_dir(store, gone->digest).string(),
                            O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (!sys::flock_try(tree.get(), false, image_dir(store, gone->digest).string()))
            throw ImageInUse(cat("image ", name, " is in use by a running sandbox"));
    }
    if (::unlink(record.c_str()) != 0)
        sys::fail(cat("unlink(", quote(record.string()), ")"), errno);
    if (!last) return true;  // still named: its tree stays
    remove_stored(store, image_dir(store, gone->digest));
    remove_unused_layers(store);
    remove_unused_unpacked(store, false, nullptr);
    return true;
}

void commit_layers(const fs::path& store, const fs::path& stage) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(stage, ec)) {
        const fs::path target = store / "layers/sha256" / e.path().filename();
        struct stat st {};
        if (::lstat(target.c_str(), &st) == 0) continue;  // stored meanwhile: the stage goes
        if (::rename(e.path().c_str(), target.c_str()) != 0)
            sys::fail(cat("rename(", quote(e.path().string()), " -> ", quote(target.string()), ")"),
                      errno);
    }
}

bool has_layers(const fs::path& store, const std::vector<std::string>& hexes) {
    struct stat st {};
    for (const std::string& hex : hexes)
        if (::lstat((store / "layers/sha256" / hex / "tree").c_str(), &st) != 0) return false;
    return true;
}

std::uint64_t layer_size(const fs::path& store, const std::string& hex) {
    try {
        return read_json(store / "layers/sha256" / hex / "info.json")
            .value("size_bytes", std::uint64_t{0});
    } catch (const std::exception&) {
        return 0;
    }
}

std::vector<std::uint64_t> shared_sizes(const std::vector<Stored>& images) {
    std::map<fs::path, std::size_t> users;  // a layer's tree -> how many images use it
    for (const Stored& s : images)
        for (const fs::path& l : std::set<fs::path>(s.layers.begin(), s.layers.end())) ++users[l];
    std::vector<std::uint64_t> out;
    for (const Stored& s : images) {
        std::uint64_t shared = 0;
        std::set<fs::path> counted;
        for (std::size_t i = 0; i < s.layers.size(); ++i)
            if (users[s.layers[i]] > 1 && counted.insert(s.layers[i]).second)
                shared += i < s.layer_sizes.size() ? s.layer_sizes[i] : 0;
        out.push_back(std::min(shared, s.size_bytes));
    }
    return out;
}

std::uint64_t remove_stale_temps(const fs::path& store, bool removals) {
    std::uint64_t n = 0;
    std::error_code ec;
    std::vector<fs::path> stale;
    for (const auto& e : fs::directory_iterator(store / "tmp", ec)) {
        const std::string name = e.path().filename().string();
        const auto dash = name.find('-'), dash2 = name.find('-', dash + 1);
        if (removals && name.rfind("rm-", 0) == 0) {
            stale.push_back(e.path());  // a removal's: done under the lock, which we hold
            continue;
        }
        if (dash == std::string::npos || dash2 == std::string::npos) continue;
        const long pid = std::strtol(name.substr(dash + 1, dash2 - dash - 1).c_str(), nullptr, 10);
        if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
            stale.push_back(e.path());
    }
    for (const fs::path& p : stale) remove_tree(p), ++n;
    return n;
}

Pruned prune(const fs::path& store) {
    StoreLock lock(store);
    Pruned out;
    std::set<std::string> named;  // from every record, even one whose image is unreadable
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(store / "names", ec)) {
        try {
            const std::string d = read_json(e.path()).value("digest", "");
            if (valid_digest(d)) named.insert(d.substr(7));
        } catch (const std::exception&) {}
    }
    std::vector<std::string> unnamed;
    for (const auto& e : fs::directory_iterator(store / "blobs/sha256", ec))
        if (!named.count(e.path().filename().string()))
            unnamed.push_back(e.path().filename().string());
    for (const std::string& hex : unnamed) {
        const fs::path dir = store / "blobs/sha256" / hex;
        UniqueFd held = sys::open_at(AT_FDCWD, dir.string(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (!sys::flock_try(held.get(), false, dir.string())) {
            ++out.in_use;  // a run holds it (its name was removed while it ran)
            continue;
        }
        remove_stored(store, dir);
        ++out.images;
    }
    out.layers = remove_unused_layers(store);
    out.unpacked = remove_unused_unpacked(store, true, &out.unpacked_in_use);
    out.temps = remove_stale_temps(store, true);
    return out;
}

UniqueFd hold_shared(const fs::path& dir) {
    UniqueFd fd = sys::open_at(AT_FDCWD, dir.string(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    int rc;
    do rc = ::flock(fd.get(), LOCK_SH);
    while (rc != 0 && errno == EINTR);
    if (rc != 0) sys::fail(cat("flock(", quote(dir.string()), ", LOCK_SH)"), errno);
    // rmi and prune rename a directory away under their LOCK_EX: ours must still be in place.
    struct stat held {
    }, now{};
    if (::fstat(fd.get(), &held) != 0 || ::lstat(dir.c_str(), &now) != 0 ||
        held.st_ino != now.st_ino || held.st_dev != now.st_dev)
        return UniqueFd();
    return fd;
}

UniqueFd hold_image(const Stored& img) {
    UniqueFd fd = hold_shared(img.rootfs.parent_path());
    if (!fd.valid())
        throw PlanError(
            cat("run: image ", img.name, " was removed (gpubox rmi) as the run started"));
    return fd;
}

}  // namespace gpubox::image
