#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "common/trusted_path.hpp"
#include "temp_dir.hpp"

using namespace gpubox;
using namespace gpubox::trusted_path;

namespace {

struct stat dir(uid_t uid, mode_t mode, gid_t gid = 0) {
    struct stat st {};
    st.st_mode = S_IFDIR | mode;
    st.st_uid = uid;
    st.st_gid = gid;
    return st;
}

}  // namespace

TEST_CASE("dir_problem: the state directory itself is the caller's and writable by nobody else") {
    CHECK(dir_problem(dir(1000, 0700), 1000, 1000, Role::own) == "");
    CHECK(dir_problem(dir(1000, 0755), 1000, 1000, Role::own) == "");
    CHECK(dir_problem(dir(1001, 01777), 1000, 1000, Role::own) ==
          "belongs to uid 1001, not to you (uid 1000)");
    CHECK(dir_problem(dir(0, 01777), 1000, 1000, Role::own) ==
          "belongs to uid 0, not to you (uid 1000)");
    CHECK(dir_problem(dir(1000, 01777), 1000, 1000, Role::own) ==
          "is writable by others (mode 01777)");
    CHECK(dir_problem(dir(1000, 0770), 1000, 1000, Role::own) ==
          "is writable by its group (mode 0770)");
    CHECK(dir_problem(dir(0, 0700), 0, 0, Role::own) == "");
    struct stat file = dir(1000, 0600);
    file.st_mode = S_IFREG | 0600;
    CHECK(dir_problem(file, 1000, 1000, Role::own) == "is not a directory");
}

TEST_CASE("dir_problem: on the way, root's or the caller's, shared only when sticky") {
    CHECK(dir_problem(dir(0, 0755), 1000, 1000, Role::on_the_way) == "");
    CHECK(dir_problem(dir(0, 01777), 1000, 1000, Role::on_the_way) == "");  // /tmp
    CHECK(dir_problem(dir(1000, 0700), 1000, 1000, Role::on_the_way) == "");
    CHECK(dir_problem(dir(1000, 01777), 1000, 1000, Role::on_the_way) == "");
    CHECK(dir_problem(dir(1001, 0755), 1000, 1000, Role::on_the_way) == "belongs to uid 1001");
    CHECK(dir_problem(dir(1001, 01777), 1000, 1000, Role::on_the_way) == "belongs to uid 1001");
    CHECK(dir_problem(dir(0, 0777), 1000, 1000, Role::on_the_way) ==
          "is writable by others (mode 0777) and not sticky");
    CHECK(dir_problem(dir(0, 02775), 1000, 1000, Role::on_the_way) ==
          "is writable by its group (mode 02775) and not sticky");  // /usr/local, root:staff
}

TEST_CASE("dir_problem: group write is the caller's only in the caller's user-private group") {
    // Debian's umask 002 with USERGROUPS_ENAB: uid 1000, gid 1000, group-writable directories.
    CHECK(dir_problem(dir(1000, 0770, 1000), 1000, 1000, Role::own) == "");
    CHECK(dir_problem(dir(1000, 02775, 1000), 1000, 1000, Role::on_the_way) == "");
    // A group others are in: the directory's gid is not the caller's, or not its uid.
    CHECK(dir_problem(dir(1000, 0775, 100), 1000, 1000, Role::own) ==
          "is writable by its group (mode 0775)");
    CHECK(dir_problem(dir(1000, 0775, 100), 1000, 100, Role::own) ==
          "is writable by its group (mode 0775)");
    CHECK(dir_problem(dir(1000, 0775, 1001), 1000, 1001, Role::own) ==
          "is writable by its group (mode 0775)");
    CHECK(dir_problem(dir(0, 0775, 100), 1000, 100, Role::on_the_way) ==
          "is writable by its group (mode 0775) and not sticky");
    // Others are others, whatever the group.
    CHECK(dir_problem(dir(1000, 0757, 1000), 1000, 1000, Role::own) ==
          "is writable by others (mode 0757)");
    // The group rule does not make another's directory the caller's.
    CHECK(dir_problem(dir(1001, 0700, 1000), 1000, 1000, Role::own) ==
          "belongs to uid 1001, not to you (uid 1000)");
}

