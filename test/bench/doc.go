// Package bench holds benchmarks that need a real systemd (build tag
// "integration"; `make bench`). They print figures; they assert nothing
// about speed.
package bench
