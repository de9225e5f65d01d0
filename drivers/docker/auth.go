package docker

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
)

// dockerConfig is the part of a docker config.json the driver reads:
// "auths" keyed by registry ("host:port", "https://host/v1/"...), each
// with "auth" (base64 user:password) or username and password or an
// identity token. Credential helpers (credsStore) are not run.
type dockerConfig struct {
	Auths map[string]authn.AuthConfig `json:"auths"`
}

func readDockerConfig(path string) (dockerConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return dockerConfig{}, fmt.Errorf("auth config: %w", err)
	}
	var cfg dockerConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return dockerConfig{}, fmt.Errorf("auth config %s is not a docker config.json: %w", path, err)
	}
	return cfg, nil
}

// lookup finds the credentials of a registry ("127.0.0.1:5000",
// "index.docker.io").
func (c dockerConfig) lookup(registry string) (authn.AuthConfig, bool) {
	want := []string{registry}
	if registry == "index.docker.io" {
		want = append(want, "docker.io", "registry-1.docker.io")
	}
	for key, ac := range c.Auths {
		host := strings.TrimPrefix(strings.TrimPrefix(key, "https://"), "http://")
		host, _, _ = strings.Cut(host, "/")
		for _, w := range want {
			if host == w {
				return ac, true
			}
		}
	}
	return authn.AuthConfig{}, false
}
