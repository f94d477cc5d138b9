#include "profiles/profile_store.hpp"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <map>
#include <string>

#include "base/error.hpp"
#include "decision/config.hpp"
#include "support/test_files.hpp"
#include "support/test_fixtures.hpp"
#include "support/test_util.hpp"

namespace gpurun {
namespace {

using test::TempDir;

// A complete profile with one uint8 field of `bytes` per sample and the given batch size. It
// sets every key, so it stands alone ("extends": null) unless `extra` names a parent.
std::string complete(int batch_size, const std::string& extra = "") {
  const bool has_parent = extra.find("\"extends\"") != std::string::npos;
  return std::string(has_parent ? "{" : R"({"extends": null, )") +
         R"("fields": [{"name": "x", "shape": [100], "dtype": "uint8"}], "batch_size": )" + std::to_string(batch_size) +
         R"(, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true, "headroom": 1.0,
            "nccl_reserve": "64m", "min_shm": "64m", "max_shm": "1g")" +
         extra + "}";
}

using test::fake_env;

std::vector<std::string> names_of(const std::vector<ProfileEntry>& entries) {
  std::vector<std::string> out;
  for (const auto& e : entries) out.push_back(e.name);
  return out;
}

TEST(ProfileStore, FirstDirectoryWins) {
  TempDir a, b;
  a.write("foo.json", complete(8));
  b.write("foo.json", complete(16));
  b.write("bar.json", complete(32));
  ProfileStore store({a.path(), b.path()});
  EXPECT_EQ(store.find("foo"), a / "foo.json");
  EXPECT_EQ(store.load("foo").batch_size, 8u);
  EXPECT_EQ(store.load("bar").batch_size, 32u);
  EXPECT_EQ(store.load("foo").name, "foo");  // no "name" key: the name it was asked by
  EXPECT_EQ(store.load("foo").chain, std::vector<fs::path>{a / "foo.json"});
  ProfileStore reversed({b.path(), a.path()});
  EXPECT_EQ(reversed.load("foo").batch_size, 16u);
}

TEST(ProfileStore, ListReportsShadowedFiles) {
  TempDir a, b, c;
  a.write("foo.json", complete(8));
  b.write("foo.json", complete(16));
  c.write("foo.json", complete(16));
  b.write("bar.json", complete(32));
  b.write("notes.txt", "not a profile");
  ProfileStore store({a.path(), a / "does-not-exist", b.path(), c.path()});
  auto entries = store.list();
  ASSERT_EQ(names_of(entries), (std::vector<std::string>{"bar", "foo"}));
  EXPECT_EQ(entries[0].path, b / "bar.json");
  EXPECT_TRUE(entries[0].shadowed.empty());
  EXPECT_EQ(entries[1].path, a / "foo.json");
  EXPECT_EQ(entries[1].shadowed, (std::vector<fs::path>{b / "foo.json", c / "foo.json"}));
}

TEST(ProfileStore, TeamNamespace) {
  TempDir d;
  d.write("vision/resnet50.json", complete(256));
  d.write("resnet50.json", complete(1));
  ProfileStore store({d.path()});
  EXPECT_EQ(store.find("vision/resnet50"), d / "vision/resnet50.json");
  Profile p = store.load("vision/resnet50");
  EXPECT_EQ(p.batch_size, 256u);
  EXPECT_EQ(p.name, "vision/resnet50");
  EXPECT_EQ(store.load("resnet50").batch_size, 1u);
  EXPECT_EQ(names_of(store.list()), (std::vector<std::string>{"resnet50", "vision/resnet50"}));
}

TEST(ProfileStore, ANameOtherThanTheFilesIsRefusedAtLoad) {
  TempDir d;
  d.write("mine.json", complete(8, R"(, "name": "other")"));
  d.write("same.json", complete(8, R"(, "name": "same")"));
  d.write("vision/resnet50.json", complete(8, R"(, "name": "vision/resnet50")"));
  d.write("vision/bare.json", complete(8, R"(, "name": "bare")"));
  const ProfileStore store({d.path()});
  for (const auto& load : std::vector<std::function<Profile()>>{[&] { return store.load("mine"); },
                                                                [&] { return store.load_file(d / "mine.json"); }}) {
    const Error e = expect_error([&] { load(); });
    EXPECT_EQ(e.exit_code(), kExitUsage);
    EXPECT_CONTAINS(e.what(), "mine.json: key 'name': 'other' does not match the file's name");
    EXPECT_CONTAINS(e.what(), "rename the file to other.json");
  }
  EXPECT_EQ(store.load("same").name, "same");
  EXPECT_EQ(store.load("vision/resnet50").name, "vision/resnet50");
  EXPECT_EQ(store.load_file(d / "vision/resnet50.json").name, "vision/resnet50");  // by path: its team's name
  EXPECT_CONTAINS(expect_error([&] { store.load("vision/bare"); }).what(), "key 'name': 'bare'");
}

TEST(ProfileStore, AFileGivenByPathKeepsTheNameItSays) {
  // A team's profile copied into a job's repository: configs/deeplab512.json, named seg/deeplab512.
  // The name rule is for the search path; a file a person names by path is that profile.
  TempDir d;
  d.write("configs/deeplab512.json", R"({"name": "seg/deeplab512", "batch_size": 8})");
  d.write("configs/bad.json", R"({"name": "../x", "batch_size": 8})");
  const ProfileStore store({GPU_RUN_SOURCE_PROFILES});
  const Profile p = store.load((d / "configs/deeplab512.json").string());
  EXPECT_EQ(p.name, "seg/deeplab512");
  EXPECT_EQ(p.batch_size, 8u);
  // Still a name a door can record: an invalid one is refused, by path too.
  EXPECT_CONTAINS(expect_error([&] { store.load((d / "configs/bad.json").string()); }).what(), "key 'name'");
  // By name, not by path: the search path's rule holds.
  const ProfileStore on_path({d.path() / "configs", GPU_RUN_SOURCE_PROFILES});
  EXPECT_CONTAINS(expect_error([&] { on_path.load("deeplab512"); }).what(), "does not match the file's name");
}

TEST(ProfileStore, ExtendsResolvedAcrossDirectories) {
  TempDir user, builtin;
  user.write("child.json", R"({"extends": "base", "batch_size": 4, "description": "child"})");
  builtin.write("base.json", complete(64, R"(, "name": "base", "description": "base")"));
  builtin.write("grand.json", R"({"extends": "child", "prefetch_factor": 7})");
  ProfileStore store({user.path(), builtin.path()});
  Profile p = store.load("child");
  EXPECT_EQ(p.name, "child");
  EXPECT_EQ(p.description, "child");
  EXPECT_EQ(p.batch_size, 4u);
  EXPECT_EQ(p.max_shm, 1073741824u);  // from base
  EXPECT_EQ(p.chain, (std::vector<fs::path>{user / "child.json", builtin / "base.json"}));
  // A built-in may extend a user's profile by name too: the search path is one namespace.
  Profile g = store.load("grand");
  EXPECT_EQ(g.name, "grand");
  EXPECT_EQ(g.prefetch_factor, 7u);
  EXPECT_EQ(g.batch_size, 4u);
  EXPECT_EQ(g.description, "");  // a description is its own profile's, never inherited
  EXPECT_EQ(g.chain.size(), 3u);
}

TEST(ProfileStore, ExtendsCycleIsAnError) {
  TempDir d;
  d.write("a.json", R"({"extends": "b"})");
  d.write("b.json", R"({"extends": "c"})");
  d.write("c.json", R"({"extends": "a"})");
  d.write("self.json", R"({"extends": "self"})");
  ProfileStore store({d.path()});
  std::string m = error_of([&] { store.load("a"); });
  EXPECT_CONTAINS(m, "'extends'");
  EXPECT_CONTAINS(m, "cycle a -> b -> c -> a");
  // Extending its own name means the same name further down the path; there is none here.
  m = error_of([&] { store.load("self"); });
  EXPECT_CONTAINS(m, "unknown parent profile 'self'");
  EXPECT_CONTAINS(m, "self.json");
}

TEST(ProfileStore, ExtendingItsOwnNameOverridesTheProfileBelow) {
  TempDir upper, lower;
  lower.write("imagenet.json",
              R"({"extends": null, "fields": [{"name": "x", "shape": [10], "dtype": "uint8"}], "batch_size": 64,
    "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true, "headroom": 1.25, "nccl_reserve": "1g",
    "min_shm": "256m", "max_shm": "256g"})");
  upper.write("imagenet.json", R"({"extends": "imagenet", "batch_size": 128})");
  upper.write("team/imagenet.json", R"({"extends": "imagenet", "batch_size": 32})");
  ProfileStore store({upper.path(), lower.path()});
  Profile p = store.load("imagenet");
  EXPECT_EQ(p.batch_size, 128u);
  EXPECT_EQ(p.workers_per_gpu, 2u);
  ASSERT_EQ(p.chain.size(), 2u);
  EXPECT_EQ(p.chain[1], lower / "imagenet.json");
  // A team profile extending a top-level name is an ordinary parent lookup.
  EXPECT_EQ(store.load("team/imagenet").batch_size, 32u);
  EXPECT_EQ(store.load("team/imagenet").chain[1], upper / "imagenet.json");
  // A file given by path that extends its own name finds the name on the path.
  TempDir elsewhere;
  fs::path file = elsewhere.write("imagenet.json", R"({"extends": "imagenet", "batch_size": 16})");
  EXPECT_EQ(store.load(file.string()).batch_size, 16u);
}

