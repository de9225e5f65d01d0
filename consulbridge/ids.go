package consulbridge

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/consul/api"
)

// IDPrefix starts the ID of every service the bridge registers.
const IDPrefix = "unitvisor"

// Meta keys the bridge sets on its services.
const (
	MetaSource = "external-source" // always "unitvisor"
	MetaNode   = "unitvisor-node"
	MetaJob    = "unitvisor-job"
	MetaTask   = "unitvisor-task"
	MetaIndex  = "unitvisor-index"
	MetaUnit   = "unitvisor-unit"
	MetaHash   = "unitvisor-hash" // of the registration, for the anti-entropy diff
	source     = "unitvisor"
)

// nodeIDFile holds the node identity in the data dir.
const nodeIDFile = "node-id"

var nodeIDRE = regexp.MustCompile(`^[0-9a-f]{16}$`)

// NodeID returns the agent's node identity, kept in dataDir/node-id and
// created (16 random hex digits) on first use. It is not the hostname,
// which can change: service IDs built from it stay stable across agent
// restarts and renames, and two agents sharing one Consul agent never
// touch each other's services.
func NodeID(dataDir string) (string, error) {
	path := filepath.Join(dataDir, nodeIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !nodeIDRE.MatchString(id) {
			return "", fmt.Errorf("node identity in %s is %q, not 16 hex digits: fix or remove the file (services registered under the old identity are then orphaned)", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("read node identity: %w", err)
	}
	raw := make([]byte, 8)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("create node identity: %w", err)
	}
	id := hex.EncodeToString(raw)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write node identity: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write node identity: %w", err)
	}
	return id, nil
}

// ownerPrefix starts the IDs of the services of one node.
func ownerPrefix(node string) string { return IDPrefix + ":" + node + ":" }

// ServiceID is the Consul ID of a service of a task instance. ":" cannot
// occur in job, task or service names, so the parts stay apart.
func ServiceID(node, job, task string, index int, service string) string {
	return ownerPrefix(node) + job + ":" + task + ":" + strconv.Itoa(index) + ":" + service
}

// instancePrefix starts the IDs of the services of one task instance.
func instancePrefix(node string, k instKey) string {
	return ownerPrefix(node) + k.job + ":" + k.task + ":" + strconv.Itoa(k.index) + ":"
}

// CheckID is the Consul ID of a check of a service.
func CheckID(serviceID, check string) string { return serviceID + ":" + check }

// owned reports whether a service in Consul is one of this node's.
func owned(node string, s *api.AgentService) bool {
	return strings.HasPrefix(s.ID, ownerPrefix(node)) && s.Meta[MetaSource] == source
}
