#!/usr/bin/env bash
# A MinIO S3 server on loopback for the s3:// store's tests and benchmarks.
#
#   s3.sh prepare STATE   builds MinIO with `go install` into the cache (once)
#   s3.sh start STATE     starts it; prints s3://BUCKET/?endpoint=...&credentials_file=... last
#   s3.sh stop STATE      ends it by the PID in STATE/pid (TERM, bounded wait, then KILL)
#
# STATE holds:
#   data/          MinIO's data directory
#   credentials    the generated root key id and secret (mode 0600), in the
#                  format plfs's credentials_file reads; never printed
#   port, pid, log the server's port, process id and output
# The URL printed last carries no secret: only the endpoint and the path of
# the credentials file, which s3:// locations accept as query parameters.
#
# Environment:
#   PLFS_MINIO_VERSION   module version for `go install` (default below)
#   PLFS_MINIO_CACHE     where the binary is kept (default ~/.cache/plfs/minio)
#   PLFS_S3_BUCKET       bucket created at start (default plfs-test)
set -euo pipefail

# The version `prepare` builds: the module version `@latest` resolved to when
# this was written (MinIO of 2026-02-12), pinned so every machine tests the
# same server. Conditional puts (If-None-Match: *) need a 2024 or newer MinIO;
# `start` checks them.
minio_version="${PLFS_MINIO_VERSION:-v0.0.0-20260212201848-7aac2a2c5b7c}"
cache="${PLFS_MINIO_CACHE:-$HOME/.cache/plfs/minio}"
minio="$cache/bin/minio"
bucket="${PLFS_S3_BUCKET:-plfs-test}"
# Bounded waits: startup is ~1 s on a quiet machine, much more on a loaded one.
start_wait_seconds=60
stop_wait_seconds=10

die() { echo "s3.sh: $*" >&2; exit 1; }

prepare() {
  if [ -x "$minio" ]; then
    return 0
  fi
  command -v go >/dev/null 2>&1 ||
    die "Go is not installed, so MinIO cannot be built: install Go (https://go.dev/dl/, or apt-get install golang-go) and run scripts/servers s3 prepare"
  mkdir -p "$cache/bin"
  echo "s3.sh: building MinIO $minio_version with go install (a few minutes, once; cached in $cache)" >&2
  # A build of its own Go caches would double the ~2 GB; the user's module
  # cache is shared with other Go work and survives between runs.
  GOBIN="$cache/bin" go install "github.com/minio/minio@$minio_version" >&2 ||
    die "go install github.com/minio/minio@$minio_version failed (network, disk space, or a Go too old for this MinIO; set PLFS_MINIO_VERSION to another release)"
  [ -x "$minio" ] || die "go install succeeded but $minio is missing"
}

free_port() {
  # Binding port 0 lets the kernel choose; the port is released before MinIO
  # binds it, a small window in which another process could take it. start
  # retries with a new port if MinIO then fails to listen.
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

random_text() {
  # $1 characters of [A-Za-z0-9]; MinIO needs 3+ for the user, 8+ for the password.
  python3 -c 'import secrets, string, sys; alphabet = string.ascii_letters + string.digits
print("".join(secrets.choice(alphabet) for _ in range(int(sys.argv[1]))))' "$1"
}

# Signs one S3 request with curl's SigV4 support and prints the HTTP status;
# the credentials reach curl through a 0600 config file, never the command
# line (visible in ps). Extra arguments go to curl. S3 wants the payload's
# hash in x-amz-content-sha256, which curl 7.88 does not add itself.
s3_status() {
  local method="$1" url="$2"
  shift 2
  curl --silent --output /dev/null --write-out '%{http_code}' --max-time 10 -K "$state/curl-auth" \
    --aws-sigv4 "aws:amz:us-east-1:s3" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
    -X "$method" "$@" "$url" || true
}

# s3_status, again while the server answers 5xx or not at all: MinIO reports
# ready before it serves requests when the machine is busy (seen: 503 on the
# first PUT with eight servers starting at once).
s3_status_settled() {
  local status
  for _ in $(seq $((start_wait_seconds * 5))); do
    status="$(s3_status "$@")"
    case "$status" in 5*|000) sleep 0.2 ;; *) break ;; esac
  done
  echo "$status"
}

