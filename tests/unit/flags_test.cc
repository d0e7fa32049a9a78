#include "src/common/flags.h"

#include "gtest/gtest.h"

namespace hetpool {
namespace {

TEST(Flags, ParsesTypedValuesAndPositionals) {
  std::string s;
  int i = 0;
  bool b = false;
  absl::Duration d;
  std::vector<std::string> list = {"default"};
  FlagSet flags("test");
  flags.String("name", &s, "");
  flags.Int("count", &i, "");
  flags.Bool("verbose", &b, "");
  flags.Duration("timeout", &d, "");
  flags.List("backend", &list, "");
  flags.Alias("-v", "verbose");
  auto rest = flags.Parse(
      {"--name", "x", "pos", "--count=3", "-v", "--timeout", "2m", "--backend", "sim,nvml", "--backend=cndev"});
  ASSERT_TRUE(rest.ok()) << rest.status();
  EXPECT_EQ(*rest, std::vector<std::string>{"pos"});
  EXPECT_EQ(s, "x");
  EXPECT_EQ(i, 3);
  EXPECT_TRUE(b);
  EXPECT_EQ(d, absl::Minutes(2));
  EXPECT_EQ(list, (std::vector<std::string>{"sim", "nvml", "cndev"}));
}

TEST(Flags, ErrorsAreClear) {
  int i = 0;
  FlagSet flags("test");
  flags.Int("count", &i, "");
  EXPECT_NE(std::string(flags.Parse({"--colour"}).status().message()).find("unknown flag --colour"), std::string::npos);
  EXPECT_NE(std::string(flags.Parse({"--count", "many"}).status().message()).find("not an integer"), std::string::npos);
  EXPECT_NE(std::string(flags.Parse({"--count"}).status().message()).find("needs a value"), std::string::npos);
  EXPECT_TRUE(absl::IsCancelled(flags.Parse({"--help"}).status()));
}

TEST(Flags, ConfigFillsOnlyWhatTheCommandLineLeftUnset) {
  std::string listen, dir;
  FlagSet flags("test");
  flags.String("listen", &listen, "");
  flags.String("data-dir", &dir, "");
  ASSERT_TRUE(flags.Parse({"--listen", "127.0.0.1:1"}).ok());
  ASSERT_TRUE(flags.ApplyConfig({{"listen", "0.0.0.0:2"}, {"data_dir", "/var/lib/x"}}).ok());
  EXPECT_EQ(listen, "127.0.0.1:1");
  EXPECT_EQ(dir, "/var/lib/x");
  EXPECT_FALSE(flags.ApplyConfig({{"lisen", "x"}}).ok());
}

TEST(Flags, Durations) {
  EXPECT_EQ(*ParseDurationFlag("300s"), absl::Seconds(300));
  EXPECT_EQ(*ParseDurationFlag("30"), absl::Seconds(30));
  EXPECT_EQ(*ParseDurationFlag("250ms"), absl::Milliseconds(250));
  EXPECT_FALSE(ParseDurationFlag("soon").ok());
  EXPECT_FALSE(ParseDurationFlag("-5s").ok());
}

}  // namespace
}  // namespace hetpool
