package metrics

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
)

// encoded is the text exposition of the per-task and per-job families at
// one version of the state. At a thousand tasks these are ~16000 series:
// gathering and encoding them takes tens of milliseconds of CPU, so it
// happens when they change (after events settle and after each usage
// reading), not on every scrape.
type encoded struct {
	mu      sync.Mutex
	valid   bool
	version uint64
	text    []byte
}

var textFormat = expfmt.NewFormat(expfmt.TypeTextPlain)

// perTaskText returns the exposition of the per-task and per-job families,
// encoding it again only when something changed since the last time.
func (m *Metrics) perTaskText() []byte {
	m.encoded.mu.Lock()
	defer m.encoded.mu.Unlock()
	m.mu.RLock()
	v := m.version
	m.mu.RUnlock()
	if m.encoded.valid && m.encoded.version == v {
		return m.encoded.text
	}
	// Changes during Gather bump the version past v: the next call
	// encodes again, so nothing newer is ever hidden behind v.
	families, err := m.perTask.Gather()
	if err != nil {
		m.log.Error("metrics: gather task metrics", "err", err)
	}
	var buf bytes.Buffer
	buf.Grow(len(m.encoded.text))
	enc := expfmt.NewEncoder(&buf, textFormat)
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			m.log.Error("metrics: encode task metrics", "err", err)
			return m.encoded.text
		}
	}
	m.encoded.valid, m.encoded.version, m.encoded.text = true, v, buf.Bytes()
	return m.encoded.text
}

// Handler serves /metrics in Prometheus's text format (and a pointer to it
// on /). The agent, Consul, Go and process collectors are gathered on each
// scrape; the per-task and per-job families come encoded from memory.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.InstrumentMetricHandler(m.reg, http.HandlerFunc(m.serveMetrics)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "unitvisor agent: metrics at /metrics")
	})
	return mux
}

func (m *Metrics) serveMetrics(w http.ResponseWriter, r *http.Request) {
	perTask := m.perTaskText()
	families, err := m.reg.Gather()
	if err != nil {
		// What could be gathered is served, as promhttp's ContinueOnError.
		m.log.Error("metrics: gather", "err", err)
	}
	h := w.Header()
	h.Set("Content-Type", string(textFormat))
	h.Add("Vary", "Accept-Encoding")
	var out io.Writer = w
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		// BestSpeed: a third of the default level's CPU for a slightly
		// larger body, on a scrape of a megabyte or two.
		gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		defer gz.Close()
		out = gz
	}
	enc := expfmt.NewEncoder(out, textFormat)
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			return // the client went away
		}
	}
	_, _ = out.Write(perTask)
}

// acceptsGzip reports whether an Accept-Encoding header allows gzip.
func acceptsGzip(header string) bool {
	for _, part := range strings.Split(header, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}
