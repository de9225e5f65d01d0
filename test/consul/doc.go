// Package consul holds the end-to-end tests of the Consul bridge: the
// unitvisor agent, a real systemd and a real Consul dev agent
// (internal/consultest) on loopback (build tag "integration").
package consul
