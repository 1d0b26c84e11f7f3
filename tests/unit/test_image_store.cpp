// image/: the store (names pointing at content-addressed trees), whiteout and opaque planning,
// and removing trees by fd without following links.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "image/entry_plan.hpp"
#include "image/limits.hpp"
#include "image/progress.hpp"
#include "image/store.hpp"
#include "image/store_dir.hpp"
#include "image/tree.hpp"
#include "tests/unit/temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::image;
namespace fs = std::filesystem;

namespace {

const std::string kDigestA = "sha256:" + std::string(64, 'a');
const std::string kDigestB = "sha256:" + std::string(64, 'b');

void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

// An image directory as a pull leaves it before the commit.
fs::path staged(const fs::path& store, const std::string& env) {
    const fs::path d = make_temp_dir(store, "pull-test");
    put(d / "rootfs/etc/hostname", "x\n");
    put(d / "config.json", R"({"os":"linux","config":{"Env":[")" + env + R"("]}})");
    put(d / "info.json", R"({"size_bytes": 42, "layers": 1})");
    return d;
}

}  // namespace

TEST_CASE("store_root: GPUBOX_IMAGES, else XDG_DATA_HOME, else HOME") {
    CHECK(store_root({{"GPUBOX_IMAGES", "/s"}, {"HOME", "/h"}}) == "/s");
    CHECK(store_root({{"XDG_DATA_HOME", "/x"}, {"HOME", "/h"}}) == "/x/gpubox/images");
    CHECK(store_root({{"XDG_DATA_HOME", "rel"}, {"HOME", "/h"}}) ==
          "/h/.local/share/gpubox/images");
    CHECK(store_root({{"HOME", "/h"}}) == "/h/.local/share/gpubox/images");
    CHECK_THROWS_AS(store_root({}), UsageError);
}

TEST_CASE("store: commit, names, find, list, reuse and rmi") {
    test::TempDir t("store");
    const fs::path s = t.dir / "images";
    CHECK(list(s).empty());
    CHECK_FALSE(find(s, "x:1"));
    {
        StoreLock lock(s);
        CHECK(commit_image(s, staged(s, "A=1"), kDigestA));
        write_name(s, "x:1", kDigestA, "tar:/x.tar", 1700000000);
        write_name(s, "alias", kDigestA, "tar:/x.tar", 1700000001);
        // The same digest again: not committed twice; the caller removes its copy.
        const fs::path again = staged(s, "A=2");
        CHECK_FALSE(commit_image(s, again, kDigestA));
        remove_tree(again);
    }
    const auto x = find(s, "x:1");
    REQUIRE(x);
    CHECK(x->digest == kDigestA);
    CHECK(x->source == "tar:/x.tar");
    CHECK(x->size_bytes == 42);
    CHECK(x->pulled_unix == 1700000000);
    CHECK(x->config.env == std::vector<std::string>{"A=1"});
    CHECK(x->rootfs == s / "blobs/sha256" / std::string(64, 'a') / "rootfs");
    CHECK_FALSE(find(s, "../names/x:1"));  // not a name: never a path
    REQUIRE(list(s).size() == 2);
    CHECK(list(s)[0].name == "alias");
    CHECK(fs::is_empty(s / "tmp"));
    // rmi of one name keeps the tree the other name points at; the last one removes it.
    CHECK(remove_name(s, "x:1"));
    CHECK_FALSE(remove_name(s, "x:1"));
    CHECK(fs::exists(x->rootfs / "etc/hostname"));
    CHECK(remove_name(s, "alias"));
    CHECK_FALSE(fs::exists(s / "blobs/sha256" / std::string(64, 'a')));
    CHECK(list(s).empty());
    CHECK(fs::is_empty(s / "tmp"));
}