TEST(ProfileStore, ExtendsUnknownParentIsAnError) {
  TempDir d;
  d.write("child.json", R"({"extends": "nope", "batch_size": 4})");
  std::string m = error_of([&] { ProfileStore({d.path()}).load("child"); });
  EXPECT_CONTAINS(m, (d / "child.json").string());
  EXPECT_CONTAINS(m, "'extends'");
  EXPECT_CONTAINS(m, "unknown parent profile 'nope'");
}

TEST(ProfileStore, ExtendsMisspeltParentOffersTheCloseNames) {
  TempDir d;
  d.write("imagenet.json", R"({"batch_size": 8})");
  d.write("child.json", R"({"extends": "imagenett", "batch_size": 4})");
  std::string m = error_of([&] { ProfileStore({d.path()}).load("child"); });
  EXPECT_CONTAINS(m, "unknown parent profile 'imagenett': did you mean imagenet?");
  // Nothing close: no offer.
  d.write("other.json", R"({"extends": "zzzzzzzzzz"})");
  EXPECT_EQ(error_of([&] { ProfileStore({d.path()}).load("other"); }).find("did you mean"), std::string::npos);
}

TEST(ProfileStore, ErrorInParentNamesTheParentFile) {
  TempDir d;
  d.write("child.json", R"({"extends": "base"})");
  d.write("base.json", R"({"batch_size": "many"})");
  std::string m = error_of([&] { ProfileStore({d.path()}).load("child"); });
  EXPECT_CONTAINS(m, (d / "base.json").string() + ": key 'batch_size'");
}