TEST_CASE("link_problem: a symlink on the way is followed only when root's or the caller's") {
    struct stat l {};
    l.st_mode = S_IFLNK | 0777;
    CHECK(link_problem(l, 1000) == "");
    l.st_uid = 1000;
    CHECK(link_problem(l, 1000) == "");
    l.st_uid = 1001;
    CHECK(link_problem(l, 1000) == "is a symlink of uid 1001");
}

TEST_CASE("regular_file_problem names the type") {
    CHECK(regular_file_problem(S_IFREG | 0644) == "");
    CHECK(regular_file_problem(S_IFIFO | 0644) == "not a regular file (a FIFO)");
    CHECK(regular_file_problem(S_IFDIR | 0755) == "not a regular file (a directory)");
    CHECK(regular_file_problem(S_IFCHR | 0666) == "not a regular file (a character device)");
    CHECK(regular_file_problem(S_IFSOCK | 0755) == "not a regular file (a socket)");
}

TEST_CASE("open_state_dir makes a missing chain 0700 and walks . .. and the caller's links") {
    test::TempDir t("trusted");
    const std::string base = t.dir.string();
    const std::string root = base + "/a/b/boxes";
    UniqueFd fd = open_state_dir(root, Missing::create, "box root", "hint");
    struct stat st = sys::fstat(fd.get(), root);
    CHECK((st.st_mode & 07777) == 0700);
    CHECK(st.st_uid == ::geteuid());
    for (const char* made : {"/a", "/a/b"}) CHECK((sys::stat(base + made).st_mode & 07777) == 0700);
    // The same directory again, through ".", "..", a relative link and an absolute one.
    sys::symlink_at("a/b", AT_FDCWD, base + "/rel");
    sys::symlink_at(base + "/a", AT_FDCWD, base + "/abs");
    for (const std::string& p :
         {base + "/a/./b/../b/boxes", base + "/rel/boxes", base + "/abs/b/boxes/", base + "/rel"}) {
        UniqueFd again = open_state_dir(p, Missing::error, "box root", "hint");
        const struct stat s2 = sys::fstat(again.get(), p);
        CHECK(s2.st_ino == (p == base + "/rel" ? sys::stat(base + "/a/b").st_ino : st.st_ino));
    }
}

TEST_CASE("open_state_dir refuses a state directory others can write, with what and the hint") {
    test::TempDir t("trusted");
    const std::string open = t.dir.string() + "/open";
    sys::mkdir_at(AT_FDCWD, open, 0700);
    sys::fchmod_at(AT_FDCWD, open, 0777);
    try {
        open_state_dir(open, Missing::create, "box root", "set GPUBOX_ISOLATE_ROOT");
        FAIL("accepted a directory of mode 0777");
    } catch (const PlanError& e) {
        CHECK(std::string(e.what()) ==
              "box root \"" + open + "\" is writable by others (mode 0777)");
        CHECK(e.hint == "chmod go-w \"" + open + "\", or set GPUBOX_ISOLATE_ROOT");
    }
    // Below it, the caller's own 0700 directory is refused too: it could be renamed away.
    sys::mkdir_at(AT_FDCWD, open + "/mine", 0700);
    sys::fchmod_at(AT_FDCWD, open, 0777);
    CHECK_THROWS_WITH(open_state_dir(open + "/mine", Missing::error, "box root", ""),
                      "box root \"" + open + "/mine\": \"" + open +
                          "\" is writable by others (mode 0777) and not sticky");
    // A sticky one may be on the way (as /tmp).
    sys::fchmod_at(AT_FDCWD, open, 01777);
    CHECK(open_state_dir(open + "/mine", Missing::error, "box root", "").valid());
}

