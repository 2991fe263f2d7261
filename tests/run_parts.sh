#!/usr/bin/env bash
# The whole suite as three pytest runs side by side (`make test`): the real-RocketMQ tests (two workers), the Spark
# tests and the rest. The first two spend most of their time waiting on JVMs (brokers, Spark executors), so on two cores the
# three together take about the time of the longest instead of the sum. The rest prints its progress live; the
# other two are printed whole when they end; then each part's closing line, so the output ends with the pass
# counts (as `make test-pythons` ends with those of the other Pythons). Exit status: 0 only if all three passed;
# pytest's "no tests collected" (5) is said plainly, since a run that tested nothing is a failure.
set -u
python=${1:?usage: tests/run_parts.sh PYTHON}
export PYSPARK_PYTHON=$python
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# The real-RocketMQ modules on two workers, a module to each at a time (each worker starts its own session
# cluster): they wait on JVMs more than they compute, so two side by side take little more than the longest half.
"$python" -m pytest -q -p no:cacheprovider -n 2 --dist loadfile tests/rocketmq >"$logs/rocketmq" 2>&1 &
rocketmq=$!
"$python" -m pytest -q -p no:cacheprovider -m spark --ignore=tests/rocketmq >"$logs/spark" 2>&1 &
spark=$!
# The rest on two workers too: its end-to-end tests wait on processes (8,693 tests: 325 s against 448 s in one).
"$python" -m pytest -q -n 2 -m "not spark" --ignore=tests/rocketmq 2>&1 | tee "$logs/rest"
rest=${PIPESTATUS[0]}
wait $spark
spark_status=$?
wait $rocketmq
rocketmq_status=$?

for part in spark rocketmq; do
    echo "=== the $part tests (run beside the others) ==="
    cat "$logs/$part"
done
failed=0
for status in "rest:$rest" "spark:$spark_status" "rocketmq:$rocketmq_status"; do
    code=${status#*:}
    if [ "$code" -eq 5 ]; then echo "make test: the ${status%%:*} tests: pytest collected no tests" >&2; fi
    if [ "$code" -ne 0 ]; then failed=1; fi
done
version=$("$python" -c 'import platform; print(platform.python_version())')
for part in rest spark rocketmq; do  # pytest's closing line is its last
    echo "make test: Python $version, $part: $(tail -n 1 "$logs/$part")"
done
echo "make test: exit status rest $rest, spark $spark_status, rocketmq $rocketmq_status"
exit $failed
