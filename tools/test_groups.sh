#!/usr/bin/env bash
# The test groups of `make test`, in order. Run by the Makefile, which passes PYTEST, JOBS,
# E2E_JOBS and RESULTS in the environment.
#
# Each group is:
# - bounded in wall time (its LIMIT, in minutes: about twice its time on this machine). At the
#   limit pytest gets SIGINT, so it prints where it was (the KeyboardInterrupt traceback), tears
#   its fixtures down (clusters, deployments) and writes its JUnit XML; SIGKILL a minute later if
#   it has not exited. A hung group therefore ends with its name and its place in the log, and
#   the groups after it still run, instead of a CI run that stops answering;
# - timed, with the machine's CPU over it (busy and steal shares, from /proc/stat): the figures
#   docs/contributing.md quotes for each group come from these lines;
# - swept: every process a group starts inherits IDEM_TEST_GROUP=<tag> in its environment, so
#   whatever is still alive when its pytest has exited (a JVM, a scheduler, a task runner whose
#   test was interrupted) is named and stopped before the next group competes with it for the CPU.
# A failing group does not stop the run: every group runs, then the script exits non-zero if any
# failed, so one CI run reports the whole suite.
set -uo pipefail

: "${PYTEST:?set by the Makefile}" "${JOBS:?}" "${E2E_JOBS:?}" "${RESULTS:?}"
read -r -a pytest_cmd <<<"$PYTEST"

cpu_sample() { # prints "total idle steal" jiffies of all CPUs
  local _cpu user nice system idle iowait irq softirq steal _rest
  read -r _cpu user nice system idle iowait irq softirq steal _rest </proc/stat
  echo "$((user + nice + system + idle + iowait + irq + softirq + steal)) $((idle + iowait)) $steal"
}

# Processes whose environment carries the group's tag: what the group left running.
tagged_pids() {
  local tag=$1 environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}
    pid=${pid%/environ}
    [[ $pid == "$$" ]] && continue
    if { tr '\0' '\n' <"$environ"; } 2>/dev/null | grep -qx "IDEM_TEST_GROUP=$tag"; then
      echo "$pid"
    fi
  done
}