TEST(ProfileStore, IncompleteChainNamesTheMissingKey) {
  TempDir d;
  d.write("p.json", R"({"extends": null, "fields": [{"name": "x", "shape": [1], "dtype": "int8"}], "batch_size": 1})");
  std::string m = error_of([&] { ProfileStore({d.path(), GPU_RUN_SOURCE_PROFILES}).load("p"); });
  EXPECT_CONTAINS(m, (d / "p.json").string());
  EXPECT_CONTAINS(m, "key 'prefetch_factor': missing");
}

TEST(ProfileStore, AProfileWithoutExtendsExtendsDefault) {
  TempDir d;
  // A team's first profile: name, fields, batch size and workers, nothing else.
  d.write("team-a.json", R"({"name": "team-a", "fields": [{"name": "x", "shape": [3, 64, 64], "dtype": "uint8"}],
                             "batch_size": 16, "workers_per_gpu": 3})");
  const ProfileStore store({d.path(), GPU_RUN_SOURCE_PROFILES});
  const Profile p = store.load("team-a");
  const Profile def = store.load("default");
  EXPECT_EQ(p.batch_size, 16u);
  EXPECT_DOUBLE_EQ(p.headroom, def.headroom);
  EXPECT_EQ(p.max_shm, def.max_shm);
  EXPECT_EQ(p.prefetch_factor, def.prefetch_factor);
  ASSERT_EQ(p.chain.size(), 2u);
  EXPECT_EQ(p.chain[1].filename(), "default.json");
  // Without a default on the path the inherited parent is named.
  const std::string m = error_of([&] { ProfileStore({d.path()}).load("team-a"); });
  EXPECT_CONTAINS(m, (d / "team-a.json").string() + ": key 'extends': unknown parent profile 'default'");
}

