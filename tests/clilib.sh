# Shared helpers for the CLI tests: run dtrain, check exit code and message.
# Usage in a test: source "$(dirname "$0")/clilib.sh" "$1"
DTRAIN=${1:?path to dtrain}
SRC=${DT_SOURCE_DIR:?}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fails=0; passes=0

# expect CODE PATTERN -- CMD...: exit code CODE and stderr+stdout matching PATTERN.
expect() {
    local code=$1 pattern=$2; shift 3
    local out rc
    out=$(timeout 120 "$@" 2>&1); rc=$?
    if [ "$rc" != "$code" ] || ! grep -qE -- "$pattern" <<<"$out"; then
        echo "FAIL: $* -> exit $rc (want $code), output:"; echo "$out" | tail -5
        echo "      (wanted /$pattern/)"
        fails=$((fails + 1))
    else
        passes=$((passes + 1))
    fi
}

# check DESCRIPTION COMMAND...: the command must succeed.
check() {
    local what=$1; shift
    if "$@"; then passes=$((passes + 1)); else echo "FAIL: $what"; fails=$((fails + 1)); fi
}

finish() {
    echo "$passes passed, $fails failed"
    [ "$fails" -eq 0 ]
}
