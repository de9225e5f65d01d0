// Package e2e holds the end-to-end tests: the unitvisor binary, a real
// agent and a real systemd (build tag "integration"; run by `make test`
// inside the sandbox when PID 1 is not systemd).
package e2e
