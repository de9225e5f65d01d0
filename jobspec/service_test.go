package jobspec

import (
	"reflect"
	"testing"
	"time"
)

func TestParseServices(t *testing.T) {
	hclSrc := `job "web" {
		task "api" {
			driver = "exec"
			config { command = "/bin/true" }
			port "http" {}
			port "admin" {}
			shutdown_delay = "3s"
			service {
				name = "api"
				port = "http"
				tags = ["v1", "i${UNITVISOR_INDEX}"]
				meta {
					version = "1"
					unit    = "${UNITVISOR_UNIT}"
				}
				address = "10.0.0.${UNITVISOR_INDEX}"
				enable_tag_override = true
				check {
					type     = "http"
					path     = "/health?i=${UNITVISOR_INDEX}"
					method   = "head"
					interval = "5s"
					timeout  = "1s"
					check_restart {
						limit = 3
						grace = "30s"
					}
				}
				check {
					name = "admin-port"
					type = "tcp"
					port = "admin"
				}
				check { type = "ttl" }
				check {
					type    = "script"
					command = "${UNITVISOR_TASK_DIR}/check.sh"
					args    = ["-q", "${UNITVISOR_PORT_http}"]
					check_restart { limit = 1 }
				}
			}
			service {
				name = "admin"
			}
		}
	}`
	jsonSrc := `{"job": {"web": {"task": {"api": {
		"driver": "exec",
		"config": {"command": "/bin/true"},
		"port": {"http": {}, "admin": {}},
		"shutdown_delay": "3s",
		"service": [
			{
				"name": "api", "port": "http", "tags": ["v1", "i${UNITVISOR_INDEX}"],
				"meta": {"version": "1", "unit": "${UNITVISOR_UNIT}"},
				"address": "10.0.0.${UNITVISOR_INDEX}", "enable_tag_override": true,
				"check": [
					{"type": "http", "path": "/health?i=${UNITVISOR_INDEX}", "method": "head", "interval": "5s", "timeout": "1s",
					 "check_restart": {"limit": 3, "grace": "30s"}},
					{"name": "admin-port", "type": "tcp", "port": "admin"},
					{"type": "ttl"},
					{"type": "script", "command": "${UNITVISOR_TASK_DIR}/check.sh", "args": ["-q", "${UNITVISOR_PORT_http}"],
					 "check_restart": {"limit": 1}}
				]
			},
			{"name": "admin"}
		]
	}}}}}`
	want := []Service{
		{
			Name: "api", Port: "http", Tags: []string{"v1", "i${UNITVISOR_INDEX}"},
			Meta:    map[string]string{"version": "1", "unit": "${UNITVISOR_UNIT}"},
			Address: "10.0.0.${UNITVISOR_INDEX}", EnableTagOverride: true,
			Checks: []Check{
				{Name: "http", Type: CheckHTTP, Port: "http", Path: "/health?i=${UNITVISOR_INDEX}", Method: "HEAD", Protocol: "http",
					Interval: 5 * time.Second, Timeout: time.Second, CheckRestart: &CheckRestart{Limit: 3, Grace: 30 * time.Second}},
				{Name: "admin-port", Type: CheckTCP, Port: "admin", Interval: 10 * time.Second, Timeout: 2 * time.Second},
				{Name: "ttl", Type: CheckTTL},
				{Name: "script", Type: CheckScript, Command: "${UNITVISOR_TASK_DIR}/check.sh", Args: []string{"-q", "${UNITVISOR_PORT_http}"},
					Interval: 10 * time.Second, Timeout: 2 * time.Second, CheckRestart: &CheckRestart{Limit: 1, Grace: time.Second}},
			},
		},
		{Name: "admin", Checks: []Check{{Name: "ttl", Type: CheckTTL}}},
	}
	for _, src := range []struct{ file, text string }{{"svc.hcl", hclSrc}, {"svc.json", jsonSrc}} {
		job, err := Parse(src.file, []byte(src.text))
		if err != nil {
			t.Fatalf("%s: %v", src.file, err)
		}
		task := job.Tasks[0]
		if !reflect.DeepEqual(task.Services, want) {
			t.Errorf("%s: services\n got %s\nwant %s", src.file, toJSON(t, task.Services), toJSON(t, want))
		}
		if task.ShutdownDelay != 3*time.Second {
			t.Errorf("%s: shutdown_delay = %s, want 3s", src.file, task.ShutdownDelay)
		}
	}
}

func TestCheckMetaKey(t *testing.T) {
	for key, ok := range map[string]bool{
		"version": true, "a_b-c": true, "external-source": false, "consul-x": false,
		"unitvisor-node": false, "a.b": false, "": false,
	} {
		if err := checkMetaKey(key); (err == nil) != ok {
			t.Errorf("checkMetaKey(%q) = %v, want ok=%v", key, err, ok)
		}
	}
}
