// Test fixture shared by the checkpoint tests: a fresh directory per test, removed after it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "checkpoint/format.h"  // JoinPath

namespace loom {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = (std::filesystem::temp_directory_path() /
            ("loom_" + std::string(t->test_suite_name()) + "_" + std::to_string(::getpid()) + "_" +
             t->name()))
               .string();
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& rel) const { return JoinPath(dir_, rel); }
  std::string dir_;
};

}  // namespace loom