TEST_CASE("store: a name with '/' is a record of its own; site stores from GPUBOX_IMAGES_RO") {
    test::TempDir t("store4");
    const fs::path s = t.dir;
    {
        StoreLock lock(s);
        commit_image(s, staged(s, "A=1"), kDigestA);
        write_name(s, "lab/py", kDigestA, "a", 1);
    }
    CHECK(fs::is_regular_file(s / "names/lab%py"));
    REQUIRE(find(s, "lab/py"));
    REQUIRE(list(s).size() == 1);
    CHECK(list(s)[0].name == "lab/py");
    // Read at one path, named at another (a site store's read-only view and its real path).
    const auto v = find(StoreView{s, "/site", true}, "lab/py");
    REQUIRE(v);
    CHECK(v->site);
    CHECK(v->rootfs == fs::path("/site/blobs/sha256") / std::string(64, 'a') / "rootfs");
    CHECK(remove_name(s, "lab/py"));
    CHECK(site_roots({{"GPUBOX_IMAGES_RO", "/a:rel::/b/c"}}) ==
          std::vector<fs::path>{"/a", "/b/c"});
    CHECK(site_roots({}).empty());
}

TEST_CASE("pull progress: a layer's line on a terminal and off one") {
    const std::string d = "sha256:0123456789abcdef";
    CHECK(render_layer(1, 3, d, 4 << 20, 8 << 20, 0.5, false, true) ==
          "gpubox: pull: layer 1/3 sha256:0123456789ab  4 MiB / 8 MiB  8.0 MiB/s");
    CHECK(render_layer(3, 3, d, 512, 1024, 1.0, true, true) ==
          "gpubox: pull: layer 3/3 sha256:0123456789ab  1 KiB / 1 KiB  0.5 KiB/s");
    CHECK(render_layer(2, 3, d, 8 << 20, 8 << 20, 2.0, true, false) ==
          "gpubox: pull: layer 2/3 sha256:0123456789ab: 8 MiB in 2.0 s, 4.0 MiB/s");
    // First seen 6 MiB along: the rate is of the bytes since; none before a second look.
    CHECK(render_layer(2, 3, d, 6 << 20, 8 << 20, 0.0, false, true, 6 << 20) ==
          "gpubox: pull: layer 2/3 sha256:0123456789ab  6 MiB / 8 MiB  ");
    CHECK(render_layer(2, 3, d, 8 << 20, 8 << 20, 0.5, false, true, 6 << 20) ==
          "gpubox: pull: layer 2/3 sha256:0123456789ab  8 MiB / 8 MiB  4.0 MiB/s");
    CHECK(render_layer(2, 3, d, 8 << 20, 8 << 20, 0.5, true, false, 6 << 20) ==
          "gpubox: pull: layer 2/3 sha256:0123456789ab: 8 MiB, 4.0 MiB/s");
    CHECK(render_layer(2, 3, d, 8 << 20, 8 << 20, 2.0, true, false, 0, true) ==
          "gpubox: pull: layer 2/3 sha256:0123456789ab: 8 MiB in 2.0 s, 4.0 MiB/s, already "
          "stored: not unpacked again");
}

TEST_CASE("store: rmi leaves an image a run holds, and the run finds one rmi removed") {
    test::TempDir t("store3");
    const fs::path s = t.dir;
    {
        StoreLock lock(s);
        commit_image(s, staged(s, "A=1"), kDigestA);
        write_name(s, "x", kDigestA, "a", 1);
        write_name(s, "y", kDigestA, "a", 1);
    }
    {
        const UniqueFd hold = hold_image(*find(s, "x"));
        CHECK(remove_name(s, "y"));  // the name alone: x still names the tree
        CHECK_THROWS_AS(remove_name(s, "x"), ImageInUse);
        CHECK(find(s, "x"));  // nothing changed
        CHECK(fs::is_empty(s / "tmp"));
    }
    const auto x = find(s, "x");
    CHECK(remove_name(s, "x"));
    CHECK_THROWS_AS(hold_image(*x), std::exception);  // gone: the run says so
}

TEST_CASE("store: a name pointed elsewhere moves atomically; bad records are errors, not crashes") {
    test::TempDir t("store2");
    const fs::path s = t.dir;
    {
        StoreLock lock(s);  // released before remove_name, which takes it itself
        commit_image(s, staged(s, "A=1"), kDigestA);
        commit_image(s, staged(s, "B=1"), kDigestB);
        write_name(s, "n", kDigestA, "a", 1);
        write_name(s, "n", kDigestB, "b", 2);
    }
    CHECK(find(s, "n")->digest == kDigestB);
    CHECK_THROWS_AS(write_name(s, "a//b", kDigestA, "", 0), UsageError);
    put(s / "names/broken", R"({"digest": "sha256:../../x"})");
    CHECK_THROWS_AS(find(s, "broken"), std::runtime_error);
    REQUIRE(list(s).size() == 1);  // the broken record is left out, the rest listed
    CHECK(list(s)[0].name == "n");
    CHECK(remove_name(s, "broken"));  // rmi still removes it
    CHECK_FALSE(fs::exists(s / "names/broken"));
}