TEST(ProfileStore, ADescriptionIsNotInherited) {
  TempDir d;
  // A team's profile without a description (as `profiles new` writes one without --description),
  // and a hand-written one with loaders: neither is described by its parent's words.
  d.write("team-a.json", R"({"fields": [{"name": "x", "shape": [3], "dtype": "uint8"}], "batch_size": 16})");
  d.write("team-b.json", R"({"extends": "team-a", "loaders": [{"name": "val", "batch_size": 8}]})");
  d.write("team-c.json", R"({"extends": "team-a", "description": "team C's own words"})");
  const ProfileStore store({d.path(), GPU_RUN_SOURCE_PROFILES});
  EXPECT_FALSE(store.load("default").description.empty());
  EXPECT_EQ(store.load("team-a").description, "");
  EXPECT_EQ(store.load("team-b").description, "");
  EXPECT_EQ(store.load("team-c").description, "team C's own words");
}

TEST(ProfileStore, ExtendsNullAndDefaultItselfStandAlone) {
  TempDir d;
  d.write("solo.json", complete(8));
  const ProfileStore store({d.path(), GPU_RUN_SOURCE_PROFILES});
  const Profile solo = store.load("solo");
  EXPECT_EQ(solo.chain.size(), 1u);
  EXPECT_EQ(solo.batch_size, 8u);
  EXPECT_EQ(store.load("default").chain.size(), 1u);
  // A host's own default.json stands alone too: it must set every key.
  TempDir host;
  host.write("default.json", R"({"batch_size": 4})");
  const std::string m = error_of([&] { ProfileStore({host.path(), GPU_RUN_SOURCE_PROFILES}).load("default"); });
  EXPECT_CONTAINS(m, (host / "default.json").string() + ": key");
  EXPECT_CONTAINS(m, "missing");
  // null is the only non-name value extends takes.
  d.write("bad.json", R"({"extends": 3})");
  EXPECT_CONTAINS(error_of([&] { store.load("bad"); }), "key 'extends'");
}

TEST(ProfileStore, UnknownProfileSuggestsCloseNames) {
  TempDir d;
  d.write("imagenet.json", complete(64));
  d.write("mnist.json", complete(64));
  d.write("coco.json", complete(64));
  ProfileStore store({d.path()});
  std::string m = error_of([&] { store.load("imagenett"); });
  EXPECT_CONTAINS(m, "unknown profile 'imagenett'");
  EXPECT_CONTAINS(m, "did you mean imagenet?");
  EXPECT_EQ(store.suggest("imagenett"), std::vector<std::string>{"imagenet"});
  EXPECT_EQ(store.suggest("minst").front(), "mnist");  // a transposition is distance 2
  m = error_of([&] { store.load("zzzzzzzzzzzz"); });
  EXPECT_CONTAINS(m, "unknown profile 'zzzzzzzzzzzz'");
  EXPECT_EQ(m.find("did you mean"), std::string::npos) << m;
  EXPECT_TRUE(store.suggest("zzzzzzzzzzzz").empty());
}

// Issue 40: the runtime under dockerd (no HOME) said "unknown profile 'myteam/bert' (...;
// searched 2 directories)" for a profile root wrote to ~/.config: the message names the
// directories, so the one it is missing from shows.
TEST(ProfileStore, UnknownProfileNamesTheDirectoriesSearched) {
  TempDir d;
  const ProfileStore store(
      container_profile_search_path({}, [&](const std::string& name) -> std::optional<std::string> {
        if (name == "GPU_RUN_BUILTIN_PROFILES") return (d.path() / "builtin").string();
        return std::nullopt;
      }));
  const std::string m = error_of([&] { store.load("myteam/bert", false); });
  EXPECT_CONTAINS(m, "unknown profile 'myteam/bert'");
  EXPECT_CONTAINS(m, std::string("searched ") + kSystemProfileDir + ", " + (d.path() / "builtin").string() + ")");
}

TEST(ProfileStore, InvalidNameIsRejectedBeforeTheFileSystem) {
  TempDir d;
  ProfileStore store({d.path()});
  EXPECT_CONTAINS(error_of([&] { store.load("../x", false); }), "not a valid profile name");
  EXPECT_CONTAINS(error_of([&] { store.load("Imagenet"); }), "not a valid profile name");
  EXPECT_FALSE(store.find("../x").has_value());
  // Control bytes are not echoed back raw.
  std::string m = error_of([&] { store.load(std::string("a\nb\x1b[31m")); });
  EXPECT_EQ(m.find('\n'), std::string::npos);
  EXPECT_EQ(m.find('\x1b'), std::string::npos);
}

TEST(ProfileStore, ProfilePathThatIsADirectory) {
  TempDir d;
  fs::create_directories(d / "foo.json");
  std::string m = error_of([&] { ProfileStore({d.path()}).load("foo"); });
  EXPECT_CONTAINS(m, (d / "foo.json").string());
  EXPECT_CONTAINS(m, "is a directory");
}

TEST(ProfileStore, ProfilePathThatIsAFifo) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "foo.json").c_str(), 0644), 0);
  // Must fail at once (no writer would ever come), not block in open() or read().
  std::string m = error_of([&] { ProfileStore({d.path()}).load("foo"); });
  EXPECT_CONTAINS(m, (d / "foo.json").string());
  EXPECT_CONTAINS(m, "not a regular file");
}

