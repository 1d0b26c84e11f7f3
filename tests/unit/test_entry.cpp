// The one mapping from an op to the entry it needs (entry_of), and the fresh-filesystem target
// that fills a tmpfs while it is detached (fill_fresh_fs), as the layer and apply use them.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/sys.hpp"
#include "common/text.hpp"
#include "rootfs/entry.hpp"
#include "rootfs/plan.hpp"
#include "tests/unit/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace gpubox;
using namespace gpubox::rootfs;

namespace {

// "dir 755", "file 644 op", "symlink:text op", "none", "source ENOENT" ...
std::string describe(const MountOp& op) {
    const std::optional<Entry> e = entry_of(op);
    if (!e) return "none";
    std::ostringstream s;
    switch (e->kind) {
        case EntryKind::dir: s << "dir " << std::oct << e->mode; break;
        case EntryKind::file: s << "file"; break;
        case EntryKind::symlink: s << "symlink:" << e->text; break;
        case EntryKind::content: s << "content:" << e->text << " " << std::oct << e->mode; break;
    }
    if (e->is_op) s << " op";
    if (e->source_err) s << " source errno " << std::dec << e->source_err;
    if (e->device) s << " device";
    return s.str();
}

std::string tree(const fs::path& top) {
    std::vector<std::string> lines;
    for (auto it = fs::recursive_directory_iterator(top); it != fs::recursive_directory_iterator();
         ++it) {
        struct stat st {};
        ::lstat(it->path().c_str(), &st);
        std::ostringstream l;
        l << it->path().lexically_relative(top).string() << " "
          << (S_ISDIR(st.st_mode)   ? "d"
              : S_ISLNK(st.st_mode) ? "l"
                                    : "f")
          << std::oct << (st.st_mode & 07777);
        lines.push_back(l.str());
    }
    std::sort(lines.begin(), lines.end());
    return join(lines, ", ");
}

}  // namespace

TEST_CASE("entry_of: each op kind's entry, decided once") {
    test::TempDir t("entry");
    fs::create_directories(t.dir / "srcdir");
    const std::string srcdir = (t.dir / "srcdir").string(), missing = (t.dir / "missing").string();
    CHECK(describe(Bind{.source = srcdir, .target = "/x"}) == "dir 755");
    CHECK(describe(Bind{.source = missing, .target = "/x"}) == "file source errno 2");
    // The planner's kind spares the look at the source.
    CHECK(describe(Bind{.source = missing, .target = "/x", .kind = SourceKind::dir}) == "dir 755");
    CHECK(describe(Bind{.source = missing, .target = "/x", .kind = SourceKind::file}) == "file");
    CHECK(describe(BindDev{.source = "/dev/null", .target = "/dev/null"}) == "file device");
    CHECK(describe(Proc{}) == "dir 755");
    CHECK(describe(Sysfs{}) == "dir 755");
    CHECK(describe(Tmpfs{.target = "/t", .mode = 01777}) == "dir 755");  // its mount point
    CHECK(describe(Devpts{}) == "dir 755");
    CHECK(describe(Symlink{.link_text = "pts/ptmx", .path = "/dev/ptmx"}) == "symlink:pts/ptmx op");
    CHECK(describe(WriteFile{.target = "/f", .content = "x", .mode = 0444}) == "content:x 444 op");
    CHECK(describe(MakeDir{.target = "/d", .mode = 0555}) == "dir 555 op");
    CHECK(describe(MaskPath{.target = "/proc/kcore"}) == "none");
    CHECK(describe(RemountRo{.target = "/proc/sys"}) == "none");
}

TEST_CASE("fill_fresh_fs: a detached filesystem gets the entries and mount points it holds") {
    test::TempDir t("fresh");
    fs::create_directories(t.dir / "top");
    MountPlan plan;
    plan.ops = {Tmpfs{.target = "/dev", .read_only = true},
                BindDev{.source = "/dev/null", .target = "/dev/null"},
                Symlink{.link_text = "/proc/self/fd", .path = "/dev/fd"},
                MakeDir{.target = "/dev/x", .mode = 0555},
                WriteFile{.target = "/dev/x/f", .content = "hi", .mode = 0440},
                Tmpfs{.target = "/dev/shm", .mode = 01777},
                Symlink{.link_text = "held", .path = "/dev/shm/link"},  // in /dev/shm's own fs
                MaskPath{.target = "/dev/y"},
                Symlink{.link_text = "out", .path = "/etc/link"}};  // not in /dev
    std::vector<bool> done(plan.ops.size());
    UniqueFd top = sys::open_at(AT_FDCWD, (t.dir / "top").string(), O_PATH | O_DIRECTORY);
    fill_fresh_fs(plan, 0, top.get(), done);
    CHECK(tree(t.dir / "top") == "fd l777, null f644, shm d755, x d555, x/f f440");
    // Entries are done; mount points wait for their mounts; what lies elsewhere is untouched.
    CHECK(done == std::vector<bool>{false, false, true, true, true, false, false, false, false});
    // Filled again (a retry): what is there is kept, nothing is reported made twice.
    std::vector<bool> again(plan.ops.size());
    fill_fresh_fs(plan, 0, top.get(), again);
    CHECK(again == std::vector<bool>{false, false, false, true, false, false, false, false, false});
}

TEST_CASE("write_entry: replace for the layer, keep for a fresh filesystem") {
    test::TempDir t("write");
    UniqueFd dir = sys::open_at(AT_FDCWD, t.dir.string(), O_PATH | O_DIRECTORY);
    OwnDirs dirs(dir.get());
    const Entry link{.kind = EntryKind::symlink, .text = "new", .is_op = true};
    fs::create_symlink("old", t.dir / "l");
    CHECK(write_entry(dir.get(), "l", link, dirs, false) == -EEXIST);
    CHECK(fs::read_symlink(t.dir / "l") == "old");
    CHECK(write_entry(dir.get(), "l", link, dirs, true) == 0);
    CHECK(fs::read_symlink(t.dir / "l") == "new");
    const Entry file{.kind = EntryKind::content, .mode = 0600, .text = "new", .is_op = true};
    std::ofstream(t.dir / "f") << "old contents";
    CHECK(write_entry(dir.get(), "f", file, dirs, false) == -EEXIST);
    CHECK(write_entry(dir.get(), "f", file, dirs, true) == 0);
    std::string got;
    std::getline(std::ifstream(t.dir / "f"), got);
    CHECK(got == "new");
    // A link where a file is wanted is never written through.
    fs::create_symlink("/etc/passwd", t.dir / "g");
    CHECK(write_entry(dir.get(), "g", file, dirs, true) == -ELOOP);
}