start() {
  prepare
  [ ! -f "$state/pid" ] || ! kill -0 "$(cat "$state/pid")" 2>/dev/null ||
    die "a server is already running from $state (pid $(cat "$state/pid")); stop it first"
  mkdir -p "$state/data"
  local user password
  user="plfs$(random_text 12)"
  password="$(random_text 40)"
  (
    umask 077
    printf 'aws_access_key_id = %s\naws_secret_access_key = %s\n' "$user" "$password" >"$state/credentials"
    printf 'user = "%s:%s"\n' "$user" "$password" >"$state/curl-auth"
  )
  local attempt port endpoint pid ready
  for attempt in 1 2 3; do
    port="$(free_port)"
    endpoint="http://127.0.0.1:$port"
    # setsid: the server outlives this script in its own session, so a
    # test harness's process-group signals do not reach it by accident.
    MINIO_ROOT_USER="$user" MINIO_ROOT_PASSWORD="$password" MINIO_BROWSER=off \
      MINIO_UPDATE=off MINIO_CI_CD=1 \
      setsid "$minio" server "$state/data" --address "127.0.0.1:$port" --quiet \
      >"$state/log" 2>&1 </dev/null &
    pid=$!
    echo "$pid" >"$state/pid"
    echo "$port" >"$state/port"
    ready=0
    for _ in $(seq $((start_wait_seconds * 10))); do
      if ! kill -0 "$pid" 2>/dev/null; then
        break
      fi
      if curl --silent --fail --max-time 2 "$endpoint/minio/health/ready" >/dev/null 2>&1; then
        ready=1
        break
      fi
      sleep 0.1
    done
    if [ "$ready" = 1 ]; then
      break
    fi
    if kill -0 "$pid" 2>/dev/null; then
      stop
      die "MinIO did not become ready within ${start_wait_seconds}s; log: $state/log"
    fi
    echo "s3.sh: MinIO exited during startup (attempt $attempt, port $port); log tail:" >&2
    tail -n 5 "$state/log" >&2 || true
  done
  [ "$ready" = 1 ] || die "MinIO would not start; log: $state/log"
  local status
  status="$(s3_status_settled PUT "$endpoint/$bucket")"
  # 409: the bucket is left from an earlier start over the same STATE.
  [ "$status" = 200 ] || [ "$status" = 409 ] ||
    { stop; die "creating bucket $bucket at $endpoint answered HTTP $status"; }
  # The store's atomic container creation rests on conditional puts: a
  # second If-None-Match: * put of one key must be refused with 412.
  local probe="$endpoint/$bucket/plfs-probe-conditional-put" first second
  first="$(s3_status_settled PUT "$probe" -H 'If-None-Match: *' --data-binary probe)"
  second="$(s3_status_settled PUT "$probe" -H 'If-None-Match: *' --data-binary probe)"
  s3_status_settled DELETE "$probe" >/dev/null
  if [ "$first" != 200 ] || [ "$second" != 412 ]; then
    stop
    die "conditional put probe answered HTTP $first then $second (want 200 then 412): this server cannot create objects exclusively, which the s3 store needs"
  fi
  echo "endpoint $endpoint, bucket $bucket, credentials in $state/credentials, log $state/log" >&2
  echo "s3://$bucket/?endpoint=$endpoint&credentials_file=$state/credentials"
}

stop() {
  [ -f "$state/pid" ] || return 0
  local pid
  pid="$(cat "$state/pid")"
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((stop_wait_seconds * 10))); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
      echo "s3.sh: MinIO (pid $pid) ignored TERM for ${stop_wait_seconds}s; killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
  fi
  rm -f "$state/pid"
}

[ $# -eq 2 ] || die "usage: s3.sh prepare|start|stop STATE_DIR"
action="$1" state="$2"
case "$action" in
  prepare) prepare ;;
  start) start ;;
  stop) stop ;;
  *) die "unknown action \"$action\" (prepare, start or stop)" ;;
esac
