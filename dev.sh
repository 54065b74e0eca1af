#!/usr/bin/env bash
# daskprofile developer entry point.
#   bash dev.sh demo    install everything, open JupyterLab on examples/demo.ipynb
#   bash dev.sh test    install everything (incl. Debian's chromium), run the whole test suite
#   bash dev.sh setup   install everything only (.venv, editable package, built extension)
#   bash dev.sh lint    linters only
#   bash dev.sh screenshots  browser tests that rewrite the README's docs/images
set -euo pipefail
cd "$(dirname "$0")"
REPO=$PWD
VENV=$REPO/.venv
export PATH="$VENV/bin:$PATH"

die() { echo "dev.sh: $*" >&2; exit 2; }

check_tools() {
  command -v python3 >/dev/null || die "python3 not found: install Python >= 3.10"
  python3 -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    die "Python >= 3.10 needed, found $(python3 --version)"
  command -v node >/dev/null ||
    die "node not found: install Node.js >= 20 (e.g. 'apt-get install nodejs' or https://nodejs.org)"
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  [ "$major" -ge 20 ] || die "Node.js >= 20 needed to build the lab extension, found $(node --version)"
}

setup() {
  check_tools
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" ||
      die "could not create .venv: install Python's venv module (e.g. 'apt-get install python3-venv')"
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip
  # Builds src/ into labextension/ (jlpm install + jlpm build) and installs the package.
  "$VENV/bin/python" -m pip install -q -e ".[test]"
  # Serve the extension from the checkout, so 'jlpm watch' rebuilds show on reload.
  jupyter-builder develop --overwrite . >/dev/null
  jupyter labextension list 2>&1 | grep -q "daskprofile.*enabled.*OK" ||
    die "the daskprofile lab extension is not enabled: see 'jupyter labextension list'"
}

install_chromium() {
  [ -x /usr/bin/chromium ] && return
  echo "dev.sh: installing Debian's chromium for the browser tests"
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  elif command -v sudo >/dev/null; then
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    die "chromium missing and not root: run 'apt-get install chromium' as root"
  fi
}

demo() {
  setup
  # The printed URL opens the demo notebook (not the launcher), and this server's default
  # for the panel's `placement` setting is "main": the panel opens beside the notebook.
  # Your own settings still win (e.g. after "Dask Profile: Open in Sidebar").
  local config=$REPO/.cache/demo-config
  mkdir -p "$config/labconfig"
  echo '{"daskprofile:plugin": {"placement": "main"}}' >"$config/labconfig/default_setting_overrides.json"
  export JUPYTER_CONFIG_PATH="$config${JUPYTER_CONFIG_PATH:+:$JUPYTER_CONFIG_PATH}"
  local args=(--ServerApp.root_dir=examples --LabApp.default_url=/lab/tree/demo.ipynb)
  [ "$(id -u)" = 0 ] && args+=(--allow-root)
  exec jupyter lab "${args[@]}"
}

# --- tests -------------------------------------------------------------------------------
PASSED=0
FAILED=0
FAILURES=()
OUT=$REPO/test-output

check() {  # check NAME COMMAND...: a lint-like step counts as one test
  local name=$1; shift
  if "$@" >"$OUT/$name.log" 2>&1; then
    PASSED=$((PASSED + 1)); echo "ok      $name"
  else
    FAILED=$((FAILED + 1)); FAILURES+=("$name"); echo "FAILED  $name (see test-output/$name.log)"
    tail -n 30 "$OUT/$name.log" | sed 's/^/    /'
  fi
}

count_junit() {  # add the counts of a junit xml file to the totals
  local counts
  counts=$(python3 - "$1" <<'PY'
import sys, xml.etree.ElementTree as ET
try:
    root = ET.parse(sys.argv[1]).getroot()
except (OSError, ET.ParseError):
    print("0 1"); sys.exit()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
tests = sum(int(s.get("tests", 0)) for s in suites)
bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
print(tests - bad - skipped, bad)
PY
)
  PASSED=$((PASSED + ${counts% *})); FAILED=$((FAILED + ${counts#* }))
}

run_pytest() {  # run_pytest NAME PATHS...
  local name=$1; shift
  echo "pytest  $*"
  if ! python -m pytest "$@" -q -p no:cacheprovider --junitxml="$OUT/$name.xml" 2>&1 | tee "$OUT/$name.log" | tail -n 15; then
    :
  fi
  grep -qE "(passed|failed|error)" "$OUT/$name.log" || FAILURES+=("$name")
  count_junit "$OUT/$name.xml"
}

run_node_tests() {
  echo "node    TypeScript unit tests"
  jlpm test >"$OUT/ts-unit.log" 2>&1 || true
  tail -n 12 "$OUT/ts-unit.log"
  local pass fail
  pass=$(grep -E "^# pass " "$OUT/ts-unit.log" | awk '{print $3}' | tail -1)
  fail=$(grep -E "^# fail " "$OUT/ts-unit.log" | awk '{print $3}' | tail -1)
  if [ -z "$pass" ]; then FAILED=$((FAILED + 1)); FAILURES+=("ts-unit"); return; fi
  PASSED=$((PASSED + pass)); FAILED=$((FAILED + ${fail:-0}))
}

lint() {
  check ruff-lint ruff check python tests ui-tests benchmarks
  check ruff-format ruff format --check python tests ui-tests benchmarks
  check mypy mypy
  check prettier jlpm prettier:check
  check eslint jlpm eslint:check
  check tsc jlpm tsc --noEmit
}

run_tests() {
  setup
  install_chromium
  rm -rf "$OUT"; mkdir -p "$OUT"
  lint
  run_node_tests
  run_pytest python-tests tests
  run_pytest browser-tests ui-tests
  echo
  [ ${#FAILURES[@]} -eq 0 ] || echo "failed steps: ${FAILURES[*]}"
  echo "$PASSED passed, $FAILED failed"
  [ "$FAILED" -eq 0 ] && [ ${#FAILURES[@]} -eq 0 ]
}

case "${1:-help}" in
  demo) demo ;;
  test) run_tests ;;
  setup) setup ;;
  lint) setup; rm -rf "$OUT"; mkdir -p "$OUT"; lint; echo "$PASSED passed, $FAILED failed"; [ "$FAILED" -eq 0 ] ;;
  screenshots) setup; install_chromium; DASKPROFILE_UPDATE_SCREENSHOTS=1 python -m pytest ui-tests -q -p no:cacheprovider ;;
  *) sed -n '2,7p' "$0" | sed 's/^# //'; exit 2 ;;
esac
