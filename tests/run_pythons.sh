#!/usr/bin/env bash
# The suites that need neither a broker nor Spark (what `make test` runs as "the rest") on each further Python we
# support (`make test-pythons`), one after the other: CI runs this beside `make test` (.ci/run), whose three parts
# spend much of their time waiting, and more runs at once would only crowd two cores. Each Python has its own virtual
# environment, .venv-X.Y, built by the Makefile's recipe for .venv (the package's dependencies and extras from
# pyproject.toml, pinned by constraints.txt). The last Python named (the newest) also runs the real-broker smoke tests
# (`-m smoke`: our consumers and a Java one in a group over TLS on a real RocketMQ). An interpreter is found through
# pyenv (the newest X.Y.Z it has), else as pythonX.Y on PATH; a missing one is said in one line and skipped, since a
# fresh machine may have only the default Python. Ends with each run's closing line, its pass count. Exit status: 0
# only if every run that ran passed; pytest's "no tests collected" (5) is said plainly, since a run that tested
# nothing is a failure.
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

summary=()
failed=0
# One pytest run of Python $1 (X.Y.Z) in $2 (its venv): $3 names it, the rest are pytest's arguments.
run() {
    local release=$1 venv=$2 what=$3 status=0
    shift 3
    "$venv/bin/python" -m pytest -q -p no:cacheprovider "$@" 2>&1 | tee "$logs/run" || status=$?
    summary+=("make test-pythons: Python $release, $what: $(tail -n 1 "$logs/run")")  # pytest's closing line
    if [ "$status" -eq 5 ]; then summary+=("make test-pythons: Python $release, $what: pytest collected no tests"); fi
    if [ "$status" -ne 0 ]; then failed=1; fi
}

for version in "$@"; do
    python=$(find_python "$version")
    if [ -z "$python" ]; then
        summary+=("make test-pythons: no Python $version here (not in pyenv, no python$version on PATH): skipped")
        continue
    fi
    release=$("$python" -c 'import platform; print(platform.python_version())')
    echo "=== Python $release ($python) ==="
    if ! make --no-print-directory venv VENV=".venv-$version" PYTHON="$python"; then
        summary+=("make test-pythons: Python $release: its virtual environment .venv-$version could not be built")
        failed=1
        continue
    fi
    run "$release" ".venv-$version" "the rest" -n 2 -m "not spark" --ignore=tests/rocketmq  # as make test's rest
    if [ "$version" = "$newest" ]; then
        run "$release" ".venv-$version" "real broker, -m smoke" -m smoke tests/rocketmq
    fi
done
printf '%s\n' "${summary[@]}"
exit $failed
