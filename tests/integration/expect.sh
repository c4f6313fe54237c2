# Shared by the integration test scripts (sourced): the pattern check they report with.
# expect LABEL FILE PATTERN...: every PATTERN (a fixed string) occurs in FILE; prints
# "PASS LABEL", or "FAIL LABEL" with the missing pattern and FILE's last lines and sets fail=1.
expect() {
  local label=$1 file=$2
  shift 2
  for p in "$@"; do
    grep -qF -- "$p" "$file" || { echo "FAIL $label: '$p' not in the output:"; tail -8 "$file"; fail=1; return; }
  done
  echo "PASS $label"
}
