#include "serve/profile_cache.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>

#include "base/error.hpp"
#include "support/test_files.hpp"

namespace gpurun {
namespace {

using namespace std::chrono_literals;
using test::TempDir;

// A profile that stands alone, told apart by its batch size.
std::string profile(int batch_size) {
  return R"({"extends": null, "fields": [{"name": "x", "shape": [100], "dtype": "uint8"}], "batch_size": )" +
         std::to_string(batch_size) +
         R"(, "workers_per_gpu": 2, "prefetch_factor": 2, "pin_memory": true, "headroom": 1.0,
            "nccl_reserve": "64m", "min_shm": "64m", "max_shm": "1g"})";
}

// Replaces `path` as an editor or kubectl cp does: a new file renamed over the old one.
void replace(const TempDir& dir, const std::string& rel, const std::string& text) {
  const fs::path tmp = dir.write(rel + ".tmp", text);
  fs::rename(tmp, dir / rel);
}

std::uint64_t batch_of(ProfileCache& cache, const std::string& name) {
  return cache.current()->load(name, /*allow_path=*/false).batch_size;
}

TEST(ProfileCache, UnchangedDirectoriesAreNotReadAgain) {
  TempDir dir;
  dir.write("a.json", profile(8));
  dir.write("team/b.json", profile(16));
  ProfileCache cache({dir.path()}, 0ms);
  const auto first = cache.current();
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(batch_of(cache, "a"), 8u);
    EXPECT_EQ(batch_of(cache, "team/b"), 16u);
  }
  EXPECT_EQ(cache.builds(), 1u);
  EXPECT_EQ(cache.current(), first);  // the same store, not a copy
}

TEST(ProfileCache, EditedAddedAndRemovedProfilesAreSeenOnTheNextCall) {
  TempDir dir;
  dir.write("a.json", profile(8));
  ProfileCache cache({dir.path()}, 0ms);
  EXPECT_EQ(batch_of(cache, "a"), 8u);

  replace(dir, "a.json", profile(32));
  EXPECT_EQ(batch_of(cache, "a"), 32u);
  EXPECT_EQ(cache.builds(), 2u);

  dir.write("c.json", profile(64));
  EXPECT_EQ(batch_of(cache, "c"), 64u);
  dir.write("team/d.json", profile(128));
  EXPECT_EQ(batch_of(cache, "team/d"), 128u);

  fs::remove(dir / "a.json");
  try {
    cache.current()->load("a", /*allow_path=*/false);
    FAIL() << "a removed profile still loads";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown profile 'a'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(cache.builds(), 5u);
}

TEST(ProfileCache, AnInPlaceEditOfAnotherSizeIsSeen) {
  TempDir dir;
  dir.write("a.json", profile(8));
  ProfileCache cache({dir.path()}, 0ms);
  EXPECT_EQ(batch_of(cache, "a"), 8u);
  dir.write("a.json", profile(1024));  // same inode, another size
  EXPECT_EQ(batch_of(cache, "a"), 1024u);
}

// A ConfigMap volume as the kubelet writes it: the data in a timestamped directory, `..data` a
// symlink to it, each key a symlink through `..data`; an update writes a new directory and
// renames a new `..data` symlink over the old one.
TEST(ProfileCache, AConfigMapDataSwapIsSeen) {
  TempDir dir;
  dir.write("..2026_12_03_07_00_00.1/a.json", profile(8));
  fs::create_symlink("..2026_12_03_07_00_00.1", dir / "..data");
  fs::create_symlink("..data/a.json", dir / "a.json");
  ProfileCache cache({dir.path()}, 0ms);
  EXPECT_EQ(batch_of(cache, "a"), 8u);
  EXPECT_EQ(batch_of(cache, "a"), 8u);
  EXPECT_EQ(cache.builds(), 1u);

  dir.write("..2026_12_03_07_01_00.2/a.json", profile(24));
  fs::create_symlink("..2026_12_03_07_01_00.2", dir / "..data_tmp");
  fs::rename(dir / "..data_tmp", dir / "..data");
  fs::remove_all(dir / "..2026_12_03_07_00_00.1");
  EXPECT_EQ(batch_of(cache, "a"), 24u);
  EXPECT_EQ(cache.builds(), 2u);
}

TEST(ProfileCache, AProfileThatFailsToLoadFailsTheSameWayFromTheCache) {
  TempDir dir;
  dir.write("bad.json", R"({"batch_size": "many"})");
  ProfileStore direct({dir.path()});
  std::string expected;
  try {
    direct.load("bad", false);
  } catch (const Error& e) {
    expected = e.what();
  }
  ASSERT_FALSE(expected.empty());
  ProfileCache cache({dir.path()}, 0ms);
  for (int i = 0; i < 2; ++i) {
    try {
      cache.current()->load("bad", false);
      FAIL() << "a bad profile loads from the cache";
    } catch (const Error& e) {
      EXPECT_EQ(e.what(), expected);
      EXPECT_EQ(e.exit_code(), kExitUsage);
    }
  }
  EXPECT_EQ(cache.builds(), 1u);
}

TEST(ProfileCache, ChecksAtMostOncePerInterval) {
  TempDir dir;
  dir.write("a.json", profile(8));
  ProfileCache cache({dir.path()}, 1h);
  replace(dir, "a.json", profile(32));
  EXPECT_EQ(batch_of(cache, "a"), 8u);  // within the hour: the store loaded at the start
  EXPECT_EQ(cache.builds(), 1u);
}

TEST(ProfileCache, ADirectoryThatAppearsLaterIsSeen) {
  TempDir parent;
  const fs::path dir = parent / "profiles";
  ProfileCache cache({dir}, 0ms);
  EXPECT_THROW(cache.current()->load("a", false), Error);
  parent.write("profiles/a.json", profile(8));
  EXPECT_EQ(batch_of(cache, "a"), 8u);
}

TEST(ProfileCache, ManyThreadsShareTheStoreWhileItIsReplaced) {
  TempDir dir;
  dir.write("a.json", profile(8));
  ProfileCache cache({dir.path()}, 0ms);
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        const auto batch = batch_of(cache, "a");
        if (batch != 8u && batch != 32u) ++bad;
      }
    });
  }
  replace(dir, "a.json", profile(32));
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(batch_of(cache, "a"), 32u);
}

TEST(ProfileDirsStamps, FollowSymlinksAndRecordAbsence) {
  TempDir dir;
  dir.write("real/a.json", profile(8));
  fs::create_directory(dir / "p");
  fs::create_symlink(dir / "real/a.json", dir / "p/a.json");
  const auto stamps = profile_dirs_stamps({dir / "p", dir / "missing"});
  ASSERT_EQ(stamps.size(), 4u);  // p, p/..data (absent), p/a.json, missing
  EXPECT_EQ(stamps[1].error, ENOENT);
  EXPECT_EQ(stamps[2].path, dir / "p/a.json");
  EXPECT_EQ(stamps[2].size, static_cast<off_t>(profile(8).size()));  // the file, not the link
  EXPECT_EQ(stamps[3].error, ENOENT);
}

}  // namespace
}  // namespace gpurun
