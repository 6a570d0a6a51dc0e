#!/usr/bin/env bash
# A MiniDFSCluster on loopback (tools/minidfs), for the hdfs:// store's tests
# and benchmarks. Called by scripts/servers:
#
#   hdfs.sh prepare [STATE]             resolve the Maven jars into ~/.m2 once, compile the launcher
#   hdfs.sh start STATE                 start the cluster; the last stdout line is hdfs://127.0.0.1:PORT
#   hdfs.sh stop STATE                  end it by the PID in STATE/pid (no-op when not running)
#   hdfs.sh stop-datanode INDEX STATE   stop DataNode INDEX (as numbered in STATE/datanodes.txt)
#
# Environment for start: PLFS_HDFS_DATANODES (default 3), PLFS_HDFS_REPLICATION
# (default 3 or the DataNodes if fewer, at most the DataNodes; a close may
# take ~500 ms, see tools/minidfs). STATE holds
# pid, log, url, datanodes.txt and the cluster's blocks under data/.
# datanodes.txt has a line per DataNode: INDEX http://127.0.0.1:PORT BEAN,
# its HTTP server and its activity MBean (BytesRead: bytes it served). The
# DataNodes share one JVM, so every /jmx lists all their beans: pick by name.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
tool="$repo/tools/minidfs"
# Build products stay out of the source tree; the jars stay in ~/.m2.
cache="$repo/target/minidfs"

START_TIMEOUT_SECONDS=90
STOP_TIMEOUT_SECONDS=20
COMMAND_TIMEOUT_SECONDS=30

die() { echo "hdfs: $*" >&2; exit 1; }

# A fingerprint of everything prepare's output depends on, so an edit to the
# pom or the launcher rebuilds and an unchanged tree costs nothing.
fingerprint() {
  cat "$tool/pom.xml" "$tool/src/main/java/plfs/minidfs/Launcher.java" | sha256sum | cut -d' ' -f1
}

prepare() {
  command -v java >/dev/null || die "java not found (scripts/install-deps.sh installs openjdk-17-jdk-headless)"
  command -v mvn >/dev/null || die "mvn not found (scripts/install-deps.sh installs maven)"
  local stamp
  stamp="$(fingerprint)"
  if [[ -f "$cache/prepared" && "$(cat "$cache/prepared")" == "$stamp" ]]; then
    return 0
  fi
  mkdir -p "$cache"
  echo "hdfs: resolving hadoop-minicluster into ~/.m2 (first time ~1 min) and compiling the launcher" >&2
  # -o would make a later run fail if the cache were pruned; Maven reads
  # ~/.m2 first anyway, so an unchanged pom does not touch the network.
  (cd "$tool" && mvn -q -B dependency:build-classpath -Dmdep.outputFile="$cache/classpath.txt") \
    >"$cache/prepare.log" 2>&1 || die "resolving the Maven dependencies failed; see $cache/prepare.log"
  rm -rf "$cache/classes"
  mkdir -p "$cache/classes"
  javac --release 17 -nowarn -d "$cache/classes" -cp "$(cat "$cache/classpath.txt")" \
    "$tool/src/main/java/plfs/minidfs/Launcher.java" >>"$cache/prepare.log" 2>&1 \
    || die "compiling the launcher failed; see $cache/prepare.log"
  echo "$stamp" >"$cache/prepared"
}

# The PID in STATE/pid if that process is still our launcher.
running_pid() {
  local state="$1" pid
  [[ -f "$state/pid" ]] || return 1
  pid="$(cat "$state/pid")"
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  grep -q "plfs.minidfs.Launcher" "/proc/$pid/cmdline" 2>/dev/null || return 1
  echo "$pid"
}

start() {
  local state="$1"
  prepare
  if running_pid "$state" >/dev/null; then
    die "a cluster is already running from $state (PID $(cat "$state/pid")); stop it first"
  fi
  mkdir -p "$state"
  rm -rf "$state/data" "$state/commands" "$state/url" "$state/datanodes.txt"
  # tools/minidfs first on the classpath: its log4j.properties keeps the
  # cluster at WARN, its hadoop-metrics2.properties refreshes JMX every second.
  local classpath="$tool:$cache/classes:$(cat "$cache/classpath.txt")"
  # setsid: the cluster outlives the shell that started it (the test's
  # scripts/servers call returns once the URL is printed).
  setsid java -Xmx1g -XX:+UseSerialGC -Djava.net.preferIPv4Stack=true \
    -cp "$classpath" plfs.minidfs.Launcher "$state" \
    </dev/null >"$state/log" 2>&1 &
  local pid=$!
  echo "$pid" >"$state/pid"
  local deadline=$((SECONDS + START_TIMEOUT_SECONDS))
  until [[ -s "$state/url" ]]; do
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -n 20 "$state/log" >&2 || true
      die "the MiniDFSCluster exited before it was ready; see $state/log"
    fi
    if ((SECONDS >= deadline)); then
      stop "$state"
      die "the MiniDFSCluster was not ready within ${START_TIMEOUT_SECONDS}s; see $state/log"
    fi
    sleep 0.2
  done
  cat "$state/url"
}

stop() {
  local state="$1" pid
  pid="$(running_pid "$state")" || { rm -f "$state/pid"; return 0; }
  # TERM runs the launcher's shutdown hook (cluster.shutdown()).
  kill -TERM "$pid" 2>/dev/null || true
  local deadline=$((SECONDS + STOP_TIMEOUT_SECONDS))
  while kill -0 "$pid" 2>/dev/null; do
    if ((SECONDS >= deadline)); then
      echo "hdfs: PID $pid did not stop within ${STOP_TIMEOUT_SECONDS}s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.1
  done
  rm -f "$state/pid"
}

# Hands one command to the running launcher and waits for its answer.
command_to_cluster() {
  local state="$1" text="$2"
  running_pid "$state" >/dev/null || die "no cluster is running from $state"
  local name="cmd.$$.$RANDOM"
  mkdir -p "$state/commands"
  printf '%s\n' "$text" >"$state/commands/$name.tmp"
  mv "$state/commands/$name.tmp" "$state/commands/$name.cmd"
  local deadline=$((SECONDS + COMMAND_TIMEOUT_SECONDS))
  until [[ -s "$state/commands/$name.done" ]]; do
    ((SECONDS < deadline)) || die "\"$text\" got no answer within ${COMMAND_TIMEOUT_SECONDS}s; see $state/log"
    sleep 0.1
  done
  local answer
  answer="$(cat "$state/commands/$name.done")"
  rm -f "$state/commands/$name.done"
  [[ "$answer" == ok ]] || die "\"$text\": $answer"
  echo "$answer"
}

[[ $# -ge 1 ]] || die "usage: hdfs.sh prepare|start|stop [STATE] | stop-datanode INDEX STATE"
action="$1"
case "$action" in
  prepare) prepare ;;
  start) [[ $# -eq 2 ]] || die "usage: hdfs.sh start STATE"; start "$2" ;;
  stop) [[ $# -eq 2 ]] || die "usage: hdfs.sh stop STATE"; stop "$2" ;;
  stop-datanode)
    [[ $# -eq 3 && "$2" =~ ^[0-9]+$ ]] || die "usage: hdfs.sh stop-datanode INDEX STATE"
    command_to_cluster "$(cd "$3" && pwd)" "stop-datanode $2" ;;
  *) die "unknown action \"$action\" (prepare, start, stop, stop-datanode)" ;;
esac
