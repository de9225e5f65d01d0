package consulbridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/consul/api"
)

// ClientConfig says how to reach the local Consul agent.
type ClientConfig struct {
	// Address is host:port, or a URL: http://, https:// or unix://path.
	// Without a scheme, https is used when a TLS file is set.
	Address   string
	Token     string // ACL token
	TokenFile string // file holding the ACL token (read at start)
	CAFile    string
	CertFile  string
	KeyFile   string
	// InsecureSkipVerify turns off verification of Consul's certificate.
	InsecureSkipVerify bool
	// Timeout bounds each call; default 10s.
	Timeout time.Duration
	// WrapTransport, if set, wraps the HTTP transport (tests count calls).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Client is the Consul interface over the agent's HTTP API.
type Client struct {
	api     *api.Client
	timeout time.Duration
}

// NewClient returns a client of the local Consul agent. It does not
// connect: Consul may be down when the agent starts.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.Token != "" && cfg.TokenFile != "" {
		return nil, errors.New("consul: set token or token_file, not both")
	}
	tls := api.TLSConfig{CAFile: cfg.CAFile, CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, InsecureSkipVerify: cfg.InsecureSkipVerify}
	addr, scheme := cfg.Address, "http"
	if !strings.Contains(addr, "://") && (cfg.CAFile != "" || cfg.CertFile != "") {
		scheme = "https"
	}
	if host, ok := strings.CutPrefix(addr, "https://"); ok {
		addr, scheme = host, "https"
	} else if host, ok := strings.CutPrefix(addr, "http://"); ok {
		addr = host
	}
	transport := &http.Transport{
		Proxy:               nil, // loopback, never through a proxy
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        16,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     90 * time.Second,
	}
	hc, err := api.NewHttpClient(transport, tls)
	if err != nil {
		return nil, fmt.Errorf("consul tls settings: %w", err)
	}
	if cfg.WrapTransport != nil {
		hc.Transport = cfg.WrapTransport(hc.Transport)
	}
	ac := &api.Config{Address: addr, Scheme: scheme, Token: cfg.Token, TokenFile: cfg.TokenFile, TLSConfig: tls}
	if !strings.HasPrefix(addr, "unix://") {
		ac.HttpClient = hc
	}
	c, err := api.NewClient(ac)
	if err != nil {
		return nil, fmt.Errorf("consul client: %w", err)
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	return &Client{api: c, timeout: timeout}, nil
}

func (c *Client) query(ctx context.Context) (*api.QueryOptions, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	return (&api.QueryOptions{}).WithContext(ctx), cancel
}

// Register registers (or replaces) a service and its checks; checks it no
// longer has are removed.
func (c *Client) Register(ctx context.Context, reg *api.AgentServiceRegistration) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	err := c.api.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{ReplaceExistingChecks: true}.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("register service %s: %w", reg.ID, err)
	}
	return nil
}

// Deregister removes a service; one that is not there is gone already.
func (c *Client) Deregister(ctx context.Context, id string) error {
	q, cancel := c.query(ctx)
	defer cancel()
	err := c.api.Agent().ServiceDeregisterOpts(id, q)
	if err != nil && !isStatus(err, http.StatusNotFound) {
		return fmt.Errorf("deregister service %s: %w", id, err)
	}
	return nil
}

// UpdateTTL sets the status and output of a TTL check.
func (c *Client) UpdateTTL(ctx context.Context, checkID, status, output string) error {
	q, cancel := c.query(ctx)
	defer cancel()
	if err := c.api.Agent().UpdateTTLOpts(checkID, output, status, q); err != nil {
		return fmt.Errorf("update check %s: %w", checkID, err)
	}
	return nil
}

// Services lists the local agent's services.
func (c *Client) Services(ctx context.Context) (map[string]*api.AgentService, error) {
	q, cancel := c.query(ctx)
	defer cancel()
	s, err := c.api.Agent().ServicesWithFilterOpts("", q)
	if err != nil {
		return nil, fmt.Errorf("list services: %w", err)
	}
	return s, nil
}

// Checks lists the local agent's checks.
func (c *Client) Checks(ctx context.Context) (map[string]*api.AgentCheck, error) {
	q, cancel := c.query(ctx)
	defer cancel()
	s, err := c.api.Agent().ChecksWithFilterOpts("", q)
	if err != nil {
		return nil, fmt.Errorf("list checks: %w", err)
	}
	return s, nil
}

// isStatus reports whether err is an HTTP error response with that code.
func isStatus(err error, code int) bool {
	var se api.StatusError
	return errors.As(err, &se) && se.Code == code
}

// unreachable reports whether err means Consul could not be asked at all
// or cannot answer now (down, restarting, no leader): then all calls wait,
// instead of each service backing off on its own.
func unreachable(err error) bool {
	var se api.StatusError
	if errors.As(err, &se) {
		return se.Code >= 500 && !strings.Contains(se.Body, "associated TTL")
	}
	return true
}

// stale reports whether err says the service or check is not (or not
// as we registered it) in Consul, so it must be registered again.
func stale(err error) bool {
	var se api.StatusError
	return errors.As(err, &se) && (se.Code == http.StatusNotFound || strings.Contains(se.Body, "associated TTL"))
}
