#!/usr/bin/env bash
# The suites that need neither a broker nor Spark (what `make test` runs as "the rest") on each further Python we
# support (`make test-pythons`), the interpreters side by side: most of that suite waits on processes and timers, so
# two runs on two cores take little more than one. Each runs in its own virtual environment, .venv-X.Y, built by the
# Makefile's recipe for .venv (the package's dependencies and extras from pyproject.toml, pinned by constraints.txt).
# The last Python named (the newest) also runs the real-broker smoke tests (`-m smoke`: our consumers and a Java one
# in a group over TLS on a real RocketMQ). An interpreter is found through pyenv (the newest X.Y.Z it has), else as
# pythonX.Y on PATH; a missing one is said in one line and skipped, since a fresh machine may have only the default
# Python. Ends with one line per run: pytest's closing line. Exit status: 0 only if every run that ran passed;
# pytest's "no tests collected" (5) is said plainly, since a run that tested nothing is a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -gt 0 ] || { echo "usage: tests/run_pythons.sh X.Y [X.Y...]  (the newest last)" >&2; exit 2; }
newest=${!#}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# The path of a working Python $1 (X.Y), or nothing. Each candidate is asked its version: a pyenv shim on PATH
# exists for every version pyenv has, but runs only the one pyenv has selected.
find_python() {
    local version=$1 candidate
    local candidates=()
    if command -v pyenv >/dev/null; then
        mapfile -t candidates < <(find "$(pyenv root)/versions" -mindepth 1 -maxdepth 1 -name "$version.*" 2>/dev/null |
            grep -E "/$version\.[0-9]+$" | sort -rV | sed "s|\$|/bin/python$version|")
    fi
    candidates+=("python$version")
    for candidate in "${candidates[@]}"; do
        if [ "$("$candidate" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)" = "$version" ]; then
            command -v "$candidate"
            return
        fi
    done
}

# One interpreter's runs: the output of each step into $logs/$version.STEP.log, each pytest's exit status into
# $logs/$version.STEP.
run_one() {
    local version=$1 python=$2 venv=.venv-$1 status=0
    if ! make --no-print-directory venv VENV="$venv" PYTHON="$python" >"$logs/$version.venv.log" 2>&1; then
        return
    fi
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not spark" --ignore=tests/rocketmq \
        >"$logs/$version.rest.log" 2>&1 || status=$?
    echo "$status" >"$logs/$version.rest"
    if [ "$version" = "$newest" ]; then
        status=0
        "$venv/bin/python" -m pytest -q -p no:cacheprovider -m smoke tests/rocketmq \
            >"$logs/$version.smoke.log" 2>&1 || status=$?
        echo "$status" >"$logs/$version.smoke"
    fi
}

ran=()
declare -A release  # X.Y -> X.Y.Z
for version in "$@"; do
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        echo "make test-pythons: no Python $version here (neither pyenv nor python$version on PATH has it): skipped"
        continue
    fi
    release[$version]=$("$python" -c 'import platform; print(platform.python_version())')
    echo "make test-pythons: Python ${release[$version]} is $python; its runs print when they end"
    run_one "$version" "$python" &
    ran+=("$version")
done
wait

summary=()
failed=0
for version in "${ran[@]}"; do
    name="make test-pythons: Python ${release[$version]}"
    echo "=== Python ${release[$version]} ==="
    for step in venv rest smoke; do
        if [ -e "$logs/$version.$step.log" ]; then cat "$logs/$version.$step.log"; fi
    done
    if [ ! -e "$logs/$version.rest" ]; then
        summary+=("$name: its virtual environment .venv-$version could not be built")
        failed=1
    fi
    for part in rest smoke; do
        [ -e "$logs/$version.$part" ] || continue
        code=$(cat "$logs/$version.$part")
        what=$([ "$part" = rest ] && echo "the rest" || echo "real broker, -m smoke")
        summary+=("$name, $what: $(tail -n 1 "$logs/$version.$part.log")")  # pytest's closing line is its last
        if [ "$code" -eq 5 ]; then summary+=("$name, $what: pytest collected no tests"); fi
        if [ "$code" -ne 0 ]; then failed=1; fi
    done
done
if [ ${#ran[@]} -eq 0 ]; then summary+=("make test-pythons: none of Python $* is here: nothing ran"); fi
printf '%s\n' "${summary[@]}"
exit $failed