TEST(ProfileStore, EmptyFileIsMalformed) {
  TempDir d;
  d.write("foo.json", "");
  EXPECT_CONTAINS(error_of([&] { ProfileStore({d.path()}).load("foo"); }), "malformed JSON");
}

TEST(ProfileStore, OversizedFileIsRefused) {
  TempDir d;
  d.write("big.json", std::string((1 << 20) + 1, ' '));
  EXPECT_CONTAINS(error_of([&] { ProfileStore({d.path()}).load("big"); }), "larger than");
}

// chmod 000 only blocks a process without CAP_DAC_OVERRIDE. As root the check runs in a
// child that has switched to the nobody user.
TEST(ProfileStore, UnreadableFile) {
  TempDir d;
  fs::path file = d.write("secret.json", complete(8));
  ASSERT_EQ(::chmod(file.c_str(), 0), 0);
  auto check = [&]() -> int {
    std::string m = error_of([&] { ProfileStore({d.path()}).load("secret"); });
    if (m.find(file.string()) == std::string::npos) return 10;
    if (m.find("cannot open") == std::string::npos) return 11;
    if (m.find("check its permissions") == std::string::npos) return 12;
    return 0;
  };
  if (::geteuid() != 0) {
    EXPECT_EQ(check(), 0);
    return;
  }
  ASSERT_EQ(::chmod(d.path().c_str(), 0755), 0);  // nobody must reach the file to be refused by it
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(77);
    ::_exit(check());
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  SKIP_UNLESS(WEXITSTATUS(status) != 77, "running as root and cannot switch to uid 65534");
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: path not named, 11: not 'cannot open', 12: no hint";
}

TEST(ProfileStore, LoadByPath) {
  TempDir d, other;
  fs::path file = other.write("my-job.json", R"({"extends": "base", "batch_size": 3})");
  d.write("base.json", complete(64));
  ProfileStore store({d.path()});
  Profile p = store.load(file.string());
  EXPECT_EQ(p.name, "my-job");
  EXPECT_EQ(p.batch_size, 3u);
  EXPECT_EQ(p.chain, (std::vector<fs::path>{file, d / "base.json"}));
  EXPECT_EQ(store.load_file(file).batch_size, 3u);
  // From a container (allow_path=false) a path is just an invalid name.
  std::string m = error_of([&] { store.load(file.string(), false); });
  EXPECT_CONTAINS(m, "not a valid profile name");
  EXPECT_EQ(m.find("path to a .json file"), std::string::npos) << m;
  // A missing path says which file.
  m = error_of([&] { store.load((other / "missing.json").string()); });
  EXPECT_CONTAINS(m, (other / "missing.json").string());
  EXPECT_CONTAINS(m, "cannot open");
}