TEST_CASE("open_state_dir: a file on the way, a missing directory, a link loop") {
    test::TempDir t("trusted");
    const std::string base = t.dir.string();
    std::ofstream(base + "/file") << "x";
    CHECK_THROWS_WITH(
        open_state_dir(base + "/file/boxes", Missing::create, "box root", ""),
        "box root \"" + base + "/file/boxes\": \"" + base + "/file\" is not a directory");
    try {
        open_state_dir(base + "/missing", Missing::error, "box root", "h");
        FAIL("opened a missing directory");
    } catch (const PlanError&) {
        const auto e = std::current_exception();
        CHECK(describe(e) == "box root \"" + base + "/missing\": open(\"" + base +
                                 "/missing\", O_PATH|O_NOFOLLOW): No such file or directory");
        CHECK(hint_for(e) == "h");
    }
    // Missing::absent_ok: missing anywhere on the way (a dangling link too) is "not there",
    // and nothing is made; what is there is still checked.
    sys::symlink_at("gone", AT_FDCWD, base + "/dangling");
    for (const std::string& p : {base + "/missing", base + "/missing/boxes", base + "/dangling"})
        CHECK_FALSE(open_state_dir(p, Missing::absent_ok, "box root", "").valid());
    struct stat none {};
    CHECK_FALSE(sys::lstat_at(AT_FDCWD, base + "/missing", none));
    CHECK_THROWS_WITH(
        open_state_dir(base + "/file/boxes", Missing::absent_ok, "box root", ""),
        "box root \"" + base + "/file/boxes\": \"" + base + "/file\" is not a directory");
    CHECK(open_state_dir(base, Missing::absent_ok, "box root", "").valid());
    sys::symlink_at("loop", AT_FDCWD, base + "/loop");
    CHECK_THROWS_AS(open_state_dir(base + "/loop", Missing::create, "box root", ""), PlanError);
}

TEST_CASE("open_output_file: new, regular (truncated), never a FIFO or a symlink, never blocking") {
    test::TempDir t("trusted");
    const std::string base = t.dir.string();
    {
        UniqueFd fd = open_output_file(base + "/new", 0600);
        sys::write_all(fd.get(), "verdict", "new");
    }
    CHECK((sys::stat(base + "/new").st_mode & 0777) == 0600);
    {
        UniqueFd fd = open_output_file(base + "/new", 0644);
        CHECK(sys::fstat(fd.get(), "new").st_size == 0);  // truncated when opened
        CHECK(::lseek(fd.get(), 0, SEEK_CUR) == 0);
        sys::write_all(fd.get(), "ok", "new");  // shorter than what was there
    }
    CHECK(sys::read_file(base + "/new", 64) == "ok");
    REQUIRE(::mkfifo((base + "/fifo").c_str(), 0600) == 0);  // no reader: open would block
    CHECK_THROWS_WITH(open_output_file(base + "/fifo", 0644), "not a regular file (a FIFO)");
    CHECK_THROWS_WITH(open_output_file(base, 0644), "not a regular file (a directory)");
    sys::symlink_at(base + "/new", AT_FDCWD, base + "/link");
    try {
        open_output_file(base + "/link", 0644);
        FAIL("followed a symlink");
    } catch (const SysError& e) {
        CHECK(e.err() == ELOOP);
    }
    sys::symlink_at(base + "/absent", AT_FDCWD, base + "/dangling");  // O_CREAT would follow it
    CHECK_THROWS_AS(open_output_file(base + "/dangling", 0644), SysError);
    struct stat st {};
    CHECK(sys::try_stat(base + "/absent", st) == -ENOENT);
}

TEST_CASE("written_apart: the truncating open closed at once, what is written kept whole") {
    test::TempDir t("trusted");
    const std::string path = t.dir.string() + "/out";
    { std::ofstream(path) << "the last run's output, longer than this one's"; }
    const int truncating = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    REQUIRE(truncating >= 0);
    UniqueFd fd = written_apart(UniqueFd(truncating), O_WRONLY | O_CREAT | O_TRUNC, path);
    CHECK(fd.get() != truncating);
    CHECK(::fcntl(truncating, F_GETFD) == -1);  // closed, while the file was empty
    CHECK(sys::fstat(fd.get(), path).st_size == 0);
    CHECK((::fcntl(fd.get(), F_GETFL) & O_ACCMODE) == O_WRONLY);
    sys::write_all(fd.get(), "this run", path);
    fd.reset();
    CHECK(sys::read_file(path, 256) == "this run");
}

TEST_CASE("written_apart: a second open that fails names the flags it was given") {
    test::TempDir t("trusted");
    const std::string path = t.dir.string() + "/out";
    const int truncating = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    REQUIRE(truncating >= 0);
    try {  // a regular file opened as a directory: ENOTDIR, whoever runs the test
        written_apart(UniqueFd(truncating), O_WRONLY | O_DIRECTORY | O_TRUNC, path);
        FAIL("written_apart opened a regular file with O_DIRECTORY");
    } catch (const SysError& e) {
        CHECK(e.err() == ENOTDIR);
        CHECK(std::string(e.what()).find(cat("open(\"", path, "\", O_WRONLY|O_DIRECTORY)")) !=
              std::string::npos);
    }
    CHECK(::fcntl(truncating, F_GETFD) == -1);  // closed all the same
}
