package main

import (
	"fmt"
	"log/slog"

	"github.com/unitvisor/unitvisor/config"
	"github.com/unitvisor/unitvisor/consulbridge"
	"github.com/unitvisor/unitvisor/units"
)

// newConsulBridge builds the Consul bridge, or returns nil when the agent
// config has no consul block.
func newConsulBridge(cfg *config.Agent, conn *units.Conn, obs consulbridge.Observer, log *slog.Logger) (*consulbridge.Bridge, error) {
	c := cfg.Consul
	if c == nil {
		return nil, nil
	}
	node, err := consulbridge.NodeID(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	client, err := consulbridge.NewClient(consulbridge.ClientConfig{
		Address: c.Address, Token: c.Token, TokenFile: c.TokenFile,
		CAFile: c.CAFile, CertFile: c.CertFile, KeyFile: c.KeyFile, InsecureSkipVerify: c.InsecureSkipVerify,
	})
	if err != nil {
		return nil, fmt.Errorf("%w (check the consul block of the agent config)", err)
	}
	return consulbridge.New(consulbridge.Config{
		Node: node, SyncInterval: c.Sync(), UnitPrefix: cfg.UnitPrefix, DataDir: cfg.DataDir,
	}, client, conn, obs, log), nil
}