sweep() {
  local tag=$1 name=$2 pids pid
  mapfile -t pids < <(tagged_pids "$tag")
  ((${#pids[@]})) || return 0
  echo "[test] $name left ${#pids[@]} process(es) running; stopping them:"
  for pid in "${pids[@]}"; do
    echo "  $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-160)"
    kill -TERM "$pid" 2>/dev/null
  done
  sleep 5
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  return 0
}

# The groups running now, by name: their timeout's pid, tag, start (SECONDS), CPU sample at the
# start, limit and output file ("" when it writes to the terminal). Two may run at once (`beside`).
declare -A group_pid group_tag group_began group_cpu group_limit group_log
running=()

# SIGINT or SIGTERM to the whole run (CI giving up, a Ctrl-C): each running group's pytest gets
# SIGINT, as at its time limit, and a minute to tear its fixtures down; then whatever the group
# started is swept by its tag before the script exits. Without this, deployments and clusters that
# run in process groups of their own outlived a run stopped between its groups' sweeps.
on_signal() {
  local sig=$1 name pid
  trap - INT TERM
  echo "[test] $(date -u +%T) SIG$sig: stopping ${running[*]:-the run}"
  for name in "${running[@]}"; do
    kill -INT "${group_pid[$name]}" 2>/dev/null
  done
  for name in "${running[@]}"; do
    pid=${group_pid[$name]}
    for _ in {1..60}; do
      kill -0 "$pid" 2>/dev/null || break
      sleep 1
    done
    kill -KILL "$pid" 2>/dev/null
    sweep "${group_tag[$name]}" "$name"
    [[ -n ${group_log[$name]} ]] && cat "${group_log[$name]}"
  done
  [[ $sig == INT ]] && exit 130
  exit 143
}
trap 'on_signal INT' INT
trap 'on_signal TERM' TERM

failed=()
start_group() { # name, limit in minutes, output file ("": the terminal), pytest arguments
  local name=$1 limit=$2 log=$3 tag
  shift 3
  tag="$name-$$-$RANDOM"
  echo "[test] $(date -u +%T) group $name (limit $limit min${log:+, its output when it ends}):" \
    "${pytest_cmd[*]} --junitxml=$RESULTS/$name.xml $*"
  group_cpu[$name]=$(cpu_sample)
  group_began[$name]=$SECONDS
  # In the background and waited for, so a signal to this script is handled at once (on_signal)
  # rather than after the group has ended.
  if [[ -n $log ]]; then # not a reopened /dev/stdout: that truncates a log file the run writes to
    IDEM_TEST_GROUP=$tag timeout --foreground --signal=INT --kill-after=60 "${limit}m" \
      "${pytest_cmd[@]}" "--junitxml=$RESULTS/$name.xml" "$@" >"$log" 2>&1 &
  else
    IDEM_TEST_GROUP=$tag timeout --foreground --signal=INT --kill-after=60 "${limit}m" \
      "${pytest_cmd[@]}" "--junitxml=$RESULTS/$name.xml" "$@" &
  fi
  group_pid[$name]=$!
  group_tag[$name]=$tag
  group_limit[$name]=$limit
  group_log[$name]=$log
  running+=("$name")
}

finish_group() { # name [rc, when already waited for]: wait for it, sweep what it left, print its
  # output file and its figures
  local name=$1 rc spent jiffies total0 idle0 steal0 total1 idle1 steal1 limit other
  if (($# > 1)); then
    rc=$2
  else
    wait "${group_pid[$name]}"
    rc=$?
  fi
  local still=()
  for other in "${running[@]}"; do [[ $other == "$name" ]] || still+=("$other"); done
  running=("${still[@]}")
  read -r total0 idle0 steal0 <<<"${group_cpu[$name]}"
  read -r total1 idle1 steal1 < <(cpu_sample)
  sweep "${group_tag[$name]}" "$name"
  [[ -n ${group_log[$name]} ]] && cat "${group_log[$name]}"
  spent=$((SECONDS - group_began[$name]))
  limit=${group_limit[$name]}
  jiffies=$((total1 - total0 > 0 ? total1 - total0 : 1))
  printf '[test] %s group %s: rc %s in %d min %02d s; CPU %d%% busy, %d%% steal\n' "$(date -u +%T)" \
    "$name" "$rc" $((spent / 60)) $((spent % 60)) \
    $((100 * (jiffies - (idle1 - idle0)) / jiffies)) $((100 * (steal1 - steal0) / jiffies))
  case $rc in
    0) ;;
    5) echo "[test] no tests collected in group $name: fine" ;; # a marker that selects nothing
    124 | 137)
      echo "[test] group $name passed its $limit-minute limit: stopped (its traceback is above)"
      failed+=("$name (over $limit min)")
      ;;
    *) failed+=("$name") ;;
  esac
}

finish_first() { # the running groups named, each finished as it ends (its time is its own, not the
  # time until the other one ended)
  local left=("$@") name pid rc
  while ((${#left[@]})); do
    local pids=()
    for name in "${left[@]}"; do pids+=("${group_pid[$name]}"); done
    wait -n -p pid "${pids[@]}"
    rc=$?
    local still=()
    for name in "${left[@]}"; do
      if [[ ${group_pid[$name]} == "$pid" ]]; then finish_group "$name" "$rc"; else still+=("$name"); fi
    done
    left=("${still[@]}")
  done
}

run_group() { # name, limit in minutes, pytest arguments: alone, its output on the terminal
  local name=$1 limit=$2
  shift 2
  start_group "$name" "$limit" "" "$@"
  finish_group "$name"
}

mkdir -p "$RESULTS"
# The groups, their order and shapes: the Makefile's comment above `test` says why. The limits stop
# a hung group, not a slow one: each is at least 1.35x the group's longest clean run (fast 8.5 min,
# DAG runs 5.6 and the Celery and load files 4.9 beside Spark 23.7, end to end 10.4 alone, in runs on
# slow days; under a helper's load the DAG runs took 9.9 min; with end to end beside it, 14.4 min, the
# Spark group took 31.5) and add up to 64 min at most (the fast group's 16, then the DAG runs' 14,
# the Celery and load files' 14 and end to end's 20 one after another beside the Spark group's 43),
# inside CI's 90 with the 2 min of lint, release check and docs.
run_group fast 16 -n "$JOBS" -m "not dagrun and not e2e and not spark" tests
# Beside the Spark group, one after the other, their output printed when each ends: the DAG runs on
# one worker, then the Celery deployment and the load test. The cluster's tests leave a fifth of the
# CPU idle (79-83% busy), waiting on the Connect server: the DAG runs beside them (about 6
# CPU-minutes) did not lengthen the Spark group (19.4 min alone in a4ead80's run, 19.1 beside them in
# b21ef06's), and the Celery and load files alone left 38% of the CPU idle (4.9 min, 62% busy).
start_group 1-dagrun 14 "$RESULTS/1-dagrun.log" -v -n 1 -m dagrun tests
start_group 2-spark 43 "" -v -m "spark and not exhaustive" tests/spark
finish_group 1-dagrun
# The load test at a sixth of the year it runs under `make reliability` (365 windows, twice: 7 min
# alone on this machine): 60 windows still fill its 8 and then 32 concurrent runs, and cost about
# half of the 120 that took 257 s of the group's 7.2 min (the post-fast phase is CPU-bound, so the
# Spark group beside gets the CPU). Its report says how many windows ran, and what ran beside.
export IDEM_RELIABILITY_LOAD_WINDOWS=${IDEM_RELIABILITY_LOAD_WINDOWS:-60}
IDEM_RELIABILITY_LOAD_BESIDE="the Spark group's tests" \
  start_group 1b-celery-load 14 "$RESULTS/1b-celery-load.log" -v -m e2e tests/e2e/test_celery_cluster.py tests/reliability/test_load.py
finish_group 1b-celery-load
# Then the end-to-end files, still beside the Spark group's last minutes (alone its tests leave a
# fifth of the CPU idle; the end-to-end files alone another 11-19%), printed when they end.
start_group 3-e2e 20 "$RESULTS/3-e2e.log" -v -n "$E2E_JOBS" --dist loadfile -m e2e tests \
  --ignore=tests/reliability/test_load.py --ignore=tests/e2e/test_celery_cluster.py
finish_first 2-spark 3-e2e

if ((${#failed[@]})); then
  echo "[test] failed groups: ${failed[*]}"
  exit 1
fi
