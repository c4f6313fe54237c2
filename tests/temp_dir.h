// Temporary files for tests, cleaned up by the suite itself: every test that needs files gets a
// directory of its own under $TMPDIR (or /tmp), made with mkdtemp and removed with everything in it
// when the test ends, whether it passed, failed or threw. Nothing a test writes is left in /tmp.
//
//   std::string path = loom::testing::TestTempPath("job.yaml");   // <the test's dir>/job.yaml
//   class MyTest : public loom::testing::TempDirTest {};           // dir_ and Path(rel) in TEST_F
//
// The removal at the end of each test is done by a GoogleTest event listener that this header
// registers before main() runs, so it works with gtest_main and with tests/mpi_test_main.cc alike
// (under mpirun every rank has its own directory: the process id is in its name). A test that
// crashes the process leaves its directory behind, named after the test.
//
// Thread-safety: TestTempDir() and TestTempPath() are for the test's own thread (test body, fixture
// constructor, SetUp, TearDown); threads a test starts may use the paths they return.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>

namespace loom::testing {

// A new, empty directory "<$TMPDIR or /tmp>/<stem>_XXXXXX" (mkdtemp), removed with its contents
// when this object is destroyed. Aborts the test program when the directory cannot be made: a
// test cannot run without it, and writing elsewhere would leave files behind.
class TempDir {
 public:
  explicit TempDir(const std::string& stem) {
    std::string tmpl = (std::filesystem::temp_directory_path() / (stem + "_XXXXXX")).string();
    if (::mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "TempDir: mkdtemp('%s'): %s\n", tmpl.c_str(), std::strerror(errno));
      std::abort();
    }
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;  // best effort: a failed removal must not turn into a second failure
    std::filesystem::remove_all(path_, ec);
    if (ec) std::fprintf(stderr, "TempDir: remove '%s': %s\n", path_.c_str(), ec.message().c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // `rel` inside the directory (std::filesystem's `/`: an absolute `rel` is returned as it is).
  std::string Path(const std::string& rel) const {
    return (std::filesystem::path(path_) / rel).string();
  }

 private:
  std::string path_;
};

namespace internal {

// The running test's directory; empty between tests.
inline std::unique_ptr<TempDir>& CurrentTestDir() {
  static std::unique_ptr<TempDir> dir;
  return dir;
}

// "loom_<Suite>.<Test>_<pid>" with every character other than [A-Za-z0-9_.-] replaced by '_'
// (parameterised tests have '/' in their names).
inline std::string TestDirStem() {
  const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name =
      t == nullptr ? std::string("no_test") : std::string(t->test_suite_name()) + "." + t->name();
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  return "loom_" + name + "_" + std::to_string(::getpid());
}

// Removes the test's directory once the test has ended (after TearDown and the fixture's
// destructor), and whatever is left when the program ends.
class RemoveTestDirAtEnd : public ::testing::EmptyTestEventListener {
  void OnTestEnd(const ::testing::TestInfo&) override { CurrentTestDir().reset(); }
  void OnTestProgramEnd(const ::testing::UnitTest&) override { CurrentTestDir().reset(); }
};

// Registered once per program, before main() (GoogleTest owns the listener).
inline const bool kRemoveTestDirAtEndRegistered = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveTestDirAtEnd);
  return true;
}();

}  // namespace internal

// The running test's own directory, made on the first call within the test and removed when the
// test ends. Every call within one test returns the same directory.
inline const std::string& TestTempDir() {
  std::unique_ptr<TempDir>& dir = internal::CurrentTestDir();
  if (!dir) dir = std::make_unique<TempDir>(internal::TestDirStem());
  return dir->path();
}

// `rel` inside the running test's directory (std::filesystem's `/`).
inline std::string TestTempPath(const std::string& rel) {
  return (std::filesystem::path(TestTempDir()) / rel).string();
}

// Fixture for tests that work in a directory: dir_ is the test's own directory (TestTempDir()),
// empty when the test starts and removed when it ends.
class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TestTempDir(); }
  std::string Path(const std::string& rel) const { return TestTempPath(rel); }
  std::string dir_;
};

}  // namespace loom::testing
