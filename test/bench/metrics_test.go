//go:build integration

package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/unitvisor/unitvisor/internal/sdtest"
)

const (
	scrapeTasks = 1000
	scrapes     = 100
)

// scrapeGet fetches url as Prometheus does (gzip) and returns the body.
func scrapeGet(b *testing.B, c *http.Client, url string) string {
	b.Helper()
	resp, err := c.Get(url)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		b.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	return string(body)
}

// dbusCalls sums unitvisor_dbus_call_duration_seconds_count by method.
func dbusCalls(expo string) map[string]float64 {
	out := map[string]float64{}
	s := bufio.NewScanner(strings.NewReader(expo))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		rest, ok := strings.CutPrefix(s.Text(), `unitvisor_dbus_call_duration_seconds_count{method="`)
		if !ok {
			continue
		}
		method, val, _ := strings.Cut(rest, `"} `)
		v, _ := strconv.ParseFloat(val, 64)
		out[method] = v
	}
	return out
}

func countSeries(expo, prefix string) int {
	n := 0
	for _, l := range strings.Split(expo, "\n") {
		if strings.HasPrefix(l, prefix) {
			n++
		}
	}
	return n
}

// BenchmarkScrape1000 runs 1000 sleep tasks through the agent and scrapes
// its /metrics 100 times as Prometheus would (gzip, loopback): it prints
// the latency percentiles and the D-Bus calls the agent made meanwhile
// (from its own unitvisor_dbus_call_duration_seconds, which counts every
// call of units.Conn).
func BenchmarkScrape1000(b *testing.B) {
	conn := sdtest.Conn(b)
	for range b.N {
		a := sdtest.StartAgent(b, `driver "raw_exec" { enabled = true }`)
		job := fmt.Sprintf("job \"scrape\" {\n  task \"sleep\" {\n    driver = \"raw_exec\"\n    count = %d\n"+
			"    config {\n      command = \"/bin/sleep\"\n      args = [\"3600\"]\n    }\n  }\n}\n", scrapeTasks)
		began := time.Now()
		a.MustCLI("job", "run", "-detach", sdtest.WriteJob(b, "scrape.hcl", job))
		waitActive(b, conn, a.Prefix+"-*", scrapeTasks)
		up := time.Since(began)
		murl := a.MetricsURL()
		c := &http.Client{Timeout: 30 * time.Second}
		// Wait until every task is running and has had its usage read
		// (usage_interval: the default 10s).
		var expo string
		sdtest.Eventually(b, 60*time.Second, "1000 running tasks with usage in /metrics", func() bool {
			expo = scrapeGet(b, c, murl)
			return strings.Contains(expo, fmt.Sprintf(`unitvisor_job_running_instances{job="scrape"} %d`, scrapeTasks)) &&
				countSeries(expo, "unitvisor_task_memory_bytes{") == scrapeTasks
		})
		for range 5 { // warm the connection and the agent
			scrapeGet(b, c, murl)
		}
		before := dbusCalls(scrapeGet(b, c, murl))
		lat := make([]time.Duration, 0, scrapes)
		size := 0
		for range scrapes {
			t0 := time.Now()
			body := scrapeGet(b, c, murl)
			lat = append(lat, time.Since(t0))
			size = len(body)
		}
		after := dbusCalls(scrapeGet(b, c, murl))
		calls := 0.0
		var byMethod []string
		for m, v := range after {
			if d := v - before[m]; d != 0 {
				calls += d
				byMethod = append(byMethod, fmt.Sprintf("%s %v", m, d))
			}
		}
		slices.Sort(byMethod)
		slices.Sort(lat)
		pct := func(p int) time.Duration { return lat[(len(lat)*p+99)/100-1] }
		series := 0
		for _, l := range strings.Split(expo, "\n") {
			if l != "" && !strings.HasPrefix(l, "#") {
				series++
			}
		}
		b.ReportMetric(float64(pct(50).Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(pct(99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(calls, "dbus-calls")
		fmt.Printf("\n%d tasks (all active after %s), %d scrapes of /metrics (gzip, loopback):\n", scrapeTasks, up.Round(time.Millisecond), scrapes)
		fmt.Printf("  latency p50 %s  p90 %s  p99 %s  max %s\n", pct(50).Round(10*time.Microsecond),
			pct(90).Round(10*time.Microsecond), pct(99).Round(10*time.Microsecond), lat[len(lat)-1].Round(10*time.Microsecond))
		fmt.Printf("  %d series, %d KiB uncompressed\n", series, size/1024)
		total := 0.0
		for _, v := range before {
			total += v
		}
		fmt.Printf("  D-Bus calls by the agent during the scrapes: %v %v (before them: %v, of which StartTransientUnit %v)\n",
			calls, byMethod, total, before["StartTransientUnit"])
		a.MustCLI("job", "stop", "scrape")
		a.Kill()
	}
}
