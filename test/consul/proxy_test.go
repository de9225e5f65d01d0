//go:build integration

package consul

import (
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
)

// countingProxy forwards to a Consul agent and counts requests by method
// and path.
type countingProxy struct {
	addr string
	mu   sync.Mutex
	n    map[string]int
}

func newCountingProxy(t *testing.T, target string) *countingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &countingProxy{addr: ln.Addr().String(), n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.n[r.Method+" "+r.URL.Path]++
		p.mu.Unlock()
		rp.ServeHTTP(w, r)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

func (p *countingProxy) reset() {
	p.mu.Lock()
	p.n = map[string]int{}
	p.mu.Unlock()
}

func (p *countingProxy) counts() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.n))
	for k, v := range p.n {
		out[k] = v
	}
	return out
}
