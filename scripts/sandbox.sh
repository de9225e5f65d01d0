#!/usr/bin/env bash
# sandbox.sh — a throwaway container with a real systemd as PID 1, for hosts
# whose PID 1 is not systemd (see DESIGN.md). On a host that runs systemd,
# "exec" runs the command directly and start/stop do nothing.
#
#   scripts/sandbox.sh start          boot it (idempotent), wait until systemd is up
#   scripts/sandbox.sh exec CMD...    run CMD inside it (cwd = the checkout)
#   scripts/sandbox.sh stop           shut it down
#   scripts/sandbox.sh run CMD...     start, exec, stop (stop also on failure)
set -euo pipefail

name=${UV_SANDBOX_NAME:-uvtest}
top=$(cd "$(dirname "$0")/.." && pwd)
# The checkout is bound into the sandbox at the same path, except under /tmp
# or /var/tmp: the sandbox's systemd-tmpfiles --boot would empty it there.
case "$top/" in
/tmp/*|/var/tmp/*) inside=/opt/unitvisor-src ;;
*) inside=$top ;;
esac
state=/run/unitvisor-sandbox-$name
mkdir -p "$state"

host_has_systemd() { [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && [ -d /run/systemd/system ]; }

leader() { # PID 1 of the container: the child of nspawn
	local np
	np=$(cat "$state/nspawn.pid" 2>/dev/null) || return 1
	kill -0 "$np" 2>/dev/null || return 1
	pgrep -P "$np" | head -n1
}

in_sandbox() { nsenter -t "$(leader)" -a "$@"; }

start() {
	host_has_systemd && return 0
	if leader >/dev/null 2>&1 && [ -n "$(leader)" ]; then return 0; fi
	command -v systemd-nspawn >/dev/null || { echo "sandbox: systemd-nspawn missing: apt-get install systemd-container" >&2; exit 1; }
	local gomod gocache binds=()
	gomod=$(go env GOMODCACHE); gocache=$(go env GOCACHE)
	mkdir -p "$gomod" "$gocache"
	binds+=(--bind="$top:$inside" --bind="$gomod" --bind="$gocache")
	for extra in ${UV_SANDBOX_BINDS:-}; do binds+=(--bind="$extra"); done
	# Services a Debian package enabled on the host would start inside too and
	# take shared ports; tests start their own instances. (test/pkg lifts
	# the unitvisor mask to install the package it built.)
	local masks=()
	for s in prometheus prometheus-node-exporter docker-registry postgresql consul unitvisor; do
		masks+=(--bind-ro=/dev/null:/etc/systemd/system/$s.service)
	done
	systemd-nspawn --quiet --register=no --keep-unit -D / --volatile=yes \
		--overlay=/etc::/etc --overlay=/usr::/usr --overlay=/var::/var --capability=all \
		"${binds[@]}" "${masks[@]}" -M "$name" -b --console=pipe \
		>"$state/console.log" 2>&1 </dev/null &
	echo $! >"$state/nspawn.pid"
	local i
	for i in $(seq 1 100); do
		if [ -n "$(leader 2>/dev/null)" ] &&
			st=$(in_sandbox systemctl is-system-running 2>/dev/null) ; then break; fi
		case "${st:-}" in running|degraded) break;; esac
		sleep 0.2
	done
	for i in $(seq 1 100); do
		st=$(in_sandbox systemctl is-system-running 2>/dev/null || true)
		case "$st" in running|degraded) break;; esac
		sleep 0.2
	done
	case "$st" in running|degraded) ;; *) echo "sandbox: systemd did not come up ($st)"; tail -n 30 "$state/console.log" >&2; exit 1;; esac
	# nspawn mounts the v1 controllers read-only: remount them so limits and
	# accounting work, then re-exec systemd so it notices.
	in_sandbox sh -c 'mount -o remount,rw /sys/fs/cgroup 2>/dev/null; for c in cpu cpuacct memory pids blkio cpuset devices; do [ -d /sys/fs/cgroup/$c ] && mount -o remount,bind,rw /sys/fs/cgroup/$c 2>/dev/null; done; true'
	in_sandbox systemctl daemon-reexec
	for i in $(seq 1 50); do in_sandbox systemctl is-system-running >/dev/null 2>&1 && break; st=$(in_sandbox systemctl is-system-running 2>/dev/null || true); case "$st" in running|degraded) break;; esac; sleep 0.2; done
	echo "sandbox: $name up (PID1 $(leader))" >&2
}

stop() {
	host_has_systemd && return 0
	local np
	np=$(cat "$state/nspawn.pid" 2>/dev/null) || return 0
	if kill -0 "$np" 2>/dev/null; then
		kill -TERM "$np"
		for _ in $(seq 1 150); do kill -0 "$np" 2>/dev/null || break; sleep 0.2; done
		kill -0 "$np" 2>/dev/null && kill -KILL "$np"
	fi
	rm -f "$state/nspawn.pid"
}

exec_in() {
	if host_has_systemd; then (cd "$top" && "$@"); return; fi
	local l; l=$(leader) || { echo "sandbox: not running (scripts/sandbox.sh start)" >&2; exit 1; }
	nsenter -t "$l" -a env -i PATH="/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
		HOME=/root GOMODCACHE="$(go env GOMODCACHE)" GOCACHE="$(go env GOCACHE)" GOFLAGS="$(go env GOFLAGS)" \
		GOPROXY="$(go env GOPROXY)" CI="${CI:-}" TERM="${TERM:-dumb}" ${UV_SANDBOX_ENV:-} \
		sh -c 'cd "$0" && exec "$@"' "$inside" "$@"
}

cmd=${1:-}; shift || true
case "$cmd" in
start) start ;;
stop) stop ;;
exec) exec_in "$@" ;;
run) start; trap stop EXIT; exec_in "$@" ;;
*) echo "usage: $0 start|stop|exec CMD...|run CMD..." >&2; exit 2 ;;
esac