TEST_CASE("layer members: create, whiteout, opaque, root, unsafe") {
    using K = EntryPlan::Kind;
    const auto plan = [](const char* m) { return plan_entry(m); };
    CHECK(plan("./usr//bin/").kind == K::create);
    CHECK(plan("./usr//bin/").path == "usr/bin");
    CHECK(plan("/etc/passwd").path == "etc/passwd");
    CHECK(plan("./").kind == K::root);
    CHECK(plan("a/.wh.b").kind == K::whiteout);
    CHECK(plan("a/.wh.b").path == "a/b");
    CHECK(plan(".wh.top").path == "top");
    CHECK(plan("a/b/.wh..wh..opq").kind == K::opaque);
    CHECK(plan("a/b/.wh..wh..opq").path == "a/b");
    CHECK(plan(".wh..wh..opq").path == "");
    for (const char* bad :
         {"../escape", "a/../../b", "a/..", "a/.wh.", "a/.wh..", "a/.wh..wh.plnk"})
        CHECK(plan(bad).kind == K::unsafe);
    CHECK(keeps_under_opaque({"d/new"}, "d/new"));
    CHECK_FALSE(keeps_under_opaque({"d/new"}, "d/old"));
    std::string out;
    CHECK_FALSE(normalize_member("../../etc/passwd", out));
    CHECK((normalize_member("./a/./b", out) && out == "a/b"));
}

TEST_CASE("opaque directories and removal: by fd, links never followed, read-only dirs too") {
    test::TempDir t("tree");
    const fs::path r = t.dir / "root", outside = t.dir / "outside";
    put(outside / "precious", "host\n");
    put(r / "d/old", "lower\n");
    put(r / "d/new", "this layer\n");
    put(r / "d/sub/old2", "lower\n");
    put(r / "d/sub/mine", "this layer\n");
    fs::create_symlink(outside, r / "d/link");
    ::chmod((r / "d/sub").c_str(), 0555);
    UniqueFd d = sys::open_at(AT_FDCWD, (r / "d").string(), O_RDONLY | O_DIRECTORY);
    remove_lower_entries(d.get(), "d", {"d/new", "d/sub", "d/sub/mine"});
    CHECK(fs::exists(r / "d/new"));
    CHECK(fs::exists(r / "d/sub/mine"));
    CHECK_FALSE(fs::exists(r / "d/old"));
    CHECK_FALSE(fs::exists(r / "d/sub/old2"));
    CHECK_FALSE(fs::is_symlink(r / "d/link"));
    CHECK(fs::exists(outside / "precious"));  // the link went, not what it pointed at
    ::chmod((r / "d").c_str(), 0);
    remove_tree(r);
    CHECK_FALSE(fs::exists(r));
    CHECK(fs::exists(outside / "precious"));
}