TEST(ProfileStore, SchemaFileIsNotAProfile) {
  TempDir d;
  d.write("profile.schema.json", R"({"$schema": "https://json-schema.org/draft/2020-12/schema"})");
  d.write("team/other.schema.json", "{}");
  d.write("foo.json", complete(8));
  ProfileStore store({d.path()});
  EXPECT_EQ(names_of(store.list()), std::vector<std::string>{"foo"});
  EXPECT_FALSE(store.find("profile.schema").has_value());
  EXPECT_CONTAINS(error_of([&] { store.load("profile.schema"); }), "unknown profile");
}

TEST(ProfileSearchPath, FullOrder) {
  Config config;
  config.profile_dirs = {"/cfg/a", "/cfg/b"};
  auto env = fake_env({{"GPU_RUN_PROFILE_PATH", "/p1::/p2:"},
                       {"XDG_CONFIG_HOME", "/xdg"},
                       {"HOME", "/home/u"},
                       {"GPU_RUN_BUILTIN_PROFILES", "/builtin"}});
  auto dirs = profile_search_path({"/cli1", "/cli2"}, config.profile_dirs, true, env);
  EXPECT_EQ(dirs, (std::vector<fs::path>{"/cli1", "/cli2", "/p1", "/p2", "/xdg/gpu-run/profiles", "/cfg/a", "/cfg/b",
                                         "/etc/gpu-run/profiles.d", "/builtin"}));
}

TEST(ProfileStore, PreloadKeepsEveryProfileAndReadsNoFileAfterwards) {
  TempDir a, b;
  a.write("foo.json", complete(8, R"(, "extends": "base")"));
  b.write("base.json", complete(4));
  b.write("team/bar.json", complete(16));
  a.write("broken.json", "{");
  ProfileStore store({a.path(), b.path()});
  store.preload();
  std::string broken_error;
  try {
    ProfileStore({a.path(), b.path()}).load("broken");
  } catch (const Error& e) {
    broken_error = e.what();
  }
  ASSERT_FALSE(broken_error.empty());
  fs::remove_all(a.path() / "foo.json");
  fs::remove_all(b.path() / "team");
  fs::remove_all(a.path() / "broken.json");
  EXPECT_EQ(store.load("foo", false).batch_size, 8u);
  EXPECT_EQ(store.load("foo", false).chain, (std::vector<fs::path>{a / "foo.json", b / "base.json"}));
  EXPECT_EQ(store.load("team/bar", false).batch_size, 16u);
  try {
    store.load("broken", false);
    ADD_FAILURE() << "a broken profile loads after preload";
  } catch (const Error& e) {
    EXPECT_EQ(e.what(), broken_error);
  }
  EXPECT_THROW(store.load("nothere", false), Error);  // unknown names are looked up as before
}

TEST(ProfileSearchPath, HomeWhenNoXdg) {
  Config config;
  auto dirs = profile_search_path({}, config.profile_dirs, true,
                                  fake_env({{"HOME", "/home/u"}, {"GPU_RUN_BUILTIN_PROFILES", "/b"}}));
  EXPECT_EQ(dirs, (std::vector<fs::path>{"/home/u/.config/gpu-run/profiles", "/etc/gpu-run/profiles.d", "/b"}));
  // An empty XDG_CONFIG_HOME counts as unset, as the XDG spec says.
  dirs = profile_search_path({}, config.profile_dirs, true,
                             fake_env({{"XDG_CONFIG_HOME", ""}, {"HOME", "/h"}, {"GPU_RUN_BUILTIN_PROFILES", "/b"}}));
  EXPECT_EQ(dirs.front(), fs::path("/h/.config/gpu-run/profiles"));
  // Neither: no user directory at all.
  dirs = profile_search_path({}, config.profile_dirs, true, fake_env({{"GPU_RUN_BUILTIN_PROFILES", "/b"}}));
  EXPECT_EQ(dirs, (std::vector<fs::path>{"/etc/gpu-run/profiles.d", "/b"}));
}

TEST(ProfileSearchPath, WithoutUserDropsEnvAndXdg) {
  Config config;
  config.profile_dirs = {"/cfg"};
  auto env = fake_env({{"GPU_RUN_PROFILE_PATH", "/p1"},
                       {"XDG_CONFIG_HOME", "/xdg"},
                       {"HOME", "/home/u"},
                       {"GPU_RUN_BUILTIN_PROFILES", "/builtin"}});
  auto dirs = profile_search_path({"/cli"}, config.profile_dirs, false, env);
  EXPECT_EQ(dirs, (std::vector<fs::path>{"/cli", "/cfg", "/etc/gpu-run/profiles.d", "/builtin"}));
}

TEST(BuiltinProfileDir, EnvOrNextToTheExecutable) {
  EXPECT_EQ(builtin_profile_dir(fake_env({{"GPU_RUN_BUILTIN_PROFILES", "/x/y"}})), fs::path("/x/y"));
  // Unset or empty: <dir of this executable>/../share/gpu-run/profiles.
  fs::path exe = fs::read_symlink("/proc/self/exe");
  fs::path expected = exe.parent_path().parent_path() / "share" / "gpu-run" / "profiles";
  EXPECT_EQ(builtin_profile_dir(fake_env({})), expected);
  EXPECT_EQ(builtin_profile_dir(fake_env({{"GPU_RUN_BUILTIN_PROFILES", ""}})), expected);
}

}  // namespace
}  // namespace gpurun
