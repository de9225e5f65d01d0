#!/usr/bin/env bash
# demo.sh — start the agent as a systemd unit (inside the sandbox when PID 1
# is not systemd) and run the example job; `demo.sh stop` ends it all.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
sb="$top/scripts/sandbox.sh"
export UV_SANDBOX_NAME=uvdemo

if [ "${1:-}" = stop ]; then
	"$sb" exec sh -c 'bin/unitvisor job stop -purge web >/dev/null 2>&1; systemctl stop unitvisor-demo.service' || true
	"$sb" stop
	exit 0
fi

[ -x "$top/bin/unitvisor" ] || (cd "$top" && make build)
"$sb" start
# The agent is a unit of its own; the tasks it starts are units too and
# outlive it.
"$sb" exec sh -c 'systemctl is-active -q unitvisor-demo.service ||
	systemd-run --unit unitvisor-demo.service --property Type=notify --quiet \
		"$PWD/bin/unitvisor" agent -config "$PWD/examples/agent.hcl"'
"$sb" exec bin/unitvisor job run examples/web.hcl
"$sb" exec bin/unitvisor job status web
port=$("$sb" exec sh -c "bin/unitvisor job status -json web | python3 -c 'import json,sys; print(json.load(sys.stdin)[0][\"instances\"][0][\"ports\"][\"http\"])'")
echo
echo "GET http://127.0.0.1:$port/ answered by uv-web-api@0.service:"
curl -fsS "http://127.0.0.1:$port/" | head -n 5 || true
cat <<EOT

Try (inside the sandbox: prefix with scripts/sandbox.sh exec, and set UV_SANDBOX_NAME=uvdemo):
  systemctl status 'uv-web-api@0.service'
  journalctl UNITVISOR_JOB=web
  bin/unitvisor logs web api
Stop everything: make stop-demo
EOT