TEST_CASE("open_store: made 0700 where missing, links followed and checked, unsafe ones refused") {
    test::TempDir t("storedir");
    CHECK_FALSE(open_store(t.dir / "a/images", false));
    const std::optional<StoreDir> made = open_store(t.dir / "a/images", true);
    REQUIRE(made);
    CHECK(made->path == t.dir / "a/images");
    struct stat st {};
    REQUIRE(::stat((t.dir / "a/images").c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0700);
    fs::create_symlink("a", t.dir / "link");  // in a directory of the caller's: followed
    const std::optional<StoreDir> via = open_store(t.dir / "link/images", false);
    REQUIRE(via);
    CHECK(via->path == t.dir / "a/images");
    ::chmod((t.dir / "a/images").c_str(), 0777);
    try {
        open_store(t.dir / "a/images", false);
        FAIL("accepted a store of mode 0777");
    } catch (const PlanError& e) {
        CHECK(std::string(e.what()) == "image store \"" + (t.dir / "a/images").string() +
                                           "\" is writable by others (mode 0777)");
        CHECK(e.hint.rfind("chmod go-w \"" + (t.dir / "a/images").string() +
                               "\", or set GPUBOX_IMAGES to a directory of your own",
                           0) == 0);
    }
    ::chmod((t.dir / "a/images").c_str(), 0700);
    ::chmod((t.dir / "a").c_str(), 0777);
    CHECK_THROWS_WITH(open_store(t.dir / "link/images", false),
                      "image store \"" + (t.dir / "link/images").string() + "\": \"" +
                          (t.dir / "a").string() +
                          "\" is writable by others (mode 0777) and not sticky");
    fs::create_directories(t.dir / "file-parent");
    put(t.dir / "file-parent/images", "x");
    CHECK_THROWS_WITH(
        open_store(t.dir / "file-parent/images", false),
        "image store \"" + (t.dir / "file-parent/images").string() + "\" is not a directory");
}

TEST_CASE("unpack limits: --max-size, the ratio past its floor, the free space kept") {
    UnpackBudget b;
    b.limits = {1000, 10, 100};
    b.start_layer(5);
    CHECK(b.charge(100).empty());  // 20 times the blob, but not past the floor
    CHECK(b.charge(60) ==
          "the layer expands to more than 10 times its compressed size of 1 KiB (1 KiB so far), "
          "which no real layer does: a decompression bomb");
    CHECK(b.total == 100);  // a refused charge is not counted
    b.start_layer(1000);
    CHECK(b.charge(800).empty());
    CHECK(b.charge(101) == "the image unpacks to more than --max-size 1 KiB (1 KiB so far)");
    CHECK(b.charge(100).empty());  // exactly the limit is fine
    CHECK(space_reserve(std::uint64_t{10} << 30) == (std::uint64_t{10} << 30) / 100);
    CHECK(space_reserve(std::uint64_t{1} << 40) == std::uint64_t{1} << 30);  // at most 1 GiB
    CHECK(space_problem(std::uint64_t{5} << 30, std::uint64_t{100} << 30, 1 << 20).empty());
    CHECK(space_problem(std::uint64_t{2} << 30, std::uint64_t{100} << 30, (1u << 30) + 1) ==
          "the store's filesystem has 2.0 GiB free, and this needs 1.0 GiB more while a pull "
          "leaves 1.0 GiB (1 %, at most 1 GiB) free");
}

TEST_CASE("store: a single-file image's record names its rootfs.sqsh; a tree's names none") {
    test::TempDir t("store-sqsh");
    const fs::path s = t.dir / "images";
    {
        StoreLock lock(s);
        const fs::path d = staged(s, "A=1");
        put(d / "rootfs.sqsh", "hsqs");
        put(d / "info.json", R"({"size_bytes": 4, "layers": 1, "squashfs": true})");
        commit_image(s, d, kDigestA);
        write_name(s, "sq", kDigestA, "tar:/x.tar", 1700000000);
        commit_image(s, staged(s, "B=1"), kDigestB);
        write_name(s, "tree", kDigestB, "tar:/y.tar", 1700000000);
    }
    const auto sq = find(s, "sq");
    REQUIRE(sq);
    CHECK(sq->squashfs == s / "blobs/sha256" / std::string(64, 'a') / "rootfs.sqsh");
    CHECK(sq->squashfs_read == sq->squashfs);  // the user's own store is read where it is
    CHECK(sq->layers.empty());
    const auto tree = find(s, "tree");
    REQUIRE(tree);
    CHECK(tree->squashfs.empty());
}

TEST_CASE("images: SHARED, the bytes of an image's layers another image uses too") {
    auto img = [](std::vector<fs::path> layers, std::vector<std::uint64_t> sizes) {
        Stored s;
        s.layers = std::move(layers), s.layer_sizes = std::move(sizes);
        for (std::uint64_t n : s.layer_sizes) s.size_bytes += n;
        return s;
    };
    Stored flat;
    flat.size_bytes = 100;
    const std::vector<Stored> all = {img({"/s/a", "/s/b", "/s/c"}, {3, 40, 1}),
                                     img({"/s/a", "/s/b", "/s/d"}, {3, 40, 2}),
                                     img({"/site/a"}, {3}), flat};
    CHECK(shared_sizes(all) == std::vector<std::uint64_t>{43, 43, 0, 0});
    CHECK(shared_sizes({all[0]}) == std::vector<std::uint64_t>{0});
    CHECK(shared_sizes({all[0], all[0]}) == std::vector<std::uint64_t>{44, 44});  // two names
}
